"""Notifications: after an ingest commit, each opened (or closed) alert is fanned out to
its subscriptions; each (subscription, alert, phase) is one ``alert_deliveries`` row,
sent at most once, retried with exponential backoff, and a subscription whose attempts
keep failing is disabled.

Production: Celery tasks ``runcast.alerts.fanout`` and ``runcast.alerts.deliver`` on the
workers (``acks_late``; a redelivered task finds its delivery already sent). Embedded: the
same functions on the application context's alert pool (``alerts.runner``, with timers for
the retries), so an ingest request never waits for a webhook. Every function takes the
context it works for (``alerts.needs.AlertContext``: ``runcast_server.context.AppContext`` is one).

Webhooks are signed (alerts.transport) with the Standard Webhooks scheme (the ``standardwebhooks`` package):
``webhook-id`` (one per delivery, the same on its retries), ``webhook-timestamp`` (of the
attempt) and ``webhook-signature`` (HMAC-SHA256 of ``id.timestamp.body``), so a receiver
can refuse a stale or replayed request. Chat formats escape every text that came from a
trainer, and Discord is told to ping nobody. Finished deliveries are pruned after
``RUNCAST_DELIVERY_RETENTION_S`` (``runcast.alerts.prune``, beside the sweep).
"""

from __future__ import annotations

import json
import logging
import re
import time
from typing import TYPE_CHECKING, Any, Final, cast

from sqlalchemy import ColumnElement, CursorResult, and_, delete, exists, or_, select
from sqlalchemy.orm import Session

from runcast_server.alerts import chat
from runcast_server.alerts.models import Alert, AlertDelivery, Subscription
from runcast_server.alerts.service import alert_view, summary, title
from runcast_server.alerts.transport import Outgoing, attempt, run_task, unsubscribe_url
from runcast_server.core.db import upsert
from runcast_server.core.i18n import messages
from runcast_server.policy.apply import public_policy
from runcast_server.record.models import Run

if TYPE_CHECKING:
    from runcast_server.alerts.needs import AlertContext

FANOUT_TASK: Final = "runcast.alerts.fanout"
DELIVER_TASK: Final = "runcast.alerts.deliver"
SWEEP_TASK: Final = "runcast.alerts.sweep"
PRUNE_TASK: Final = "runcast.alerts.prune"
EVENTS: Final = {"open": "alert.opened", "close": "alert.closed"}  # the body's "event" and X-Runcast-Event
FINISHED: Final = ("sent", "failed", "dropped")

log = logging.getLogger(__name__)


_SLACK_ESCAPES: Final = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_DISCORD_MARKUP: Final = re.compile(r"([\\*_~`|<>\[\]()#])")
_ZWSP: Final = "\u200b"


def slack_text(text: str) -> str:
    """Text for Slack's mrkdwn: ``&``, ``<``, ``>`` escaped, so ``<!channel>`` or a link is shown, not acted on."""
    return "".join(_SLACK_ESCAPES.get(c, c) for c in text)


def discord_text(text: str) -> str:
    """Text for Discord: markdown escaped and every ``@`` broken by a zero-width space (the
    message also carries ``allowed_mentions: {"parse": []}``: nobody is pinged)."""
    return _DISCORD_MARKUP.sub(r"\\\1", text).replace("@", "@" + _ZWSP)


# --- after an ingest commit --------------------------------------------------------------------


def dispatch(ctx: AlertContext, entries: list[dict[str, Any]]) -> None:
    """Publish alert entries on the runs' live channels and start their fan-out (after commit).

    A run nobody subscribes to (the common case) starts no fan-out at all: one ``EXISTS`` per
    run here instead of a task per alert phase, each reading the alert, the run and its policy
    (a noisy run opens and closes thousands of alerts).
    """
    if not entries:
        return
    by_run: dict[str, list[dict[str, Any]]] = {}
    for e in entries:
        by_run.setdefault(e["run"], []).append(e)
    for run_id, items in by_run.items():
        subscribed = True  # when the check fails, the fan-out decides
        try:
            with ctx.database.scope() as session:
                row = session.execute(
                    select(Run.version, Run.project_id, Run.visibility).where(Run.id == run_id)
                ).one_or_none()
                if row is not None:
                    subscribed = bool(session.scalar(
                        select(exists().where(_subscribers(run_id, row.project_id, row.visibility)))
                    ))
            ctx.hub.publish(run_id, {"run": run_id, "version": row.version if row else 0, "alerts": items})
        except Exception:
            log.warning("alerts: could not publish to run:%s", run_id, exc_info=True)
        if subscribed:
            for e in items:
                start_fanout(ctx, e["id"], e["phase"])


def _subscribers(run_id: str, project_id: int, visibility: str) -> ColumnElement[bool]:
    """The active subscriptions to a run: its own, and its project's when the run is public."""
    conds = [Subscription.run_id == run_id]
    if visibility == "public":
        conds.append(Subscription.project_id == project_id)
    return and_(or_(*conds), Subscription.status == "active")


def start_fanout(ctx: AlertContext, alert_id: int, phase: str) -> None:
    """Embedded: on the context's alert pool; production: the fan-out task on a worker."""
    run_task(ctx, FANOUT_TASK, fanout, alert_id, phase)


def schedule_delivery(ctx: AlertContext, delivery_id: int, countdown: float = 0.0) -> None:
    run_task(ctx, DELIVER_TASK, deliver, delivery_id, countdown=countdown, life_s=24 * 3600)


# --- fan-out and delivery ---------------------------------------------------------------------


def fanout(ctx: AlertContext, alert_id: int, phase: str) -> list[int]:
    """Create the deliveries of one alert phase (once each) and schedule them; returns their ids."""
    now = time.time()
    with ctx.database.scope() as session:
        alert = session.get(Alert, alert_id)
        if alert is None:
            return []
        run = session.get(Run, alert.run_id)
        if run is None or not public_policy(session, run.id).notified({"key": alert.key}):
            return []  # subscribers are the public: a withheld alert (or metric), or a delayed run's, sends nothing
        subs = session.scalars(
            select(Subscription).where(_subscribers(run.id, run.project_id, run.visibility)).order_by(Subscription.id)
        ).all()
        wanted = [s for s in subs if (not s.kinds or alert.kind in s.kinds) and (phase == "open" or s.notify_close)]
        if not wanted:
            return []
        table = AlertDelivery.__table__
        rows = [
            {"subscription_id": s.id, "alert_id": alert_id, "phase": phase, "status": "pending", "attempts": 0,
             "last_error": None, "created_at": now, "sent_at": None}
            for s in wanted
        ]
        stmt = upsert(session, table).on_conflict_do_nothing(index_elements=["subscription_id", "alert_id", "phase"])
        session.execute(stmt, rows)
        ids = list(session.scalars(
            select(AlertDelivery.id).where(
                AlertDelivery.alert_id == alert_id, AlertDelivery.phase == phase, AlertDelivery.status == "pending",
                AlertDelivery.attempts == 0,
            )
        ))
    for delivery_id in ids:
        schedule_delivery(ctx, delivery_id)
    return ids


def render(sub: Subscription, view: dict[str, Any], phase: str) -> bytes:
    """The request body for a webhook subscription in its format (json, slack, discord), in its language."""
    t = messages(sub.language)
    unsub = unsubscribe_url(sub)
    text = summary(view, phase, t)
    link = view.get("url")
    if sub.format == "slack":
        body: dict[str, Any] = {
            "text": f"{slack_text(text)}\n<{slack_text(str(link))}|{slack_text(t('Open the run'))}> · "
                    f"<{slack_text(unsub)}|{slack_text(t('Unsubscribe'))}>"
        }
    elif sub.format == "discord":
        content = f"{discord_text(text)[:1500]}\n<{link}>\n{discord_text(t('Unsubscribe'))}: <{unsub}>"
        body = {"content": content[:2000], "allowed_mentions": {"parse": []}}
    else:
        body = {"event": EVENTS[phase], "subscription": sub.id,
                "alert": view, "text": text, "unsubscribe_url": unsub}
    return json.dumps(body, allow_nan=False, separators=(",", ":"), default=str).encode()


def chat_message(sub: Subscription, view: dict[str, Any], phase: str) -> chat.ChatMessage:
    """What a Feishu, DingTalk or WeCom robot is sent, in the subscription's language."""
    t = messages(sub.language)
    head = t("Alert ended: {title}", title=title(view["kind"], t)) if phase == "close" else title(view["kind"], t)
    return chat.ChatMessage(title=head, text=summary(view, phase, t), link=view.get("url"),
                            link_label=t("Open the run"), unsubscribe=unsubscribe_url(sub),
                            unsubscribe_label=t("Unsubscribe"), closed=phase == "close")


def deliver(ctx: AlertContext, delivery_id: int) -> str:
    """Send one delivery (one attempt); schedules the next attempt on failure. Returns its status."""
    return attempt(ctx, AlertDelivery, delivery_id, _outgoing, lambda countdown: schedule_delivery(ctx, delivery_id, countdown))


def _outgoing(session: Session, d: AlertDelivery) -> tuple[Subscription | None, Outgoing | None]:
    sub = session.get(Subscription, d.subscription_id)
    alert = session.get(Alert, d.alert_id)
    run = session.get(Run, alert.run_id) if alert is not None else None
    if sub is None or alert is None or run is None or not public_policy(session, run.id).notified({"key": alert.key}):
        return sub, None
    view = alert_view(session, alert, base_url=sub.base_url)  # as every reader may see it: subscribers are anonymous
    phase = d.phase
    t = messages(sub.language)
    text = summary(view, phase, t)
    return sub, Outgoing(
        event=EVENTS[phase], msg_id=f"msg_runcast_delivery_{d.id}", delivery=str(d.id),
        body=lambda: render(sub, view, phase), robot=lambda: chat_message(sub, view, phase),
        subject=f"[runcast] {text}"[:200],
        text=f"{text}\n\n{view.get('url', '')}\n\n{t('Evidence')}: {json.dumps(view['evidence'])}",
    )


def prune_deliveries(ctx: AlertContext, now: float | None = None) -> int:
    """Delete finished deliveries of alerts (sent, failed, dropped) older than the retention; returns how many
    (a report's notices are pruned by its next fan-out: reports/notices.py).

    Pending ones stay whatever their age: a retry may still be due.
    """
    cutoff = (now if now is not None else time.time()) - ctx.settings.delivery_retention_s
    with ctx.database.scope() as session:
        result = cast(CursorResult[Any], session.execute(  # a DML statement's result is a CursorResult
            delete(AlertDelivery).where(AlertDelivery.status.in_(FINISHED), AlertDelivery.created_at < cutoff)
        ))
        return int(result.rowcount or 0)
