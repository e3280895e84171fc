"""Rows as the database has them, read with SQL apart from the code under test."""

from __future__ import annotations

from sqlalchemy import create_engine, text


def sql(url: str, query: str) -> list[tuple]:
    """The rows of ``query`` on the database at ``url``, as tuples."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(query))]
    finally:
        engine.dispose()
