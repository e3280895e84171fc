"""The pure core: pool documents, the pool model and registry, usage index, admission,
reservations, placement, Kubernetes semantics (quantities, labels, tolerations) and report rows.

Nothing here does I/O: no tornado, no Kubernetes clients, no asyncio, no sockets, no file reads.
The service, the spawner, the CLI and the simulator feed it objects and text and act on what it
returns. ``tests/test_layers.py`` holds it to that.
"""
