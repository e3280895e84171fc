"""The simulated cluster's HTTP front: Kubernetes' REST paths for core/v1 (the door every
request goes through, the handlers, server-side tables, the pod proxy) and the simulator's own
``/sim/v1`` endpoints. Imports :mod:`..objects` and :mod:`..nodes`.
"""
