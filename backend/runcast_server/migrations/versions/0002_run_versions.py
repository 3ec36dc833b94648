"""run_versions: one row per committed ingest batch (run version), for live-stream replay

Each row says what the batch wrote -- the (series, step range, count) of its new
points and the ids of its new timeline events -- plus the run's status and last
step at that version, so a reconnecting viewer is replayed by primary-key range
scans of ``points`` instead of a scan of the ``version`` column.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_versions",
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("last_step", sa.BigInteger(), nullable=True),
        sa.Column("committed_at", sa.Float(), nullable=False),
        sa.Column("points", sa.BigInteger(), nullable=False),
        sa.Column("ranges", sa.JSON(), nullable=False),
        sa.Column("event_ids", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_run_versions_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "version", name=op.f("pk_run_versions")),
    )


def downgrade() -> None:
    op.drop_table("run_versions")
