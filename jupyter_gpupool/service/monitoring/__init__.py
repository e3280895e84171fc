"""Watching use: GPU utilization polled from DCGM or Prometheus (:mod:`.polling`), the idle policy
at work (:mod:`.idlewatch`) and the Prometheus metrics the service serves (:mod:`.metrics`)."""
