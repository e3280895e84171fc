"""Bookings made through the API are kept: one row per booking, its document as JSON (issue 30).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "bookings",
        sa.Column("name", sa.String(255), primary_key=True),
        sa.Column("document", sa.Text(), nullable=False),
        sa.Column("created_by", sa.String(255), nullable=False),
        sa.Column("created", sa.Float(), nullable=False),
        sa.Column("changed_by", sa.String(255), nullable=False),
        sa.Column("changed", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("bookings")
