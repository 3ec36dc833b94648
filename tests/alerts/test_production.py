"""Production mode: SDK -> API -> Redis -> Celery worker (detectors) -> notify tasks -> a real
local webhook receiver, which gets exactly one signed request for one spike."""

from __future__ import annotations

import json
import time

import httpx
from standardwebhooks import Webhook

from alerts.helpers import Receiver, loss_curve, wait


def test_sdk_spike_reaches_the_webhook_once_signed(stack):
    import runcast

    env = {"RUNCAST_WEBHOOK_ALLOW_CIDRS": "127.0.0.0/8", "RUNCAST_WEBHOOK_RETRY_BASE_S": "0.2"}
    stack.start_worker(**env)
    stack.start_api(**env)
    token = stack.token("prod")
    rec = Receiver()
    try:
        run = runcast.init(project="prod", name="spiky", server=stack.api_url, token=token, capture_code=False,
                           flush_interval=0.2, alerts={"stall": {"after_s": 3600}})
        for step, value in enumerate(loss_curve(200, seed=11)):
            run.log({"loss": value}, step=step)
        wait(lambda: httpx.get(f"{stack.api_url}/api/v1/runs/{run.id}", timeout=30).status_code == 200, timeout=60)
        sub = httpx.post(f"{stack.api_url}/api/v1/subscriptions",
                         json={"run": run.id, "channel": "webhook", "url": rec.url}, timeout=30).json()
        curve = loss_curve(500, seed=11, spike=(300, 30, 1.0))
        for step in range(200, 500):
            run.log({"loss": curve[step]}, step=step)
        run.finish()
        wait(lambda: rec.requests, timeout=60)
        time.sleep(2.0)
        assert len(rec.requests) == 1
        req = rec.requests[0]
        assert Webhook(sub["secret"]).verify(req["body"], req["headers"]) == json.loads(req["body"])  # Standard Webhooks
        assert req["headers"]["X-Runcast-Event"] == json.loads(req["body"])["event"] == "alert.opened"
        body = rec.json(0)
        assert (body["alert"]["kind"], body["alert"]["step"], body["alert"]["run"]) == ("spike", 300, run.id)
        alerts = httpx.get(f"{stack.api_url}/api/v1/runs/{run.id}/alerts", timeout=30).json()["alerts"]
        assert [(a["kind"], a["state"], a["step"]) for a in alerts] == [("spike", "closed", 300)]
        cfg = httpx.get(f"{stack.api_url}/api/v1/runs/{run.id}/alerts/config", timeout=30).json()
        assert cfg["overrides"] == {"stall": {"after_s": 3600}}
    finally:
        rec.close()


def test_a_report_notice_goes_through_the_workers_after_the_delay(stack):
    """Production mode: the publication's fan-out and delivery are Celery tasks (a countdown for a
    delayed run); the receiver gets one signed ``report.published`` once the delay has passed."""
    import runcast

    env = {"RUNCAST_WEBHOOK_ALLOW_CIDRS": "127.0.0.0/8", "RUNCAST_WEBHOOK_RETRY_BASE_S": "0.2"}
    stack.start_worker(**env)
    stack.start_api(**env)
    token = stack.token("prod")
    auth = {"Authorization": f"Bearer {token}"}
    rec = Receiver()
    try:
        run = runcast.init(project="prod", name="reported", server=stack.api_url, token=token, capture_code=False,
                           flush_interval=0.2)
        for step in range(1, 4):
            run.log({"loss": 2.0 / step}, step=step)
        run.finish()
        api = f"{stack.api_url}/api/v1/runs/{run.id}"
        wait(lambda: httpx.get(api, timeout=30).status_code == 200 and httpx.get(api, timeout=30).json().get("last_step") == 3, timeout=60)
        sub = httpx.post(f"{stack.api_url}/api/v1/subscriptions",
                         json={"run": run.id, "channel": "webhook", "url": rec.url, "notices": ["reports"]}, timeout=30).json()
        assert httpx.put(f"{api}/policy", json={"delay_s": 2}, headers=auth, timeout=30).status_code == 200
        made = httpx.post(f"{api}/reports", headers=auth,
                          json={"title": "Week 1", "body": "Loss fell.", "from_step": 1, "to_step": 3}, timeout=30).json()
        published = httpx.post(f"{api}/reports/{made['number']}/publish", headers=auth, json={}, timeout=30).json()
        time.sleep(1.0)
        assert rec.requests == []
        wait(lambda: rec.requests, timeout=60)
        time.sleep(1.0)
        assert len(rec.requests) == 1 and rec.arrived[0] >= published["published_at"] + 2
        req = rec.requests[0]
        body = Webhook(sub["secret"]).verify(req["body"], req["headers"])
        assert req["headers"]["X-Runcast-Event"] == body["event"] == "report.published"
        assert (body["report"]["run"], body["report"]["number"], body["report"]["summary"]) == (run.id, 1, "Loss fell.")
    finally:
        rec.close()
