"""Run management and token bookkeeping: runs.archived_at, ingest_tokens.last_used_at
(run_tags comes from 0007).

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("archived_at", sa.Float(), nullable=True))
    with op.batch_alter_table("ingest_tokens") as batch:
        batch.add_column(sa.Column("last_used_at", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("ingest_tokens") as batch:
        batch.drop_column("last_used_at")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("archived_at")
