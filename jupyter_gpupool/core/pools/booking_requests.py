"""Booking documents that come through the API (not in a pool file), checked against the pools
in force: the same rules as in a file (:mod:`.booking_reading`), each problem at its line.

The service keeps such bookings in its database as their documents
(:func:`~.writing.booking_to_document`, JSON); :func:`booking_of_document` reads one back.
Pure: text and documents in, bookings and problems out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..documents.spec import Checker
from ..documents.yaml_reader import Document, DocumentError, Problem, load_documents
from ..time.bookings import Booking
from .booking_reading import Named, build_booking, check_bookings
from .document_spec import BOOKING_DOCUMENT, BOOKING_KIND
from .model import DEFAULT_POOL, Registry
from .reading import KNOWN_POOLS_SHOWN


def is_booking_document(doc: Document) -> bool:
    return isinstance(doc.data, Mapping) and doc.data.get("kind") == BOOKING_KIND


def load_bookings(docs: Sequence[Document], registry: Registry) -> list[Booking]:
    """The bookings of ``docs`` (every one a ``kind: booking`` document), checked against the
    pools of ``registry``; raises :class:`DocumentError` with every problem. Names must differ
    among ``docs``; whether they are taken elsewhere is the caller's business."""
    problems: list[Problem] = []
    loaded: list[tuple[Document, Named]] = []
    for doc in docs:
        c = Checker(doc)
        if not is_booking_document(doc):
            c.add(("kind",), "only kind: booking documents belong here")
        else:
            named = build_booking(c, BOOKING_DOCUMENT.check(c, doc.data, ()))
            if named is not None:
                loaded.append((doc, named))
        problems.extend(c.problems)
    known = set(registry.pools) | {DEFAULT_POOL}
    shown = sorted(known)
    words = ", ".join(shown[:KNOWN_POOLS_SHOWN]) + (
        f", ... ({len(shown)} pools)" if len(shown) > KNOWN_POOLS_SHOWN else ""
    )
    bookings, cross = check_bookings(loaded, registry.pools, known, words)
    problems.extend(cross)
    if problems:
        raise DocumentError(problems)
    return list(bookings)


def load_booking_text(text: str, registry: Registry, file: str = "<request>") -> list[Booking]:
    """The bookings of a YAML or JSON text (syntax errors raise :class:`DocumentError`)."""
    return load_bookings(load_documents(text, file), registry)


def booking_of_document(document: Mapping[str, Any]) -> Booking:
    """A stored booking document (JSON, as :func:`~.writing.booking_to_document` wrote it)
    read back, with the rules inside a document only: a booking stays in force when its pool
    goes away (``gpupool validate`` and the pages say so), and one kept before windows were
    bounded keeps a longer window (its dates are still checked). DocumentError when it does
    not load."""
    (doc,) = load_documents(json.dumps(document), "<stored>")
    c = Checker(doc)
    named = build_booking(c, BOOKING_DOCUMENT.check(c, doc.data, ()), bounded=False)
    if c.problems or named is None or named.booking is None:
        raise DocumentError(c.problems or [doc.problem((), "not a booking document")])
    return named.booking
