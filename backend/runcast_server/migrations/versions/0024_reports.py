"""Training reports (issue 30, item 3): the ``reports`` and ``report_versions`` tables (docs/reports.md).

Revision ID: 0024
Revises: 0023
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "reports",
        sa.Column("id", BIG_ID, nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("published_version", sa.Integer(), nullable=True),
        sa.Column("published_at", sa.Float(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_reports_run_id_runs", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_reports"),
        sa.UniqueConstraint("run_id", "number", name="uq_reports_run_id_number"),
    )
    op.create_table(
        "report_versions",
        sa.Column("id", BIG_ID, nullable=False),
        sa.Column("report_id", sa.BigInteger(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("title", sa.String(length=200), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("from_step", sa.BigInteger(), nullable=False),
        sa.Column("to_step", sa.BigInteger(), nullable=False),
        sa.Column("author_id", sa.Integer(), nullable=True),
        sa.Column("team", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["report_id"], ["reports.id"], name="fk_report_versions_report_id_reports",
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["author_id"], ["users.id"], name="fk_report_versions_author_id_users",
                                ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id", name="pk_report_versions"),
        sa.UniqueConstraint("report_id", "version", name="uq_report_versions_report_id_version"),
    )
    op.create_index("ix_report_versions_report_id", "report_versions", ["report_id"])


def downgrade() -> None:
    op.drop_table("report_versions")
    op.drop_table("reports")
