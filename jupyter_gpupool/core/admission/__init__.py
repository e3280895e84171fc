"""Admission: the request and the state it reads, the walk down a user's pools
(:func:`.walk.decide`), quota, capacity on one node, shape fitting, bookings' charge and fit,
pod overrides, and the queue's order.

The rules are in ``docs/pools.md`` (quotas and admission, the line). Imports every room below
it; only the front ends above the core import it.
"""
