"""The replay log names the samples, evals and media rows each run version stored (``run_versions.outputs``).

On PostgreSQL the column is added to the partitioned table, and so to every attached partition
(a catalog change: no row is rewritten). Rows written before it hold null: no outputs.

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("run_versions") as batch:
        batch.add_column(sa.Column("outputs", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("run_versions") as batch:
        batch.drop_column("outputs")
