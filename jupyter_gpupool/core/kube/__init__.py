"""Kubernetes semantics, written once for the core and the simulator.

The product reasons about Kubernetes objects (label keys in pool documents, tolerations in pod
templates) and the simulator has to answer as the API server and the scheduler would. Both read
the rules from here, so they cannot disagree:

- :mod:`.names`: label keys and values, DNS-1123 names (``k8s.io/apimachinery`` validation);
- :mod:`.tolerations`: toleration validation (``ValidateTolerations``) and matching
  (``Toleration.ToleratesTaint``);
- :mod:`.labelselectors`, :mod:`.fieldselectors`: selector syntax and matching;
- :mod:`.nodeaffinity`: ``nodeSelector`` and node affinity, as the scheduler evaluates them.
- :mod:`.quantities`: resource quantities (``500m``, ``512Gi``), as ``resource.Quantity`` parses
  them.

Everything here is pure: no I/O, only the dictionaries it is given.
"""
