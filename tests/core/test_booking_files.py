"""``kind: booking`` documents in pool files: loaded, checked at FILE:LINE, written back."""

from __future__ import annotations

import datetime as dt
import json

import pytest
import yaml

from jupyter_gpupool.core.documents.yaml_reader import DocumentError
from jupyter_gpupool.core.pools.reading import load_texts
from jupyter_gpupool.core.pools.writing import registry_to_documents
from jupyter_gpupool.core.time.bookings import Once, Weekly, Window

POOLS = """\
kind: pool
version: v0.1
pool: {name: training-pool}
nodes: {gpu-node-1: {gpu-type: A100}}
shapes:
  - {id: whole}
  - {id: mig-1g.10gb}
---
kind: pool
version: v0.1
pool: {name: dev-pool}
"""

CS231 = """\
kind: booking
version: v0.1
booking: {name: cs231, description: CS231 lab}
pool: training-pool
shape: mig-1g.10gb
gpus: 40
groups: [cs231]
users: []
window:
  weekly: {days: [tue, thursday], start: "10:00", end: "12:00"}
  from: 2027-01-12
  until: 2027-03-30
  timezone: Europe/Berlin
---
kind: booking
booking: {name: ml-ops}
pool: dev-pool
gpus: 2
groups: [ml-ops]
users: [carol]
window:
  once: {start: "2027-01-19T11:00", end: "2027-01-19 13:00"}
  timezone: UTC
"""


def test_booking_documents_load_into_the_registry():
    reg = load_texts([(POOLS, "pools.yaml"), (CS231, "bookings.yaml")])
    cs, ml = reg.bookings
    assert (cs.name, cs.description, cs.pool, cs.shape, cs.gpus) == (
        "cs231",
        "CS231 lab",
        "training-pool",
        "mig-1g.10gb",
        40,
    )
    assert cs.groups == ("cs231",) and cs.users == ()
    assert cs.window == Window(
        "Europe/Berlin",
        weekly=Weekly((1, 3), dt.time(10), dt.time(12), dt.date(2027, 1, 12), dt.date(2027, 3, 30)),
    )
    assert str(cs.source) == "bookings.yaml:3"
    assert ml.shape == "whole"
    assert ml.window == Window(
        "UTC", once=Once(dt.datetime(2027, 1, 19, 11), dt.datetime(2027, 1, 19, 13))
    )


def test_load_write_load_gives_equal_bookings():
    reg = load_texts([(POOLS, "pools.yaml"), (CS231, "bookings.yaml")])
    docs = registry_to_documents(reg)
    # as YAML and as JSON (the written dates and times are strings)
    for text in (yaml.safe_dump_all(docs), "\n---\n".join(json.dumps(d) for d in docs)):
        again = load_texts([(text, "again.yaml")])
        assert again.bookings == reg.bookings
        assert again == reg


BAD = """\
kind: booking
booking: {name: cs231}
pool: nowhere
gpus: 2
groups: [g]
window:
  once: {start: "2027-01-12T10:00", end: "2027-01-12T12:00"}
  timezone: UTC
---
kind: booking
booking: {name: b2}
pool: training-pool
shape: mig-1g
gpus: 0
window:
  weekly: {days: [tue, tues], start: 10:00, end: "09:00"}
  from: 2027-03-30
  until: 2027-01-12
  timezone: Europe/Berlim
---
kind: booking
booking: {name: b3}
pool: training-pool
shape: mig-3g.40gb
gpus: 1
users: [u]
window:
  once: {start: "2027-01-12T10:00", end: "2027-01-12T10:00"}
  timezone: UTC
---
kind: booking
booking: {name: b4}
pool: dev-pool
gpus: 1
users: [u]
window:
  weekly: {days: [mon], start: "10:00", end: "11:00"}
  until: 2027-01-12
  timezone: UTC
---
kind: booking
booking: {name: b5}
pool: dev-pool
gpus: 1
window:
  once: {start: "2027-01-12T10:00", end: "2027-01-12T11:00"}
  weekly: {days: [mon], start: "10:00", end: "11:00"}
  timezone: UTC
---
kind: booking
booking: {name: cs231}
pool: dev-pool
gpus: 1
users: [u]
window:
  once: {start: "2027-01-12T10:00", end: "2027-01-12T11:00"}
  timezone: UTC
"""


def test_booking_problems_are_reported_at_their_lines():
    with pytest.raises(DocumentError) as e:
        load_texts([(POOLS, "pools.yaml"), (BAD, "bad.yaml")])
    assert [str(p) for p in e.value.problems] == [
        "bad.yaml:3: pool: unknown pool 'nowhere' (pools: default, dev-pool, training-pool)",
        "bad.yaml:10: (document): a booking is for someone: give 'groups' or 'users' (or both)",
        "bad.yaml:13: shape: 'mig-1g' is not a shape id (whole, mig-<profile> such as "
        "mig-1g.10gb, shared-<replicas>, mps-<replicas>, hami-<split>)",
        "bad.yaml:14: gpus: must be at least 1, not 0",
        "bad.yaml:16: window.weekly.days[1]: 'tues' is not a weekday (mon, tue, wed, thu, fri, "
        "sat, sun)",
        "bad.yaml:16: window.weekly.start: 600 is not a time of day written HH:MM (such as "
        '"10:00") (YAML reads 10:00 unquoted as the number 600: write "10:00")',
        "bad.yaml:18: window.until: until (2027-01-12) is before from (2027-03-30)",
        "bad.yaml:19: window.timezone: 'Europe/Berlim' is not an IANA time zone (such as "
        "Europe/Berlin, America/New_York or UTC)",
        "bad.yaml:24: shape: pool training-pool does not offer mig-3g.40gb (its shapes: whole, "
        "mig-1g.10gb)",
        "bad.yaml:28: window.once.end: the window must end after it starts (2027-01-12T10:00), "
        "not at 2027-01-12T10:00",
        "bad.yaml:36: window: a weekly window needs 'from' (a date, YYYY-MM-DD; inclusive)",
        "bad.yaml:41: (document): a booking is for someone: give 'groups' or 'users' (or both)",
        "bad.yaml:45: window: a window is 'once' or 'weekly', not both",
        "bad.yaml:51: booking.name: duplicate booking name 'cs231'; already defined at bad.yaml:2",
    ]


def test_weekly_end_before_start_names_the_end():
    text = """\
kind: booking
booking: {name: late}
pool: dev-pool
gpus: 1
groups: [g]
window:
  weekly: {days: [fri], start: "18:00", end: "09:00"}
  from: 2027-01-01
  until: 2027-02-01
  timezone: UTC
"""
    with pytest.raises(DocumentError) as e:
        load_texts([(POOLS, "pools.yaml"), (text, "late.yaml")])
    assert [str(p) for p in e.value.problems] == [
        "late.yaml:7: window.weekly.end: the window must end after it starts (18:00), not at "
        "09:00: a window ends on the day it starts"
    ]


def test_a_once_window_may_be_given_to_the_second_and_is_written_back_so():
    text = CS231.replace('"2027-01-19T11:00"', '"2027-01-19T11:00:30"')
    reg = load_texts([(POOLS, "pools.yaml"), (text, "bookings.yaml")])
    ml = reg.bookings[1]
    assert ml.window.once == Once(dt.datetime(2027, 1, 19, 11, 0, 30), dt.datetime(2027, 1, 19, 13))
    [doc] = [d for d in registry_to_documents(reg) if d.get("booking", {}).get("name") == "ml-ops"]
    assert doc["window"]["once"] == {"start": "2027-01-19T11:00:30", "end": "2027-01-19T13:00"}
    assert load_texts([(yaml.safe_dump_all(registry_to_documents(reg)), "x.yaml")]) == reg
    bad = CS231.replace('"2027-01-19T11:00"', '"2027-01-19T11:00:61"')
    with pytest.raises(DocumentError, match="YYYY-MM-DDTHH:MM"):
        load_texts([(POOLS, "pools.yaml"), (bad, "bookings.yaml")])
