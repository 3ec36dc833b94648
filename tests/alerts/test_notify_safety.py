"""Safe notifications: chat texts escaped (a run named ``<!channel> @everyone`` pings nobody),
Discord told to ping nobody, Standard Webhooks signatures verified with the ``standardwebhooks``
package, the receiver snippet of docs/alerts.md run as written (tolerance, replay refusal), the
same event name in the header and the body, and finished deliveries pruned after the retention.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from pathlib import Path
from typing import Any

import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from alerts.helpers import Receiver, wait

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = "<!channel> @everyone @here <@123> <#456> *bold* [x](https://evil.example) `code` &amp;"


def _view(phase: str = "open") -> dict[str, Any]:
    return {
        "id": 7, "run": "runhostile01", "run_name": HOSTILE, "project": "demo", "kind": "spike",
        "title": "Loss spike", "key": "<@&789>/loss", "state": "open" if phase == "open" else "closed",
        "segment": 0, "step": 300, "end_step": None if phase == "open" else 340, "opened_at": 1.0, "closed_at": None,
        "evidence": {"open": {"value": 9.5, "baseline": 2.0}, "close": {"reason": "recovered"}}, "event": 1,
        "checkpoints": {"before": None, "after": None}, "url": "https://runcast.example/runs/runhostile01#alert-7",
    }


def _sub(fmt: str) -> Any:
    from runcast_server.alerts.models import Subscription

    return Subscription(id=3, format=fmt, unsub_token="tok", base_url="https://runcast.example")


def test_slack_text_is_escaped(embedded):
    from runcast_server.alerts.notify import render

    body = json.loads(render(_sub("slack"), _view(), "open"))
    text = body["text"]
    assert "<!channel>" not in text and "<@" not in text and "<#" not in text
    assert "&lt;!channel&gt; @everyone" in text and "&amp;amp;" in text  # shown as typed
    # The only markup is Runcast's own two links.
    assert re.findall(r"<[^>]*>", text) == [
        "<https://runcast.example/runs/runhostile01#alert-7|Open the run>",
        "<https://runcast.example/api/v1/subscriptions/unsubscribe?token=tok|Unsubscribe>",
    ]


def test_discord_content_is_escaped_and_pings_nobody(embedded):
    from runcast_server.alerts.notify import render

    body = json.loads(render(_sub("discord"), _view(), "open"))
    assert body["allowed_mentions"] == {"parse": []}
    content = body["content"]
    assert "@everyone" not in content and "@here" not in content
    assert "@\u200beveryone" in content and "@\u200bhere" in content
    assert "<@123>" not in content and "\\<@\u200b123\\>" in content
    assert "\\*bold\\*" in content and "\\[x\\]\\(https://evil.example\\)" in content
    assert len(content) <= 2000


def test_json_body_event_names(embedded):
    from runcast_server.alerts.notify import EVENTS, render

    for phase, name in (("open", "alert.opened"), ("close", "alert.closed")):
        assert json.loads(render(_sub("json"), _view(phase), phase))["event"] == EVENTS[phase] == name


def test_signature_is_standard_webhooks():
    from runcast_server.alerts.transport import new_secret, signed_headers

    secret = new_secret()
    assert secret.startswith("whsec_")
    body = b'{"event":"alert.opened"}'
    headers = signed_headers(secret, 41, body)
    assert headers["webhook-id"] == "msg_runcast_delivery_41"
    assert Webhook(secret).verify(body, headers) == {"event": "alert.opened"}
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(body.replace(b"opened", b"closed"), headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(body, headers)
    legacy = "ab" * 32  # the hex secrets made before whsec_
    assert Webhook(legacy).verify(body, signed_headers(legacy, 1, body)) == {"event": "alert.opened"}


def _snippet() -> dict[str, Any]:
    """The receiver snippet of docs/alerts.md, executed as written."""
    doc = (ROOT / "docs" / "alerts.md").read_text()
    section = doc[doc.index("### Verifying webhooks"):]
    code = section[section.index("```python") + len("```python"):]
    code = code[: code.index("```")]
    namespace: dict[str, Any] = {}
    exec(compile(code, "docs/alerts.md", "exec"), namespace)  # noqa: S102 - our own documentation
    return namespace


def test_documented_snippet_refuses_stale_forged_and_replayed_deliveries():
    from runcast_server.alerts.transport import new_secret, signed_headers

    snippet = _snippet()
    verify, already = snippet["verify_delivery"], snippet["AlreadyHandled"]
    secret, body = new_secret(), b'{"event":"alert.opened","alert":{"id":1}}'
    fresh = signed_headers(secret, 1, body)
    assert verify(secret, body, fresh) == json.loads(body)
    with pytest.raises(already):  # the same request again: a replay (or a retry already handled)
        verify(secret, body, fresh)
    stale = signed_headers(secret, 2, body, now=time.time() - 6 * 60)
    with pytest.raises(WebhookVerificationError, match="too old"):
        verify(secret, body, stale)
    future = signed_headers(secret, 3, body, now=time.time() + 6 * 60)
    with pytest.raises(WebhookVerificationError, match="too new"):
        verify(secret, body, future)
    within = signed_headers(secret, 4, body, now=time.time() - 4 * 60)
    assert verify(secret, body, within) == json.loads(body)
    with pytest.raises(WebhookVerificationError):
        verify(secret, body + b" ", signed_headers(secret, 5, body))
    forged = {**signed_headers(secret, 6, body), "webhook-id": "msg_runcast_delivery_7"}
    with pytest.raises(WebhookVerificationError):
        verify(secret, body, forged)


def _alert_and_subscription(db: Any, session: Any, url: str, fmt: str = "json") -> tuple[int, int]:
    from api.writer import TrainerSim, project_token
    from runcast_server.alerts.models import Alert, Subscription

    _, project_id = project_token(session, "demo")
    session.commit()
    sim = TrainerSim(db.scope, project_id, "demo", name=HOSTILE[:40]).start()
    alert = Alert(run_id=sim.run, key="loss", kind="spike", state="closed", step=300, end_step=340, opened_at=1.0,
                  closed_at=2.0, evidence={"open": {"value": 9.0}, "close": {"reason": "recovered"}})
    sub = Subscription(run_id=sim.run, channel="webhook", target=url, format=fmt, secret="whsec_" + "A" * 43 + "=",
                       kinds=[], notify_close=True, status="active", unsub_token=secrets.token_urlsafe(16), base_url="http://t",
                       failures=0, created_at=1.0, created_ip="127.0.0.1")
    session.add_all([alert, sub])
    session.flush()
    return alert.id, sub.id


@pytest.mark.parametrize("fmt", ["json", "slack", "discord"])
def test_delivered_header_names_the_same_event_as_the_body(embedded_env, monkeypatch, fmt):
    from fastapi.testclient import TestClient
    from runcast_server.alerts import notify
    from runcast_server.alerts.models import AlertDelivery
    from runcast_server.app import create_app

    monkeypatch.setenv("RUNCAST_WEBHOOK_ALLOW_CIDRS", "127.0.0.0/8")
    rec = Receiver()
    try:
        with TestClient(create_app()) as client:
            db = client.app.state.context.database
            with db.scope() as session:
                alert_id, sub_id = _alert_and_subscription(db, session, rec.url, fmt)
                ids = []
                for phase in ("open", "close"):
                    d = AlertDelivery(subscription_id=sub_id, alert_id=alert_id, phase=phase, status="pending",
                                      attempts=0, created_at=time.time())
                    session.add(d)
                    session.flush()
                    ids.append(d.id)
            assert [notify.deliver(client.app.state.context, i) for i in ids] == ["sent", "sent"]
            wait(lambda: len(rec.requests) == 2)
    finally:
        rec.close()
    for req, name in zip(rec.requests, ("alert.opened", "alert.closed"), strict=True):
        headers = {k.lower(): v for k, v in req["headers"].items()}
        assert headers["x-runcast-event"] == name
        if fmt == "json":
            assert json.loads(req["body"])["event"] == name
        assert Webhook("whsec_" + "A" * 43 + "=").verify(req["body"], req["headers"])
        assert headers["webhook-id"] == f"msg_runcast_delivery_{headers['x-runcast-delivery']}"


def test_finished_deliveries_are_pruned_after_the_retention(db: Any, settings: Any, embedded, monkeypatch):
    from runcast_server.alerts import notify
    from runcast_server.alerts.models import AlertDelivery
    from sqlalchemy import select

    monkeypatch.setattr(settings, "delivery_retention_s", 3600.0)
    now = time.time()
    with db.scope() as session:
        alert_id, sub_id = _alert_and_subscription(db, session, "https://example.com/hook")
        rows = {  # (phase, status, age in s)
            "sent-old": ("open", "sent", 7200), "failed-old": ("close", "failed", 7200),
        }
        for name, (phase, status, age) in rows.items():
            session.add(AlertDelivery(subscription_id=sub_id, alert_id=alert_id, phase=phase, status=status,
                                      attempts=1, created_at=now - age, last_error=name))
        alert2, sub2 = _alert_and_subscription(db, session, "https://example.com/other")
        for name, (phase, status, age) in {"pending-old": ("open", "pending", 7200),
                                           "sent-new": ("close", "sent", 60)}.items():
            session.add(AlertDelivery(subscription_id=sub2, alert_id=alert2, phase=phase, status=status,
                                      attempts=1, created_at=now - age, last_error=name))
    assert notify.prune_deliveries(embedded.app.state.context, now) == 2
    with db.scope() as session:
        left = sorted(session.scalars(select(AlertDelivery.last_error)))
    assert left == ["pending-old", "sent-new"]
    assert notify.prune_deliveries(embedded.app.state.context, now) == 0
    celery = embedded.app.state.context.celery  # the app's own Celery app, made from its settings
    schedule = celery.conf.beat_schedule
    assert schedule["runcast-alerts-prune"]["task"] == notify.PRUNE_TASK == "runcast.alerts.prune"
    assert notify.PRUNE_TASK in celery.tasks
