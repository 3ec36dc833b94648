"""The replay log says which run versions changed the run's name, tags, group or notes (``run_versions.described``).

The live stream's message carries it, so that a page showing the run reads it again. On
PostgreSQL the column is added to the partitioned table (a catalog change: no row is
rewritten). Rows written before it hold null: nothing described changed.

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("run_versions") as batch:
        batch.add_column(sa.Column("described", sa.Boolean(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("run_versions") as batch:
        batch.drop_column("described")
