"""The pure core: pool documents (shapes ``poolshapes``, loading ``poolfile``, writing back
``poolwrite``), the pool model and registry (``pools``), the usage index (``usage``), admission
(``admission`` with ``decision``, ``quota``, ``capacity``), pod overrides (``overrides``),
reservations, placement, launch options, Kubernetes semantics (``kube/``: names, selectors, node
affinity, tolerations; ``quantities``, ``labels``), and output formatting and report rows
(``formatting``, ``reports``).

Nothing here does I/O: no tornado, no Kubernetes clients, no asyncio, no sockets, no file reads.
The service, the spawner, the CLI and the simulator feed it objects and text and act on what it
returns. ``tests/test_layers.py`` holds it to that.
"""
