"""Reservations say which resource and shape they hold and what they count against quotas
(issue 29).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # the reservations before were all of whole GPUs: nvidia.com/gpu, counting their GPUs
    with op.batch_alter_table("reservations") as batch:
        batch.add_column(
            sa.Column("resource", sa.String(255), nullable=False, server_default="nvidia.com/gpu")
        )
        batch.add_column(sa.Column("equivalents", sa.String(64), nullable=True))
        batch.add_column(sa.Column("shape", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("reservations") as batch:
        batch.drop_column("shape")
        batch.drop_column("equivalents")
        batch.drop_column("resource")
