"""Index for listing all runs newest first.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_runs_created_id", "runs", ["created_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_runs_created_id", table_name="runs")
