"""The fair queue's entries, so that the line survives a restart (issue 18).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "queue_entries",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("since", sa.Float(), nullable=False),
        sa.Column("user", sa.String(255), nullable=False),
        sa.Column("groups", sa.Text(), nullable=False),
        sa.Column("pools", sa.Text(), nullable=False),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("gpu_type", sa.String(255), nullable=True),
        sa.Column("server", sa.String(255), nullable=False),
        sa.Column("reclaim", sa.Boolean(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("ended", sa.Float(), nullable=True),
    )
    op.create_index("ix_queue_entries_user", "queue_entries", ["user"])
    op.create_index("ix_queue_entries_state", "queue_entries", ["state"])
    op.create_index("ix_queue_entries_ended", "queue_entries", ["ended"])


def downgrade() -> None:
    op.drop_table("queue_entries")
