"""What the model says and scores: the samples, evals, media and blobs tables (docs/samples.md).

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "blobs",
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("content_type", sa.String(length=64), nullable=False),
        sa.Column("width", sa.Integer(), nullable=True),
        sa.Column("height", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.id"], name=op.f("fk_blobs_project_id_projects"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("project_id", "sha256", name=op.f("pk_blobs")),
    )
    op.create_table(
        "evals",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("segment_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("step", sa.BigInteger(), nullable=False),
        sa.Column("suite", sa.String(length=100), nullable=False),
        sa.Column("task", sa.String(length=200), nullable=False),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("checkpoint", sa.BigInteger(), nullable=True),
        sa.Column("n", sa.BigInteger(), nullable=True),
        sa.Column("config", sa.JSON(), nullable=True),
        sa.Column("versions", sa.JSON(), nullable=True),
        sa.Column("ts", sa.Float(), nullable=False),
        sa.Column("received_at", sa.Float(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_evals_run_id_runs"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(
            ["segment_id"], ["segments.id"], name=op.f("fk_evals_segment_id_segments"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_evals")),
        sa.UniqueConstraint("segment_id", "seq", name="uq_evals_segment_seq"),
    )
    with op.batch_alter_table("evals", schema=None) as batch_op:
        batch_op.create_index("ix_evals_run_suite_task_step", ["run_id", "suite", "task", "step"], unique=False)

    op.create_table(
        "media",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("segment_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("step", sa.BigInteger(), nullable=False),
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("blob", sa.String(length=64), nullable=True),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("ts", sa.Float(), nullable=False),
        sa.Column("received_at", sa.Float(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_media_run_id_runs"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(
            ["segment_id"], ["segments.id"], name=op.f("fk_media_segment_id_segments"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_media")),
        sa.UniqueConstraint("segment_id", "seq", name="uq_media_segment_seq"),
    )
    with op.batch_alter_table("media", schema=None) as batch_op:
        batch_op.create_index("ix_media_blob", ["blob"], unique=False)
        batch_op.create_index("ix_media_run_key_step", ["run_id", "key", "step"], unique=False)

    op.create_table(
        "samples",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("segment_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("step", sa.BigInteger(), nullable=False),
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("prompt_id", sa.String(length=200), nullable=False),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("output", sa.Text(), nullable=False),
        sa.Column("reference", sa.Text(), nullable=True),
        sa.Column("scores", sa.JSON(), nullable=True),
        sa.Column("settings", sa.JSON(), nullable=True),
        sa.Column("ts", sa.Float(), nullable=False),
        sa.Column("received_at", sa.Float(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_samples_run_id_runs"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(
            ["segment_id"], ["segments.id"], name=op.f("fk_samples_segment_id_segments"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_samples")),
        sa.UniqueConstraint("segment_id", "seq", name="uq_samples_segment_seq"),
    )
    with op.batch_alter_table("samples", schema=None) as batch_op:
        batch_op.create_index("ix_samples_run_key_prompt_step", ["run_id", "key", "prompt_id", "step"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("samples", schema=None) as batch_op:
        batch_op.drop_index("ix_samples_run_key_prompt_step")

    op.drop_table("samples")
    with op.batch_alter_table("media", schema=None) as batch_op:
        batch_op.drop_index("ix_media_run_key_step")
        batch_op.drop_index("ix_media_blob")

    op.drop_table("media")
    with op.batch_alter_table("evals", schema=None) as batch_op:
        batch_op.drop_index("ix_evals_run_suite_task_step")

    op.drop_table("evals")
    op.drop_table("blobs")
