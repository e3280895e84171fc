"""What the service remembers: the database opened and written off the event loop
(:mod:`.memory`), the ledger of server sessions (:mod:`.ledger`), the budgets' sessions in memory
(:mod:`.budgetbook`), the usage samples of the pools page's chart (:mod:`.samples`) and the change
log (:mod:`.changelog`).

The only room that imports :mod:`jupyter_gpupool.db` (``tests/test_layers.py``)."""
