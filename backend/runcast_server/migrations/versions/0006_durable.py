"""durable ingest: the ingest inbox, admin tokens, segments.lost_events

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "ingest_inbox",
        sa.Column("id", BigId, nullable=False),
        sa.Column("project_id", sa.Integer(), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("body", sa.LargeBinary(), nullable=True),
        sa.Column("events", sa.Integer(), nullable=False),
        sa.Column("received_at", sa.Float(), nullable=False),
        sa.Column("next_sweep_at", sa.Float(), nullable=True),
        sa.Column("sweeps", sa.Integer(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("done_at", sa.Float(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("bad_events", sa.JSON(), nullable=True),
        sa.Column("detector_error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.id"], name=op.f("fk_ingest_inbox_project_id_projects"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ingest_inbox")),
    )
    op.create_index("ix_ingest_inbox_state_sweep", "ingest_inbox", ["state", "next_sweep_at"])
    if op.get_bind().dialect.name == "postgresql":
        # Bodies are JSON of a few hundred kB that live for seconds: compressing them into
        # TOAST costs PostgreSQL three times the CPU of storing them as they are.
        op.execute("ALTER TABLE ingest_inbox ALTER COLUMN body SET STORAGE EXTERNAL")
    op.create_table(
        "admin_tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("label", sa.String(length=200), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("revoked_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_admin_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_admin_tokens_token_hash")),
    )
    with op.batch_alter_table("segments") as batch:
        batch.add_column(sa.Column("lost_events", sa.BigInteger(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("segments") as batch:
        batch.drop_column("lost_events")
    op.drop_table("admin_tokens")
    op.drop_index("ix_ingest_inbox_state_sweep", table_name="ingest_inbox")
    op.drop_table("ingest_inbox")
