"""Alerts in the embedded default, through the real HTTP ingest path: the alerts API,
checkpoint links, the timeline, Atom feeds, webhook and email subscriptions, retries,
disabling, rate limits, the stall check."""

from __future__ import annotations

import json
import time
from typing import Any
from xml.etree import ElementTree as ET

import pytest
from standardwebhooks import Webhook

from alerts.helpers import Receiver, WireRun, loss_curve, post, wait

ATOM = "{http://www.w3.org/2005/Atom}"


def spike_run(client: Any, token: str, *, name: str = "run", spike_at: int = 300, checkpoints: bool = False,
              **started: Any) -> WireRun:
    run = WireRun(name=name)
    post(client, token, [run.started(**started)])
    return run


def log_curve(client: Any, token: str, run: WireRun, curve: list[float], start: int = 0, key: str = "loss",
              checkpoints: tuple[int, ...] = ()) -> None:
    events = []
    for i, v in enumerate(curve, start):
        events.append(run.metrics(i, **{key: v}))
        if i in checkpoints:
            events.append(run.event("checkpoint", step=i, path=f"ckpt/{i}", size=10, sha256=None, metrics={}))
    for k in range(0, len(events), 500):
        post(client, token, events[k : k + 500])


def test_alerts_api_evidence_checkpoints_timeline_and_feed(make_client):
    client, token = make_client()
    run = spike_run(client, token)
    log_curve(client, token, run, loss_curve(600, seed=1, spike=(300, 30, 1.0)), checkpoints=(200, 250, 400, 500))

    body = client.get(f"/api/v1/runs/{run.run}/alerts").json()
    assert [(a["kind"], a["state"], a["step"], a["end_step"]) for a in body["alerts"]] == [("spike", "closed", 300, 332)]
    a = body["alerts"][0]
    assert a["evidence"]["open"]["baseline"] < a["evidence"]["open"]["threshold"] < a["evidence"]["open"]["value"]
    assert a["evidence"]["close"]["reason"] == "recovered"
    assert (a["checkpoints"]["before"]["step"], a["checkpoints"]["after"]["step"]) == (250, 400)
    assert client.get(f"/api/v1/runs/{run.run}/alerts?state=open").json()["alerts"] == []
    assert client.get(f"/api/v1/runs/{run.run}/alerts?kind=stall").json()["alerts"] == []
    assert len(client.get(f"/api/v1/runs/{run.run}/alerts?kind=spike&state=closed").json()["alerts"]) == 1
    assert client.get(f"/api/v1/runs/{run.run}/alerts?kind=bogus").status_code == 422

    events = client.get(f"/api/v1/runs/{run.run}/events?type=anomaly").json()["events"]
    assert [(e["type"], e["step"], e["payload"]["state"], e["payload"]["alert"]) for e in events] == [
        ("anomaly", 300, "closed", a["id"])
    ]

    feed = client.get(f"/api/v1/runs/{run.run}/alerts.atom")
    assert feed.headers["content-type"].startswith("application/atom+xml")
    root = ET.fromstring(feed.content)
    assert root.tag == f"{ATOM}feed"
    for tag in ("id", "title", "updated"):
        assert root.find(f"{ATOM}{tag}") is not None
    entries = root.findall(f"{ATOM}entry")
    assert len(entries) == 1
    assert entries[0].find(f"{ATOM}category").get("term") == "spike"
    assert "Loss spike" in entries[0].find(f"{ATOM}title").text
    project = ET.fromstring(client.get("/api/v1/projects/demo/alerts.atom").content)
    assert len(project.findall(f"{ATOM}entry")) == 1
    assert client.get("/api/v1/projects/nope/alerts.atom").status_code == 404


def test_private_runs_hide_their_alerts_and_feeds(make_client):
    client, token = make_client()
    run = spike_run(client, token, visibility="private")
    log_curve(client, token, run, loss_curve(400, seed=2, spike=(300, 5, 2.0)))
    assert client.get(f"/api/v1/runs/{run.run}/alerts").status_code == 404
    assert client.get(f"/api/v1/runs/{run.run}/alerts.atom").status_code == 404
    auth = {"Authorization": f"Bearer {token}"}
    assert len(client.get(f"/api/v1/runs/{run.run}/alerts", headers=auth).json()["alerts"]) == 1
    assert ET.fromstring(client.get("/api/v1/projects/demo/alerts.atom").content).findall(f"{ATOM}entry") == []
    r = client.post("/api/v1/subscriptions", json={"run": run.run, "channel": "webhook", "url": "http://127.0.0.1:9/"})
    assert r.status_code == 404


def test_per_run_overrides_from_run_started_and_the_api(make_client):
    client, token = make_client()
    run = spike_run(client, token, alerts={"spike": {"min_rel": 5.0}})  # only 6x jumps count
    log_curve(client, token, run, loss_curve(400, seed=3, spike=(300, 5, 1.0)))
    assert client.get(f"/api/v1/runs/{run.run}/alerts").json()["alerts"] == []
    cfg = client.get(f"/api/v1/runs/{run.run}/alerts/config").json()
    assert cfg["overrides"] == {"spike": {"min_rel": 5.0}} and cfg["effective"]["spike"]["min_rel"] == 5.0

    url = f"/api/v1/runs/{run.run}/alerts/config"
    assert client.put(url, json={"spike": {"min_rel": 0.2}}).status_code == 401
    bad = client.put(url, json={"spike": {"nope": 1}}, headers={"Authorization": f"Bearer {token}"})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "alerts.spike.nope"
    ok = client.put(url, json={"spike": {"min_rel": 0.2}, "stall": {"after_s": 60}},
                    headers={"Authorization": f"Bearer {token}"})
    assert ok.status_code == 200 and ok.json()["overrides"]["stall"] == {"after_s": 60.0}
    log_curve(client, token, run, loss_curve(600, seed=3, spike=(500, 5, 1.0))[400:], start=400)
    assert [a["step"] for a in client.get(f"/api/v1/runs/{run.run}/alerts").json()["alerts"]] == [500]


def test_webhook_gets_one_signed_request_per_alert(make_client):
    client, token = make_client()
    rec = Receiver()
    try:
        run = spike_run(client, token)
        sub = client.post("/api/v1/subscriptions", json={"run": run.run, "channel": "webhook", "url": rec.url}).json()
        secret = sub["secret"]
        log_curve(client, token, run, loss_curve(600, seed=4, spike=(300, 40, 0.9)))
        wait(lambda: rec.requests)
        time.sleep(1.0)  # nothing else may follow (the close is not subscribed)
        assert len(rec.requests) == 1
        req = rec.requests[0]
        assert Webhook(secret).verify(req["body"], req["headers"]) == json.loads(req["body"])  # Standard Webhooks
        assert req["headers"]["X-Runcast-Event"] == json.loads(req["body"])["event"] == "alert.opened"
        body = rec.json(0)
        assert body["event"] == "alert.opened" and body["alert"]["kind"] == "spike" and body["alert"]["step"] == 300
        assert body["unsubscribe_url"] == sub["unsubscribe_url"]
        # the subscriber sees its own subscription by its token, and nobody can list them
        sid, tok = sub["id"], sub["unsubscribe_url"].split("token=")[1]
        own = client.get(f"/api/v1/subscriptions/{sid}?token={tok}").json()
        assert own["status"] == "active" and "secret" not in own
        assert client.get(f"/api/v1/subscriptions/{sid}?token=wrong").status_code == 404
        assert client.get("/api/v1/subscriptions").status_code in (404, 405)
        # unsubscribing needs only the link
        assert client.get(sub["unsubscribe_url"].split("testserver")[1]).json()["status"] == "unsubscribed"
        log_curve(client, token, run, loss_curve(800, seed=4, spike=(700, 5, 2.0))[600:], start=600)
        time.sleep(1.0)
        assert len(rec.requests) == 1
    finally:
        rec.close()


def test_slack_format_and_project_subscription_with_close(make_client):
    client, token = make_client()
    rec = Receiver()
    try:
        sub = client.post("/api/v1/subscriptions", json={"project": "demo", "channel": "webhook", "url": rec.url,
                                                         "format": "slack", "notify_close": True}).json()
        run = spike_run(client, token)
        log_curve(client, token, run, loss_curve(600, seed=5, spike=(300, 10, 1.0)))
        wait(lambda: len(rec.requests) >= 2)
        texts = sorted(rec.json(i)["text"] for i in range(len(rec.requests)))
        assert len(texts) == 2 and all("Unsubscribe" in t for t in texts)
        assert any("ended" in t for t in texts)
        assert sub["format"] == "slack"
    finally:
        rec.close()


def test_fanout_starts_only_for_runs_someone_subscribes_to(make_client, monkeypatch):
    """A run nobody subscribes to starts no fan-out (a noisy run opens and closes thousands of
    alerts); a private run is not reached by its project's subscription; a run's own is."""
    from runcast_server.alerts import notify

    started: list[tuple[int, str]] = []
    real = notify.start_fanout
    monkeypatch.setattr(notify, "start_fanout", lambda ctx, alert_id, phase: (started.append((alert_id, phase)),
                                                                              real(ctx, alert_id, phase)))

    def alert_ids(run: WireRun) -> set[int]:
        log_curve(client, token, run, loss_curve(600, seed=5, spike=(300, 10, 1.0)))
        ids = {a["id"] for a in client.get(f"/api/v1/runs/{run.run}/alerts", headers=auth).json()["alerts"]}
        assert ids  # the spike opened (and closed) an alert
        return ids

    client, token = make_client()
    auth = {"Authorization": f"Bearer {token}"}
    rec = Receiver()
    try:
        assert alert_ids(spike_run(client, token, name="nobody")) and started == []
        sub = client.post("/api/v1/subscriptions", json={"project": "demo", "channel": "webhook", "url": rec.url})
        assert sub.status_code == 201, sub.text
        assert alert_ids(spike_run(client, token, name="hidden", visibility="private")) and started == []
        public = alert_ids(spike_run(client, token, name="public"))
        assert {a for a, _ in started} == public and {p for _, p in started} == {"open", "close"}
        wait(lambda: rec.requests)
        started.clear()
        private = spike_run(client, token, name="own", visibility="private")
        sub = client.post("/api/v1/subscriptions", json={"run": private.run, "channel": "webhook", "url": rec.url},
                          headers=auth)
        assert sub.status_code == 201, sub.text
        own = alert_ids(private)
        assert {a for a, _ in started} == own
    finally:
        rec.close()


def test_failing_receiver_is_retried_then_disabled(make_client):
    client, token = make_client(RUNCAST_WEBHOOK_MAX_ATTEMPTS="5", RUNCAST_WEBHOOK_RETRY_BASE_S="0.3",
                                RUNCAST_WEBHOOK_DISABLE_AFTER="3")
    rec = Receiver(status=500)
    try:
        run = spike_run(client, token)
        sub = client.post("/api/v1/subscriptions", json={"run": run.run, "channel": "webhook", "url": rec.url}).json()
        log_curve(client, token, run, loss_curve(400, seed=6, spike=(300, 5, 1.0)))
        tok = sub["unsubscribe_url"].split("token=")[1]
        wait(lambda: client.get(f"/api/v1/subscriptions/{sub['id']}?token={tok}").json()["status"] == "disabled")
        time.sleep(0.5)
        assert len(rec.requests) == 3  # three attempts, with backoff, then disabled
        gaps = [b - a for a, b in zip(rec.arrived, rec.arrived[1:])]
        assert gaps[0] >= 0.3 and gaps[1] >= 0.6 and gaps[1] > gaps[0] + 0.15  # exponential backoff
        assert client.get(f"/api/v1/subscriptions/{sub['id']}?token={tok}").json()["failures"] == 3
    finally:
        rec.close()


@pytest.mark.parametrize("url", ["http://127.0.0.1/x", "http://10.0.0.1/x", "http://169.254.169.254/latest",
                                 "http://[::1]/x", "http://localhost/x"])
def test_ssrf_refused_at_subscription(make_client, url):
    client, token = make_client(RUNCAST_WEBHOOK_ALLOW_CIDRS="")
    run = spike_run(client, token)
    r = client.post("/api/v1/subscriptions", json={"run": run.run, "channel": "webhook", "url": url})
    assert r.status_code == 422 and r.json()["error"]["field"] == "url"


def test_subscription_rate_limit(make_client):
    client, token = make_client(RUNCAST_SUBSCRIBE_RATE_LIMIT="2")
    run = spike_run(client, token)
    codes = [client.post("/api/v1/subscriptions", json={"run": run.run, "channel": "webhook",
                                                        "url": "http://127.0.0.1:9/"}).status_code for _ in range(3)]
    assert codes == [201, 201, 429]


def test_email_confirm_first_then_alert_with_unsubscribe_link(make_client):
    from aiosmtpd.controller import Controller

    class Inbox:
        def __init__(self) -> None:
            self.mails: list[Any] = []

        async def handle_DATA(self, server, session, envelope):
            self.mails.append(envelope)
            return "250 OK"

    from services import free_port

    inbox = Inbox()
    port = free_port()
    smtp = Controller(inbox, hostname="127.0.0.1", port=port)
    smtp.start()
    try:
        client, token = make_client(RUNCAST_SMTP_HOST="127.0.0.1", RUNCAST_SMTP_PORT=str(port))
        run = spike_run(client, token)
        sub = client.post("/api/v1/subscriptions", json={"run": run.run, "channel": "email", "email": "a@example.org"})
        assert sub.status_code == 201 and sub.json()["status"] == "pending"
        assert len(inbox.mails) == 1
        text = mail_text(inbox.mails[0])
        link = next(line for line in text.splitlines() if "/subscriptions/confirm?token=" in line).strip()
        log_curve(client, token, run, loss_curve(400, seed=7, spike=(300, 5, 1.0)))
        time.sleep(1.0)
        assert len(inbox.mails) == 1  # nothing before confirmation
        assert client.get(link.split("testserver")[1]).json()["status"] == "active"
        log_curve(client, token, run, loss_curve(600, seed=7, spike=(500, 5, 1.0))[400:], start=400)
        wait(lambda: len(inbox.mails) == 2)
        mail = mail_text(inbox.mails[1])
        assert "Loss spike" in mail and "step 500" in mail
        assert sub.json()["unsubscribe_url"] in mail
        assert message(inbox.mails[1])["List-Unsubscribe"] == f"<{sub.json()['unsubscribe_url']}>"
        assert client.post("/api/v1/subscriptions", json={"run": run.run, "channel": "email",
                                                          "email": "not-an-address"}).status_code == 422
    finally:
        smtp.stop()


def message(envelope: Any) -> Any:
    import email
    from email import policy

    return email.message_from_bytes(envelope.content, policy=policy.default)


def mail_text(envelope: Any) -> str:
    return message(envelope).get_body().get_content()


def test_stall_sweep_opens_then_activity_closes(make_client):
    from runcast_server.alerts.stall import sweep

    client, token = make_client()
    run = spike_run(client, token, alerts={"stall": {"after_s": 60}})
    log_curve(client, token, run, [2.0] * 10)
    assert sweep(client.app.state.context, now=time.time() + 30) == 0
    assert sweep(client.app.state.context, now=time.time() + 120) == 1
    assert sweep(client.app.state.context, now=time.time() + 240) == 0  # one alert per stall
    [a] = client.get(f"/api/v1/runs/{run.run}/alerts?kind=stall").json()["alerts"]
    assert a["state"] == "open" and a["evidence"]["open"]["after_s"] == 60
    post(client, token, [run.event("heartbeat", step=9)])
    [a] = client.get(f"/api/v1/runs/{run.run}/alerts?kind=stall").json()["alerts"]
    assert a["state"] == "closed"


def test_restart_loop_from_resumes(make_client):
    client, token = make_client()
    run = spike_run(client, token)
    log_curve(client, token, run, [2.0] * 10)
    for k in range(3):
        post(client, token, [run.resume(10)])
    [a] = client.get(f"/api/v1/runs/{run.run}/alerts?kind=restart_loop").json()["alerts"]
    assert a["state"] == "open" and a["evidence"]["open"]["resumes"] == 3


def test_the_stalled_status_and_the_stall_alert_share_one_threshold(make_client):
    """A viewer never sees 'stalled' without a stall alert, or the reverse: the server's
    RUNCAST_STALL_AFTER_S is the default of both, and a run's alerts.stall.after_s moves both."""
    from runcast_server.alerts.stall import sweep

    # 6 s: the first checks come well within it on a loaded machine (CI ran past a 3 s one)
    client, token = make_client(RUNCAST_STALL_AFTER_S="6")
    quick = spike_run(client, token, name="quick", alerts={"stall": {"after_s": 1}})
    default = spike_run(client, token, name="default")
    log_curve(client, token, quick, [2.0] * 5)
    log_curve(client, token, default, [2.0] * 5)
    last_logged = time.time()
    assert client.get(f"/api/v1/runs/{default.run}/alerts/config").json()["effective"]["stall"]["after_s"] == 6
    assert client.get(f"/api/v1/runs/{quick.run}/alerts/config").json()["effective"]["stall"]["after_s"] == 1

    def status(run: WireRun) -> str:
        return client.get(f"/api/v1/runs/{run.run}").json()["status"]

    def stalled_list() -> set[str]:
        return {r["name"] for r in client.get("/api/v1/runs", params={"status": "stalled"}).json()["runs"]}

    def alerted() -> set[str]:
        return {name for name, run in (("quick", quick), ("default", default))
                if client.get(f"/api/v1/runs/{run.run}/alerts?kind=stall").json()["alerts"]}

    time.sleep(1.6)
    sweep(client.app.state.context)
    assert (status(quick), status(default)) == ("stalled", "running")
    assert stalled_list() == alerted() == {"quick"}
    assert "stalled" in client.get(f"/badge/runs/{quick.run}.svg").text
    assert "stalled" not in client.get(f"/badge/runs/{default.run}.svg").text

    time.sleep(max(0.0, last_logged + 6.6 - time.time()))
    sweep(client.app.state.context)
    assert (status(quick), status(default)) == ("stalled", "stalled")
    assert stalled_list() == alerted() == {"quick", "default"}
