"""A run's tags, group, job type, notes, summary and metric declarations; run updates.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("group_name", sa.String(length=128), nullable=True))
        batch.add_column(sa.Column("job_type", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("notes", sa.Text(), nullable=True))
        batch.add_column(sa.Column("summary", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("metric_defs", sa.JSON(), nullable=True))
        batch.create_index("ix_runs_group_name", ["group_name"])
    op.create_table(
        "run_tags",
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("tag", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_run_tags_run_id_runs", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id", "tag", name="pk_run_tags"),
    )
    op.create_index("ix_run_tags_tag", "run_tags", ["tag"])
    op.create_table(
        "run_updates",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("segment_id", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("ts", sa.Float(), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_run_updates_run_id_runs", ondelete="CASCADE"),
        sa.ForeignKeyConstraint(
            ["segment_id"], ["segments.id"], name="fk_run_updates_segment_id_segments", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_run_updates"),
        sa.UniqueConstraint("segment_id", "seq", name="uq_run_updates_segment_seq"),
    )
    op.create_index("ix_run_updates_run_id", "run_updates", ["run_id"])


def downgrade() -> None:
    op.drop_index("ix_run_updates_run_id", table_name="run_updates")
    op.drop_table("run_updates")
    op.drop_index("ix_run_tags_tag", table_name="run_tags")
    op.drop_table("run_tags")
    with op.batch_alter_table("runs") as batch:
        batch.drop_index("ix_runs_group_name")
        for name in ("metric_defs", "summary", "notes", "job_type", "group_name"):
            batch.drop_column(name)
