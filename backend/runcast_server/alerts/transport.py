"""One attempt of one delivery, whatever it notifies (an alert phase, a report's publication):
the request to a webhook or chat robot (through the SSRF guard) or the mail, and the outcome
recorded with the retries and the disabling of a subscription that keeps failing."""

from __future__ import annotations

import base64
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from runcast import __version__
from sqlalchemy import update
from sqlalchemy.orm import Session
from standardwebhooks import Webhook

from runcast_server.alerts import chat, email, ssrf
from runcast_server.alerts.models import Subscription
from runcast_server.core.i18n import messages

if TYPE_CHECKING:
    from runcast_server.alerts.needs import AlertContext

log = logging.getLogger(__name__)


def new_secret() -> str:
    """A webhook signing secret in the Standard Webhooks form: ``whsec_`` + base64 of 32 random bytes."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def signed_headers(secret: str, delivery_id: int, body: bytes, now: float | None = None, *,
                   msg_id: str | None = None) -> dict[str, str]:
    """The Standard Webhooks headers of one attempt (``msg_id``: the delivery's, the same on its
    retries). Secrets made before ``whsec_`` (hex) are used as the package reads them, so their
    receivers verify with the same package call."""
    msg_id = msg_id or f"msg_runcast_delivery_{delivery_id}"
    stamp = datetime.fromtimestamp(int(now if now is not None else time.time()), tz=UTC)
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(stamp.timestamp())),
        "webhook-signature": Webhook(secret).sign(msg_id, stamp, body.decode()),
    }


@dataclass(frozen=True)
class Outgoing:
    """What one delivery sends, in the subscription's format and language."""

    event: str  # X-Runcast-Event
    msg_id: str  # webhook-id
    delivery: str  # X-Runcast-Delivery
    body: Callable[[], bytes]  # a json, slack or discord webhook's body
    robot: Callable[[], chat.ChatMessage]  # a Feishu, DingTalk or WeCom robot's message
    subject: str  # a mail's
    text: str  # a mail's


def send(ctx: AlertContext, sub: Subscription, out: Outgoing) -> tuple[str | None, bool]:
    """One attempt: (the error, or None when sent; whether waiting can help)."""
    settings = ctx.settings
    target, secret = sub.target, sub.secret
    error: str | None = None
    retry = True
    try:
        if sub.channel == "webhook" and sub.format in chat.FORMATS:
            req = chat.request(sub.format, target, secret, out.robot(), time.time())
            headers = {"Content-Type": "application/json; charset=utf-8", "User-Agent": f"Runcast/{__version__}"}
            response = ssrf.post(ssrf.vet(req.url, settings.webhook_allow_cidrs), req.body, headers,
                                 settings.webhook_timeout_s)
            error, retry = chat.failure(sub.format, response.status_code, response.content)
        elif sub.channel == "webhook":
            body = out.body()
            vetted = ssrf.vet(target, settings.webhook_allow_cidrs)
            headers = {
                "Content-Type": "application/json",
                "User-Agent": f"Runcast/{__version__}",
                **signed_headers(secret or "", 0, body, msg_id=out.msg_id),
                "X-Runcast-Delivery": out.delivery,
                "X-Runcast-Event": out.event,
            }
            response = ssrf.post(vetted, body, headers, settings.webhook_timeout_s)
            if not 200 <= response.status_code < 300:
                error = f"HTTP {response.status_code}"
        else:
            t = messages(sub.language)
            email.send(settings, target, out.subject, out.text, unsubscribe_url=unsubscribe_url(sub),
                       unsubscribe_label=t("Unsubscribe"))
    except ssrf.Refused as exc:
        error = f"refused: {exc}"
    except Exception as exc:  # noqa: BLE001 - any transport failure is a failed attempt
        error = f"{type(exc).__name__}: {exc}"
    if error is not None:
        error = chat.scrub(sub.format, target, error)  # a robot's URL is its group's password
    return error, retry


def unsubscribe_url(sub: Subscription) -> str:
    return f"{sub.base_url.rstrip('/')}/api/v1/subscriptions/unsubscribe?token={sub.unsub_token}"


def count(ctx: AlertContext, channel: str, outcome: str) -> None:
    """One delivery attempt's outcome in the process's metrics (observability.prometheus)."""
    metrics = ctx.metrics
    if metrics is not None:
        metrics.alert_deliveries.labels(channel, outcome).inc()


Prepare = Callable[[Session, Any], tuple[Subscription | None, Outgoing | None]]
"""``(session, delivery row) -> (its subscription, what to send)``; nothing to send (None): the
thing notified is gone or no longer public, and the delivery is dropped."""


def attempt(ctx: AlertContext, model: type[Any], delivery_id: int, prepare: Prepare,
            again: Callable[[float], None]) -> str:
    """One attempt of a pending delivery row (``model``: AlertDelivery or ReportDelivery); returns its
    status. Dropped when ``prepare`` finds nothing to send or the subscription is no longer active;
    a failure is retried (``again(countdown)``, when waiting can help) until the attempts run out,
    and counts towards disabling the subscription."""
    with ctx.database.scope() as session:
        d = session.get(model, delivery_id)
        if d is None or d.status != "pending":
            return d.status if d else "missing"
        sub, out = prepare(session, d)
        if sub is None or out is None or sub.status != "active":
            d.status = "dropped"
            count(ctx, sub.channel if sub is not None else "unknown", "dropped")
            return "dropped"
        session.expunge(sub)  # read by ``out``'s renderers after the session
    error, retry = send(ctx, sub, out)
    status = _record(ctx, model, delivery_id, error, retry, again)
    count(ctx, sub.channel, "retry" if status == "pending" else status)
    return status


def _record(ctx: AlertContext, model: type[Any], delivery_id: int, error: str | None, retry: bool,
            again: Callable[[float], None]) -> str:
    """Record an attempt's outcome on its delivery row."""
    settings = ctx.settings
    now = time.time()
    retry_in: float | None = None
    with ctx.database.scope() as session:
        d = session.get(model, delivery_id)
        sub = session.get(Subscription, d.subscription_id) if d else None
        if d is None or sub is None:
            return "missing"
        d.attempts += 1
        if error is None:
            d.status, d.sent_at, d.last_error = "sent", now, None
            sub.failures = 0
            return "sent"
        d.last_error = error[:500]
        session.execute(update(Subscription).where(Subscription.id == sub.id).values(failures=Subscription.failures + 1))
        session.refresh(sub)
        if sub.failures >= settings.webhook_disable_after:
            sub.status = "disabled"
            d.status = "failed"
            log.warning("alerts: subscription %d disabled after %d failed attempts (%s)",
                        sub.id, sub.failures, error)
        elif not retry or d.attempts >= settings.webhook_max_attempts:
            d.status = "failed"
        else:
            retry_in = settings.webhook_retry_base_s * 2 ** (d.attempts - 1)
        status: str = d.status
    if retry_in is not None:
        again(retry_in)
    return status


def run_task(ctx: AlertContext, name: str, work: Callable[..., Any], *args: Any, countdown: float = 0.0,
             life_s: float = 3600.0) -> None:
    """``work(ctx, *args)``, ``countdown`` seconds from now: embedded, on the context's alert pool;
    production, the Celery task ``name`` on a worker (dropped if not started within ``life_s``
    after its time)."""
    if ctx.alerts is not None:
        if countdown <= 0:
            ctx.alerts.submit(work, ctx, *args)
        else:
            ctx.alerts.later(countdown, work, ctx, *args)
    else:
        wait = max(countdown, 0.0)
        ctx.celery.send_task(name, args=list(args), countdown=wait, expires=wait + life_s)
