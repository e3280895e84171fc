"""Pools: the pool model and its registry, pod templates, where a server runs, and pool files
(their documents' exact shapes, reading them into the model, writing the model back), booking
documents included.

Imports :mod:`..time`, :mod:`..accounting`, :mod:`..usage` and below; never admission or words.
"""
