"""Rules in time: bookings and their windows (and which are in force now), the limits on
running servers (idle policy, runtime limit, budgets while servers run) with the notices they
give first, wait estimates for the line, and the work saved before a stop.

The rules are in ``docs/pools.md``. Imports :mod:`..accounting`, :mod:`..usage` and below.
"""
