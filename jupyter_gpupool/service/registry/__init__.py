"""Pools and quotas stored and changed: the documents as named YAML texts and how a change rewrites
them (:mod:`.documents`), where they are kept, files or a ConfigMap (:mod:`.store`), and the
changes themselves, checked first, then applied to Kubernetes and the store (:mod:`.changes`)."""
