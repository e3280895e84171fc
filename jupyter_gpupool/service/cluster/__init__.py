"""Talking to Kubernetes and to JupyterHub: the list+watch of nodes and pods that feeds the usage
index (:mod:`.watch`, :mod:`.podlist`), the other Kubernetes calls (:mod:`.kube`), the hub's API
(:mod:`.hubapi`) and the one backoff policy for retries (:mod:`.retry`).

This room imports no other room of the service (``tests/test_layers.py``)."""
