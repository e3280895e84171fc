"""The first schema: usage samples, server sessions, the change log.

Revision ID: 0001
Revises:
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "usage_samples",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("time", sa.Float(), nullable=False),
        sa.Column("pool", sa.String(255), nullable=False),
        sa.Column("hourly", sa.Boolean(), nullable=False),
        sa.Column("gpu_total", sa.Float(), nullable=False),
        sa.Column("gpu_used", sa.Float(), nullable=False),
        sa.Column("gpu_over_quota", sa.Float(), nullable=False),
        sa.Column("gpu_pending", sa.Float(), nullable=False),
    )
    op.create_index("ix_usage_samples_time", "usage_samples", ["time"])
    op.create_index("ix_usage_samples_pool_time", "usage_samples", ["pool", "time"])
    op.create_table(
        "server_sessions",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("pod_uid", sa.String(64), nullable=False, unique=True),
        sa.Column("namespace", sa.String(255), nullable=False),
        sa.Column("pod", sa.String(255), nullable=False),
        sa.Column("user", sa.String(255), nullable=False),
        sa.Column("server", sa.String(255), nullable=False),
        sa.Column("charged", sa.String(255), nullable=True),
        sa.Column("pool", sa.String(255), nullable=True),
        sa.Column("platform", sa.String(255), nullable=True),
        sa.Column("gpu_type", sa.String(255), nullable=True),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("over_quota", sa.Boolean(), nullable=False),
        sa.Column("started", sa.Float(), nullable=False),
        sa.Column("stopped", sa.Float(), nullable=True),
        sa.Column("last_seen", sa.Float(), nullable=False),
        sa.Column("ended", sa.String(32), nullable=True),
    )
    for column in ("user", "charged", "pool", "started", "stopped"):
        op.create_index(f"ix_server_sessions_{column}", "server_sessions", [column])
    op.create_table(
        "changes",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("time", sa.Float(), nullable=False),
        sa.Column("who", sa.String(255), nullable=False),
        sa.Column("what", sa.Text(), nullable=False),
        sa.Column("via", sa.String(32), nullable=False),
    )
    op.create_index("ix_changes_time", "changes", ["time"])


def downgrade() -> None:
    op.drop_table("changes")
    op.drop_table("server_sessions")
    op.drop_table("usage_samples")
