"""Response models of the alert API: a run's alerts, its detector configuration, subscriptions.

``extra="forbid"``: a key the code returns but a model lacks fails validation.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AlertCheckpoint(_Answer):
    """A checkpoint next to an alert; a private one shows only its step."""

    event: int
    step: int | None
    filename: str | None = Field(None, description="Absent for a private checkpoint.")
    sha256: str | None = Field(None, description="Absent for a private checkpoint.")
    public: bool
    ts: float
    path: str | None = Field(None, description="The recorded path: only for a reader who sees the run's paths.")


class AlertCheckpoints(_Answer):
    """The last checkpoint at or before the alert's step and the first after it."""

    before: AlertCheckpoint | None
    after: AlertCheckpoint | None


class Alert(_Answer):
    """One alert, with its evidence and the checkpoints around it."""

    id: int
    run: str
    run_name: str | None
    project: str | None
    kind: str
    title: str
    key: str | None
    state: str = Field(description="open or closed.")
    segment: int | None
    step: int | None
    end_step: int | None
    opened_at: float
    closed_at: float | None
    evidence: dict[str, Any]
    event: int | None
    checkpoints: AlertCheckpoints
    url: str | None = Field(None, description="The alert on the run page.")


class AlertPage(_Answer):
    """A page of a run's alerts; empty with ``withheld`` true under a policy that withholds them."""

    alerts: list[Alert]
    next_cursor: str | None = Field(description="Pass as ?after= for the next page; null on the last page.")
    withheld: bool


class AlertConfigView(_Answer):
    """A run's detector overrides and the parameters in effect (defaults merged with them)."""

    overrides: dict[str, Any]
    effective: dict[str, Any]


class SubscriptionView(_Answer):
    """A subscription as its owner sees it; ``secret`` (a webhook's signing key) only in the answer to create."""

    id: int
    run: str | None
    project: str | None
    channel: str = Field(description="webhook or email.")
    target: str = Field(description="The URL or address; a chat robot's token masked (``****`` and its last 4 characters).")
    format: str
    kinds: list[str]
    language: str = Field(description="The language of its messages (en, zh-CN).")
    notify_close: bool
    notices: list[str] = Field(description="What it is sent: alerts and/or reports (a report's publication).")
    status: str = Field(description="pending, active or disabled.")
    failures: int
    unsubscribe_url: str
    secret: str | None = Field(None, description="Shown once, when a json, slack or discord webhook subscription is "
                               "created; a Feishu or DingTalk signing secret is never shown.")


class SubscriptionStatus(_Answer):
    """A subscription's status after confirm or unsubscribe."""

    id: int
    status: str
