"""Server sessions say their shape and what they count per hour in GPU-equivalents (issue 29).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # the sessions before were all of whole GPUs: no shape, and NULL equivalents read as ``gpus``
    with op.batch_alter_table("server_sessions") as batch:
        batch.add_column(sa.Column("shape", sa.String(64), nullable=True))
        batch.add_column(sa.Column("equivalents", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("server_sessions") as batch:
        batch.drop_column("equivalents")
        batch.drop_column("shape")
