"""Server sessions keep when the idle policy warned them (issue 17).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # NULL for the sessions before: no warning was recorded then
    with op.batch_alter_table("server_sessions") as batch:
        batch.add_column(sa.Column("idle_warned", sa.Float(), nullable=True))
        batch.create_index("ix_server_sessions_idle_warned", ["idle_warned"])


def downgrade() -> None:
    with op.batch_alter_table("server_sessions") as batch:
        batch.drop_index("ix_server_sessions_idle_warned")
        batch.drop_column("idle_warned")
