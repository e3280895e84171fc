"""Usage samples keep the GPUs actually busy (GPU utilization, issue 17).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # NULL for the samples taken before: nothing was measured then
    with op.batch_alter_table("usage_samples") as batch:
        batch.add_column(sa.Column("gpu_busy", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("usage_samples") as batch:
        batch.drop_column("gpu_busy")
