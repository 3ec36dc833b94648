"""Commands to live trainers (issue 30, item 4): the ``commands`` table and ``runs.commands_pending``
(docs/commands.md).

Revision ID: 0022
Revises: 0021
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("commands_pending", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.create_table(
        "commands",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("uid", sa.String(length=64), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=True),
        sa.Column("value", sa.JSON(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("sender", sa.String(length=200), nullable=False),
        sa.Column("sender_kind", sa.String(length=8), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.Column("delivered_at", sa.Float(), nullable=True),
        sa.Column("acked_at", sa.Float(), nullable=True),
        sa.Column("step", sa.BigInteger(), nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=True),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("ack_segment", sa.String(length=64), nullable=True),
        sa.Column("ack_seq", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_commands_run_id_runs", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_commands"),
        sa.UniqueConstraint("uid", name="uq_commands_uid"),
    )
    op.create_index("ix_commands_run_state", "commands", ["run_id", "state"])


def downgrade() -> None:
    op.drop_table("commands")
    # A plain DROP COLUMN on both (SQLite >= 3.35): batch mode would rebuild runs and copy 0019's
    # generated columns as plain ones (duplicate column names).
    op.execute("ALTER TABLE runs DROP COLUMN commands_pending")
