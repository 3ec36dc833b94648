"""Dashboard sign-in: the dashboard_sessions table (docs/auth.md)

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "dashboard_sessions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("session_hash", sa.String(length=64), nullable=False),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("token_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.id"], name=op.f("fk_dashboard_sessions_project_id_projects"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["token_id"], ["ingest_tokens.id"], name=op.f("fk_dashboard_sessions_token_id_ingest_tokens"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dashboard_sessions")),
        sa.UniqueConstraint("session_hash", name=op.f("uq_dashboard_sessions_session_hash")),
    )
    op.create_index("ix_dashboard_sessions_project_id", "dashboard_sessions", ["project_id"])
    op.create_index("ix_dashboard_sessions_token_id", "dashboard_sessions", ["token_id"])


def downgrade() -> None:
    op.drop_index("ix_dashboard_sessions_token_id", table_name="dashboard_sessions")
    op.drop_index("ix_dashboard_sessions_project_id", table_name="dashboard_sessions")
    op.drop_table("dashboard_sessions")
