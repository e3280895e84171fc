"""YAML documents an attacker would send, shared by the core, CLI and service tests."""

from __future__ import annotations


def laughs(levels: int = 9, head: str = "kind: pool\nversion: v0.1\n") -> str:
    """ "Billion laughs": each level a list of ten aliases to the one above (10**levels leaves).

    The first anchor is on line ``head``'s lines + 1.
    """
    lines = [head.rstrip("\n"), 'l0: &l0 "lol"']
    for i in range(1, levels + 1):
        refs = ",".join([f"*l{i - 1}"] * 10)
        lines.append(f"l{i}: &l{i} [{refs}]")
    return "\n".join(lines) + "\n"


#: A quota document naming ``dev-pool`` twice (limit 4, then 0): read as its last value, the pool
#: would silently get the second. The second name is on line 7, the first on line 5.
QUOTA_TWICE = """\
kind: quota
version: v0.1
quota: {name: q}
pools:
  dev-pool:
    user-default: {limit: 4}
  dev-pool:
    user-default: {limit: 0}
"""
