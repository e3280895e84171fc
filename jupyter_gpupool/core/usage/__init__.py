"""What runs and what it holds: the label and resource names on Kubernetes objects, the shapes a
node offers (whole GPUs, MIG instances, shared GPUs, HAMi slices), GPU amounts in
GPU-equivalents, and the usage index kept from watch events (nodes, pods, relists, their records
and rows), with the reservations not yet seen in it, GPU utilization readings and usage history.

Kubernetes is the only record of usage (``docs/architecture.md``); nothing here knows a quota
or a booking. Imports :mod:`..kube` and :mod:`..documents` only.
"""
