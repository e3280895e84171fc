"""Documents as text: the declarative spec of a document's fields, YAML and JSON readers that
keep each value's FILE:LINE, and the kinds of value they share (whole numbers, durations).

Nothing here knows a pool: :mod:`..pools` describes its documents with these parts and builds
the model from them. This room imports no other room of the core but :mod:`..kube`.
"""
