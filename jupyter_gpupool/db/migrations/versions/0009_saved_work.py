"""Server sessions keep what the user's open lab saved before a stop (issue 31).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # NULL for the sessions before: no lab reported (a stop by the service then reads
    # "no lab open: nothing to save", as it was)
    with op.batch_alter_table("server_sessions") as batch:
        batch.add_column(sa.Column("saved", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("saved_at", sa.Float(), nullable=True))
        batch.add_column(sa.Column("saved_paths", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("server_sessions") as batch:
        batch.drop_column("saved_paths")
        batch.drop_column("saved_at")
        batch.drop_column("saved")
