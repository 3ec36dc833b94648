"""Comments on runs (issue 30, item 2): the ``comments``, ``comment_versions``, ``comment_reports``
and ``comment_settings`` tables (docs/comments.md).

Written beside 0022 (commands) without seeing it: it follows 0021 here, and the merge chains it
after 0022.

Revision ID: 0023
Revises: 0022
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _fk(table: str, column: str, target: str, ondelete: str = "CASCADE") -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint([column], [f"{target}.id"], name=f"fk_{table}_{column}_{target}", ondelete=ondelete)


def upgrade() -> None:
    op.create_table(
        "comments",
        sa.Column("id", BIG_ID, nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("parent_id", sa.BigInteger(), nullable=True),
        sa.Column("author_id", sa.Integer(), nullable=True),
        sa.Column("team", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("anchor_kind", sa.String(length=16), nullable=False),
        sa.Column("anchor_key", sa.String(length=200), nullable=True),
        sa.Column("anchor_id", sa.BigInteger(), nullable=True),
        sa.Column("anchor_step", sa.BigInteger(), nullable=True),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("html", sa.Text(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("pinned", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("locked", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("edited_at", sa.Float(), nullable=True),
        _fk("comments", "run_id", "runs"),
        _fk("comments", "parent_id", "comments"),
        _fk("comments", "author_id", "users", "SET NULL"),
        sa.PrimaryKeyConstraint("id", name="pk_comments"),
    )
    op.create_index("ix_comments_run_id_parent_id", "comments", ["run_id", "parent_id"])
    op.create_index("ix_comments_author_id", "comments", ["author_id"])
    op.create_table(
        "comment_versions",
        sa.Column("id", BIG_ID, nullable=False),
        sa.Column("comment_id", sa.BigInteger(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        _fk("comment_versions", "comment_id", "comments"),
        sa.PrimaryKeyConstraint("id", name="pk_comment_versions"),
    )
    op.create_index("ix_comment_versions_comment_id", "comment_versions", ["comment_id"])
    op.create_table(
        "comment_reports",
        sa.Column("id", BIG_ID, nullable=False),
        sa.Column("comment_id", sa.BigInteger(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("reason", sa.String(length=500), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        _fk("comment_reports", "comment_id", "comments"),
        _fk("comment_reports", "user_id", "users"),
        sa.PrimaryKeyConstraint("id", name="pk_comment_reports"),
        sa.UniqueConstraint("comment_id", "user_id", name="uq_comment_reports_comment_id_user_id"),
    )
    op.create_index("ix_comment_reports_comment_id", "comment_reports", ["comment_id"])
    op.create_table(
        "comment_settings",
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("hold", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_comment_settings_run_id_runs", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id", name="pk_comment_settings"),
    )


def downgrade() -> None:
    op.drop_table("comment_settings")
    op.drop_table("comment_reports")
    op.drop_table("comment_versions")
    op.drop_table("comments")
