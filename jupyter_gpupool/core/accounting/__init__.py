"""GPU-hours: the ledger of server sessions (when a server's time on GPUs begins and ends, and
how it ended) and budgets over rolling windows (what is spent and what is left).

The rules are in ``docs/pools.md`` (budgets). Imports :mod:`..usage` and below.
"""
