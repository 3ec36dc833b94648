"""Tables of alerts, detector state, subscriptions and their deliveries (migrations 0003, 0025)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    UniqueConstraint,
    delete,
    select,
)
from sqlalchemy.orm import Mapped, Session, mapped_column

from runcast_server.core.models import Base, BigId


class Alert(Base):
    """One anomaly: opened by a detector (or the stall check), closed when it ends.

    ``segment_id`` is NULL for run-level alerts (stall, restart loop); ``key`` is the
    metric the detector read ("" for run-level ones). ``evidence`` holds what the
    detector saw at the opening (``open``) and at the closing (``close``).
    """

    __tablename__ = "alerts"
    __table_args__ = (
        Index("ix_alerts_run_kind", "run_id", "kind"),
        Index("ix_alerts_state", "state", "kind"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    segment_id: Mapped[int | None] = mapped_column(ForeignKey("segments.id", ondelete="CASCADE"))
    key: Mapped[str] = mapped_column(String(200), default="")
    kind: Mapped[str] = mapped_column(String(32))
    state: Mapped[str] = mapped_column(String(16), default="open")  # open | closed
    step: Mapped[int | None] = mapped_column(BigInteger)  # where it opened
    end_step: Mapped[int | None] = mapped_column(BigInteger)  # where it closed
    opened_at: Mapped[float] = mapped_column(Float)
    closed_at: Mapped[float | None] = mapped_column(Float)
    evidence: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    event_id: Mapped[int | None] = mapped_column(BigInteger)  # its "anomaly" timeline event


class DetectorState(Base):
    """A detector's JSON state for one series (``segment_id`` 0 and ``key`` "" at run level)."""

    __tablename__ = "detector_states"

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    segment_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    detector: Mapped[str] = mapped_column(String(32), primary_key=True)
    state: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    updated_at: Mapped[float] = mapped_column(Float)


class AlertConfig(Base):
    """A run's detector overrides (from run_started's ``alerts`` or the API)."""

    __tablename__ = "alert_configs"

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    overrides: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    updated_at: Mapped[float] = mapped_column(Float)


class Subscription(Base):
    """Someone who wants a run's or a project's alerts, by webhook or email. No account:
    ``unsub_token`` (in every delivery) and ``confirm_token`` (email) are capabilities."""

    __tablename__ = "subscriptions"
    __table_args__ = (Index("ix_subscriptions_target", "run_id", "project_id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    run_id: Mapped[str | None] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    project_id: Mapped[int | None] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    channel: Mapped[str] = mapped_column(String(16))  # webhook | email
    target: Mapped[str] = mapped_column(String(2048))  # URL or address
    format: Mapped[str] = mapped_column(String(16), default="json")  # json | slack | discord | feishu | dingtalk | wecom
    secret: Mapped[str | None] = mapped_column(String(128))  # HMAC key: ours (json, slack, discord) or the platform's
    language: Mapped[str] = mapped_column(String(16), default="en", server_default="en")  # of its messages
    kinds: Mapped[list[Any]] = mapped_column(JSON, default=list)  # [] = every kind
    # What it is sent: "alerts" and/or "reports" (report notices); rows made before are ["alerts"].
    notices: Mapped[list[Any]] = mapped_column(JSON, default=lambda: ["alerts"], server_default='["alerts"]')
    notify_close: Mapped[bool] = mapped_column(Boolean, default=False)
    status: Mapped[str] = mapped_column(String(16))  # pending | active | disabled
    unsub_token: Mapped[str] = mapped_column(String(64), unique=True)
    confirm_token: Mapped[str | None] = mapped_column(String(64), unique=True)
    base_url: Mapped[str] = mapped_column(String(512))
    failures: Mapped[int] = mapped_column(Integer, default=0)  # consecutive failed attempts
    created_at: Mapped[float] = mapped_column(Float)
    created_ip: Mapped[str] = mapped_column(String(64))


class AlertDelivery(Base):
    """One notification of one alert phase to one subscription: sent at most once."""

    __tablename__ = "alert_deliveries"
    __table_args__ = (UniqueConstraint("subscription_id", "alert_id", "phase", name="uq_alert_deliveries_key"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    subscription_id: Mapped[int] = mapped_column(ForeignKey("subscriptions.id", ondelete="CASCADE"))
    alert_id: Mapped[int] = mapped_column(ForeignKey("alerts.id", ondelete="CASCADE"))
    phase: Mapped[str] = mapped_column(String(8))  # open | close
    status: Mapped[str] = mapped_column(String(16), default="pending")  # pending | sent | failed | dropped
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(String(500))
    created_at: Mapped[float] = mapped_column(Float)
    sent_at: Mapped[float | None] = mapped_column(Float)


class RateLimit(Base):
    """A fixed-window counter: ``bucket`` (e.g. "subscribe:<ip>") and the window's start."""

    __tablename__ = "rate_limits"

    bucket: Mapped[str] = mapped_column(String(128), primary_key=True)
    window: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    count: Mapped[int] = mapped_column(Integer, default=0)


def delete_run_deliveries(session: Session, run_id: str) -> None:
    """Delete the deliveries of a run's alerts and of its subscriptions (they have no ``run_id``): the
    run delete's part of this domain (``runs.manage.delete_run``, through ``tables.delete_run``)."""
    alert_ids = select(Alert.id).where(Alert.run_id == run_id).scalar_subquery()
    sub_ids = select(Subscription.id).where(Subscription.run_id == run_id).scalar_subquery()
    session.execute(
        delete(AlertDelivery).where(AlertDelivery.alert_id.in_(alert_ids) | AlertDelivery.subscription_id.in_(sub_ids))
    )
