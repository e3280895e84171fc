"""The simulated API server's objects: the store (what etcd and the API server's registry do),
what it fills in on create, refuses (422) and answers with (``Status``), the three PATCH types,
lists and watches, the Events components write, the core/v1 resources served, and failures on
demand. Imports no other room of the simulator.
"""
