"""The admissions' reservations, so that what was promised survives a crash (issue 27).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "reservations",
        sa.Column("admission_id", sa.String(64), primary_key=True),
        sa.Column("pool", sa.String(255), nullable=False),
        sa.Column("node", sa.String(255), nullable=True),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("user", sa.String(255), nullable=False),
        sa.Column("charged", sa.String(255), nullable=False),
        sa.Column("over_quota", sa.Boolean(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
    )
    op.create_index("ix_reservations_expires_at", "reservations", ["expires_at"])


def downgrade() -> None:
    op.drop_table("reservations")
