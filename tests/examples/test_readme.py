"""The README and docs a newcomer follows: the Quickstart is the two commands, every relative link
leads to a file (and heading) that exists, and every ``gpupool`` command shown is one the CLI
accepts."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from jupyter_gpupool.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {slug(m) for m in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def test_quickstart_is_the_two_commands():
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quickstart", 1)[1]
    block = FENCE.search(section)
    assert block is not None
    assert block.group(2).splitlines() == [
        'pip install -e ".[demo]" && gpupool demo',
        "bash scripts/test.sh",
    ]
    # the tour it sends people to is there
    assert (ROOT / "examples" / "gpupool-tour.ipynb").exists()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_lead_somewhere(page):
    broken = []
    for target in LINK.findall(FENCE.sub("", page.read_text())):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.name}")
    assert broken == []


def shown_commands() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for lang, body in FENCE.findall(page.read_text()):
            if lang not in ("console", "bash", "sh", ""):
                continue
            joined = re.sub(r"\\\n\s*", " ", body)
            for line in joined.splitlines():
                line = re.sub(r"^\$ ", "", line.strip())
                line = line.split("&&")[-1].strip()  # `pip install ... && gpupool demo`
                line = re.split(r"\s+#\s", line)[0].rstrip(" &")
                if line.startswith("gpupool ") and " [" not in line:  # not a usage synopsis
                    found.append((page.name, line))
    return found


def test_the_docs_show_gpupool_commands():
    names = {page for page, _ in shown_commands()}
    assert {"README.md", "cli.md"} <= names


@pytest.mark.parametrize("page,line", shown_commands())
def test_every_gpupool_command_shown_parses(page, line):
    argv = [a for a in shlex.split(line)[1:] if a != "..."]
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:
        pytest.fail(f"{page}: `{line}` does not parse (exit {e.code})")
    assert callable(getattr(args, "func", None)), f"{page}: `{line}` names no verb"


def test_the_cluster_steps_give_the_demos_version_of_each_command():
    """The setup steps are for a real cluster; beside each `gpupool` command that names the
    reader's own files, nodes or hub, the demo's version parses and names what the demo has
    (tried on a running demo when written: each of them works there)."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Setting it up on a cluster", 1)[1].split("\n## ", 1)[0]
    assert "These steps are for a real cluster" in section
    demo = [
        re.sub(r"\s+", " ", c)
        for said in re.findall(r"In the demo: (.*?)(?:\n\d\.|\n\n|$)", section, re.S)
        for c in re.findall(r"`(gpupool [^`]+)`", said)
    ]
    assert demo == [
        "gpupool label node node-6 runwhere.ai/pool=training-pool --overwrite",
        "gpupool label node node-6 runwhere.ai/pool-",
        "gpupool validate -f examples/pools",
        "gpupool create -f examples/pools",
    ]
    cluster = (ROOT / "examples" / "cluster.yaml").read_text()
    assert "- name: node-6\n" in cluster and (ROOT / "examples" / "pools").is_dir()
    for line in demo:
        args = build_parser().parse_args(shlex.split(line)[1:])
        assert callable(getattr(args, "func", None)), line


def test_the_status_bar_example_has_the_utilization_the_item_shows():
    text = (ROOT / "README.md").read_text()
    said = re.search(r"\*\*JupyterLab's status bar\*\*[^`]*`([^`]+)`", text)
    assert said is not None and re.fullmatch(
        r"\d+ \u00d7 \S+ \u00b7 \S+ \u00b7 \d+%", said.group(1)
    )
