"""alerts: alerts, detector state, per-run alert config, subscriptions, deliveries, rate limits

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "alerts",
        sa.Column("id", BigId, nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("segment_id", BigId, nullable=True),
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("step", sa.BigInteger(), nullable=True),
        sa.Column("end_step", sa.BigInteger(), nullable=True),
        sa.Column("opened_at", sa.Float(), nullable=False),
        sa.Column("closed_at", sa.Float(), nullable=True),
        sa.Column("evidence", sa.JSON(), nullable=False),
        sa.Column("event_id", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_alerts_run_id_runs"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(
            ["segment_id"], ["segments.id"], name=op.f("fk_alerts_segment_id_segments"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alerts")),
    )
    op.create_index("ix_alerts_run_kind", "alerts", ["run_id", "kind"])
    op.create_index("ix_alerts_state", "alerts", ["state", "kind"])
    op.create_table(
        "detector_states",
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("segment_id", sa.BigInteger(), nullable=False),
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("detector", sa.String(length=32), nullable=False),
        sa.Column("state", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_detector_states_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "segment_id", "key", "detector", name=op.f("pk_detector_states")),
    )
    op.create_table(
        "alert_configs",
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("overrides", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_alert_configs_run_id_runs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_alert_configs")),
    )
    op.create_table(
        "subscriptions",
        sa.Column("id", BigId, nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=True),
        sa.Column("project_id", sa.Integer(), nullable=True),
        sa.Column("channel", sa.String(length=16), nullable=False),
        sa.Column("target", sa.String(length=2048), nullable=False),
        sa.Column("format", sa.String(length=16), nullable=False),
        sa.Column("secret", sa.String(length=128), nullable=True),
        sa.Column("kinds", sa.JSON(), nullable=False),
        sa.Column("notify_close", sa.Boolean(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("unsub_token", sa.String(length=64), nullable=False),
        sa.Column("confirm_token", sa.String(length=64), nullable=True),
        sa.Column("base_url", sa.String(length=512), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("created_ip", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_subscriptions_run_id_runs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.id"], name=op.f("fk_subscriptions_project_id_projects"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_subscriptions")),
        sa.UniqueConstraint("unsub_token", name=op.f("uq_subscriptions_unsub_token")),
        sa.UniqueConstraint("confirm_token", name=op.f("uq_subscriptions_confirm_token")),
    )
    op.create_index("ix_subscriptions_target", "subscriptions", ["run_id", "project_id"])
    op.create_table(
        "alert_deliveries",
        sa.Column("id", BigId, nullable=False),
        sa.Column("subscription_id", BigId, nullable=False),
        sa.Column("alert_id", BigId, nullable=False),
        sa.Column("phase", sa.String(length=8), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.String(length=500), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("sent_at", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["subscription_id"], ["subscriptions.id"],
            name=op.f("fk_alert_deliveries_subscription_id_subscriptions"), ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["alert_id"], ["alerts.id"], name=op.f("fk_alert_deliveries_alert_id_alerts"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alert_deliveries")),
        sa.UniqueConstraint("subscription_id", "alert_id", "phase", name="uq_alert_deliveries_key"),
    )
    op.create_table(
        "rate_limits",
        sa.Column("bucket", sa.String(length=128), nullable=False),
        sa.Column("window", sa.BigInteger(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("bucket", "window", name=op.f("pk_rate_limits")),
    )


def downgrade() -> None:
    op.drop_table("rate_limits")
    op.drop_table("alert_deliveries")
    op.drop_index("ix_subscriptions_target", table_name="subscriptions")
    op.drop_table("subscriptions")
    op.drop_table("alert_configs")
    op.drop_table("detector_states")
    op.drop_index("ix_alerts_state", table_name="alerts")
    op.drop_index("ix_alerts_run_kind", table_name="alerts")
    op.drop_table("alerts")
