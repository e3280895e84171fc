"""The pure core, in rooms by what they hold (``docs/architecture.md``, the core's rooms):

- :mod:`.kube`: Kubernetes semantics (names, selectors, node affinity, tolerations, quantities),
  shared with the simulator;
- :mod:`.documents`: the spec of a document's fields and the YAML and JSON readers that keep
  FILE:LINE, with the kinds of value they share (whole numbers, durations);
- :mod:`.usage`: label and resource names, the shapes a node offers, GPU-equivalents, the usage
  index kept from watch events, reservations, utilization readings, usage history;
- :mod:`.accounting`: the ledger of server sessions (GPU-hours) and budgets;
- :mod:`.time`: bookings and their windows in force, the limits on running servers (idle,
  runtime, budgets while running) and their notices, wait estimates, work saved before a stop;
- :mod:`.pools`: the pool model and registry, templates, placement, and pool files (their
  documents' shapes, reading, writing back, booking documents);
- :mod:`.admission`: the request and its state, the walk down a user's pools, quota, capacity,
  shape fitting, bookings' charge and fit, pod overrides, the queue's order;
- :mod:`.words`: what every front end prints alike (tables, rows of pools, shapes and bookings,
  reports, GPU use in words, launch options).

Each room imports only the rooms above it in this list (words: none past pools), and nothing
here does I/O: no tornado, no Kubernetes clients, no asyncio, no sockets, no file reads. The
service, the spawner, the CLI and the simulator feed it objects and text and act on what it
returns. ``tests/test_layers.py`` holds it to both.
"""
