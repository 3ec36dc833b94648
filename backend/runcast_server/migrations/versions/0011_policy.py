"""Publication policies: a project's default and each run's overrides.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "project_policies",
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["project_id"], ["projects.id"], name=op.f("fk_project_policies_project_id_projects"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("project_id", name=op.f("pk_project_policies")),
    )
    op.create_table(
        "run_policies",
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_run_policies_run_id_runs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_run_policies")),
    )


def downgrade() -> None:
    op.drop_table("run_policies")
    op.drop_table("project_policies")
