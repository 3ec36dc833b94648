"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-12-02 15:59:23.143550
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
        "points",
        sa.Column("series_id", sa.BigInteger(), nullable=False),
        sa.Column("step", sa.BigInteger(), nullable=False),
        sa.Column("value", sa.Float(), nullable=True),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("series_id", "step", name=op.f("pk_points")),
    )
    op.create_table(
        "projects",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_projects")),
        sa.UniqueConstraint("name", name=op.f("uq_projects_name")),
    )
    op.create_table(
        "rollups",
        sa.Column("series_id", sa.BigInteger(), nullable=False),
        sa.Column("level", sa.SmallInteger(), nullable=False),
        sa.Column("bucket", sa.BigInteger(), nullable=False),
        sa.Column("min", sa.Float(), nullable=True),
        sa.Column("max", sa.Float(), nullable=True),
        sa.Column("sum", sa.Float(), nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.Column("nan_count", sa.BigInteger(), nullable=False),
        sa.Column("last", sa.Float(), nullable=True),
        sa.Column("last_step", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint(
            "series_id", "level", "bucket", name=op.f("pk_rollups")
        ),
    )
    op.create_table(
        "ingest_tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("label", sa.String(length=200), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("revoked_at", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_ingest_tokens_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ingest_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_ingest_tokens_token_hash")),
    )
    with op.batch_alter_table("ingest_tokens", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_ingest_tokens_project_id"), ["project_id"], unique=False
        )

    op.create_table(
        "runs",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("visibility", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("code", sa.JSON(), nullable=False),
        sa.Column("env", sa.JSON(), nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=True),
        sa.Column("finished_at", sa.Float(), nullable=True),
        sa.Column("heartbeat_at", sa.Float(), nullable=True),
        sa.Column("last_step", sa.BigInteger(), nullable=True),
        sa.Column("last_values", sa.JSON(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_runs_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
    )
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.create_index(
            "ix_runs_project_created", ["project_id", "created_at"], unique=False
        )

    op.create_table(
        "segments",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("uid", sa.String(length=64), nullable=False),
        sa.Column("index", sa.Integer(), nullable=False),
        sa.Column("start_step", sa.BigInteger(), nullable=False),
        sa.Column("resumed", sa.Boolean(), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["runs.id"],
            name=op.f("fk_segments_run_id_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_segments")),
        sa.UniqueConstraint("run_id", "index", name="uq_segments_run_index"),
        sa.UniqueConstraint("run_id", "uid", name=op.f("uq_segments_run_id")),
    )
    op.create_table(
        "events",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column(
            "segment_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            nullable=False,
        ),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("type", sa.String(length=32), nullable=False),
        sa.Column("step", sa.BigInteger(), nullable=True),
        sa.Column("ts", sa.Float(), nullable=False),
        sa.Column("received_at", sa.Float(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["runs.id"],
            name=op.f("fk_events_run_id_runs"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["segment_id"],
            ["segments.id"],
            name=op.f("fk_events_segment_id_segments"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
        sa.UniqueConstraint("segment_id", "seq", name="uq_events_segment_seq"),
    )
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.create_index("ix_events_run_type", ["run_id", "type"], unique=False)

    op.create_table(
        "series",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column(
            "segment_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            nullable=False,
        ),
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.Column("min_step", sa.BigInteger(), nullable=True),
        sa.Column("max_step", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["runs.id"],
            name=op.f("fk_series_run_id_runs"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["segment_id"],
            ["segments.id"],
            name=op.f("fk_series_segment_id_segments"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_series")),
        sa.UniqueConstraint("segment_id", "key", name=op.f("uq_series_segment_id")),
    )
    with op.batch_alter_table("series", schema=None) as batch_op:
        batch_op.create_index("ix_series_run_key", ["run_id", "key"], unique=False)

    


def downgrade() -> None:
    
    with op.batch_alter_table("series", schema=None) as batch_op:
        batch_op.drop_index("ix_series_run_key")

    op.drop_table("series")
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.drop_index("ix_events_run_type")

    op.drop_table("events")
    op.drop_table("segments")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index("ix_runs_project_created")

    op.drop_table("runs")
    with op.batch_alter_table("ingest_tokens", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_ingest_tokens_project_id"))

    op.drop_table("ingest_tokens")
    op.drop_table("rollups")
    op.drop_table("projects")
    op.drop_table("points")
    
