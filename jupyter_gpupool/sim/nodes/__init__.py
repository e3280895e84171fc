"""The simulated nodes: cluster files (what nodes there are), how their GPUs are cut (MIG,
shared replicas, HAMi), the kubelet and its device manager, pods run as local processes, the
DCGM exporter, and the MIG manager. Imports :mod:`..objects` only.
"""
