"""Report notices (issue 30, item 3): ``subscriptions.notices`` (what a subscription is sent:
alerts and/or reports; rows made before it get alerts, as they always did) and the
``report_deliveries`` table (docs/alerts.md).

Revision ID: 0025
Revises: 0024
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("subscriptions") as batch:
        batch.add_column(sa.Column("notices", sa.JSON(), nullable=False, server_default='["alerts"]'))
    op.create_table(
        "report_deliveries",
        sa.Column("id", BIG_ID, nullable=False),
        sa.Column("subscription_id", BIG_ID, nullable=False),
        sa.Column("report_id", BIG_ID, nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.String(length=500), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("sent_at", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(["subscription_id"], ["subscriptions.id"],
                                name="fk_report_deliveries_subscription_id_subscriptions", ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["report_id"], ["reports.id"], name="fk_report_deliveries_report_id_reports",
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_report_deliveries"),
        sa.UniqueConstraint("subscription_id", "report_id", name="uq_report_deliveries_key"),
    )
    op.create_index("ix_report_deliveries_report_id", "report_deliveries", ["report_id"])


def downgrade() -> None:
    op.drop_table("report_deliveries")
    with op.batch_alter_table("subscriptions") as batch:
        batch.drop_column("notices")
