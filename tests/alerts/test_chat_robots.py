"""Alerts to Feishu/Lark, DingTalk and WeCom group robots, from a subscriber's seat.

Each platform is played by a local robot that checks the request the way the platform
documents it: Feishu's signature in the body (base64 HMAC-SHA256 keyed by "timestamp\\nsecret"
over nothing), DingTalk's in the query (base64 HMAC-SHA256 keyed by the secret over
"timestamp\\nsecret"; the timestamp in milliseconds), WeCom's key in the URL; each answers
HTTP 200 with the platform's error code. A run and a metric named to mention everyone and
to link elsewhere must produce neither; a platform error is a failed delivery in the
delivery log, retried only when waiting helps; the robot's secrets never come back.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.server
import json
import re
import threading
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from alerts.helpers import WireRun, loss_curve, post, wait
from alerts.test_embedded import log_curve

HOSTILE_KEY = '@all <at user_id="all"></at> [x](http://evil)'
HOSTILE_NAME = "<@all> @13800000000 ![img](http://evil/i.png) <at user_id=\"all\">all</at>"
SECRET = "SECabc123signing"


class Robot:
    """A platform's robot on 127.0.0.1: verifies each request as the platform does; ``codes`` are
    the error codes it answers in turn (then 0)."""

    def __init__(self, platform: str, secret: str | None = None, codes: tuple[int, ...] = ()) -> None:
        self.platform, self.secret, self.codes = platform, secret, list(codes)
        self.requests: list[dict[str, Any]] = []
        self.key = "wecomkey-0123456789abcdef"
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                body = json.loads(raw)
                query = {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}
                outer.requests.append({"path": self.path, "query": query, "body": body, "raw": raw,
                                       "signed": outer.verify(body, query)})
                code = outer.codes.pop(0) if outer.codes else 0
                answer = ({"code": code, "msg": "frequency limited" if code else "success", "data": {}}
                          if outer.platform == "feishu" else {"errcode": code, "errmsg": "error" if code else "ok"})
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        port = self.server.server_address[1]
        self.url = {
            "feishu": f"http://127.0.0.1:{port}/open-apis/bot/v2/hook/0d5f-feishu-hook-token",
            "dingtalk": f"http://127.0.0.1:{port}/robot/send?access_token=dingtalktoken0123456789",
            "wecom": f"http://127.0.0.1:{port}/cgi-bin/webhook/send?key={self.key}",
        }[platform]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def verify(self, body: dict[str, Any], query: dict[str, str]) -> bool:
        """The platform's own check of a request."""
        now = time.time()
        if self.platform == "feishu":
            if self.secret is None:
                return "sign" not in body
            ts = int(body["timestamp"])
            key = f"{ts}\n{self.secret}".encode()
            expected = base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()
            return body["sign"] == expected and abs(now - ts) < 3600
        if self.platform == "dingtalk":
            if self.secret is None:
                return "sign" not in query
            ts = int(query["timestamp"])
            mac = hmac.new(self.secret.encode(), f"{ts}\n{self.secret}".encode(), hashlib.sha256)
            return query["sign"] == base64.b64encode(mac.digest()).decode() and abs(now * 1000 - ts) < 3600_000
        return query.get("key") == self.key

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def hostile_run(client: Any, token: str) -> WireRun:
    run = WireRun(name=HOSTILE_NAME)
    post(client, token, [run.started(alerts={"keys": {"loss": [HOSTILE_KEY]}})])
    return run


def subscribe(client: Any, run: WireRun, robot: Robot, **extra: Any) -> dict[str, Any]:
    r = client.post("/api/v1/subscriptions", json={"run": run.run, "channel": "webhook", "url": robot.url,
                                                   "format": robot.platform, **extra})
    assert r.status_code == 201, r.text
    return r.json()


def assert_inert(text: str) -> None:
    """No mention, tag, link or image can form in ``text`` (each is broken by a zero-width space)."""
    assert "@all" not in text and "<at" not in text and "<@" not in text and "@138" not in text
    assert "http://evil" not in text and "](" not in text.replace("](http://127.0.0.1", "").replace(
        "](http://testserver", "")
    assert "\u200b" in text


def deliveries(client: Any) -> list[Any]:
    from runcast_server.alerts.models import AlertDelivery
    from sqlalchemy import select

    with client.app.state.context.database.scope() as s:
        return [(d.status, d.attempts, d.last_error) for d in s.scalars(select(AlertDelivery).order_by(AlertDelivery.id))]


def own(client: Any, sub: dict[str, Any]) -> dict[str, Any]:
    token = sub["unsubscribe_url"].split("token=")[1]
    return client.get(f"/api/v1/subscriptions/{sub['id']}?token={token}").json()


def test_feishu_card_signed_in_chinese_mentions_nobody(make_client):
    client, token = make_client()
    robot = Robot("feishu", SECRET)
    try:
        run = hostile_run(client, token)
        sub = subscribe(client, run, robot, secret=SECRET, language="zh-CN")
        assert "secret" not in sub and SECRET not in json.dumps(sub)  # the platform's secret is never shown
        assert sub["language"] == "zh-CN" and "0d5f-feishu-hook-token" not in json.dumps(sub)
        assert sub["target"].endswith("/hook/****oken")
        log_curve(client, token, run, loss_curve(400, seed=4, spike=(300, 10, 0.9)), key=HOSTILE_KEY)
        wait(lambda: robot.requests)
        req = robot.requests[0]
        assert req["signed"], req
        body = req["body"]
        assert body["msg_type"] == "interactive"
        card = body["card"]
        assert card["header"]["title"] == {"tag": "plain_text", "content": "损失尖峰"}
        text = card["elements"][0]["text"]
        assert text["tag"] == "plain_text" and "出现损失尖峰" in text["content"] and "第 300 步" in text["content"]
        buttons = card["elements"][1]["actions"]
        assert [b["text"]["content"] for b in buttons] == ["查看运行", "退订"]
        assert buttons[0]["url"].endswith(f"/runs/{run.run}#alert-1") or "#alert-" in buttons[0]["url"]
        raw = req["raw"].decode()
        assert_inert(json.loads(raw)["card"]["elements"][0]["text"]["content"])
        assert "user_id=\\\"all\\\"" not in raw.replace("\u200b", "") or "<at" not in raw
        wait(lambda: deliveries(client) and deliveries(client)[0][0] == "sent")
        assert SECRET not in json.dumps(own(client, sub))
    finally:
        robot.close()


def test_dingtalk_markdown_signed_in_query_mentions_nobody(make_client):
    client, token = make_client()
    robot = Robot("dingtalk", SECRET)
    try:
        run = hostile_run(client, token)
        sub = subscribe(client, run, robot, secret=SECRET)
        assert "dingtalktoken0123456789" not in json.dumps(sub) and "access_token=****6789" in sub["target"]
        log_curve(client, token, run, loss_curve(400, seed=4, spike=(300, 10, 0.9)), key=HOSTILE_KEY)
        wait(lambda: robot.requests)
        req = robot.requests[0]
        assert req["signed"], req
        assert req["query"]["access_token"] == "dingtalktoken0123456789"
        body = req["body"]
        assert body["msgtype"] == "markdown" and set(body) == {"msgtype", "markdown"}  # no "at": nobody mentioned
        text = body["markdown"]["text"]
        assert "Loss spike" in text and "step 300" in text
        links = re.findall(r"\[([^\]]*)\]\(([^)]*)\)", text)
        assert [label for label, _ in links] == ["Open the run", "Unsubscribe"]  # the only links are Runcast's
        assert_inert(text.split("\n\n")[1])
    finally:
        robot.close()


def test_wecom_markdown_key_in_url_never_shown(make_client):
    client, token = make_client()
    robot = Robot("wecom")
    try:
        run = hostile_run(client, token)
        sub = subscribe(client, run, robot, language="zh-CN")
        assert robot.key not in json.dumps(sub) and "key=****cdef" in sub["target"]
        log_curve(client, token, run, loss_curve(400, seed=4, spike=(300, 10, 0.9)), key=HOSTILE_KEY)
        wait(lambda: robot.requests)
        req = robot.requests[0]
        assert req["signed"]
        body = req["body"]
        assert body["msgtype"] == "markdown" and "mentioned_list" not in json.dumps(body)
        content = body["markdown"]["content"]
        assert "损失尖峰" in content and "<@all>" not in content and "<@" not in content
        assert [label for label, _ in re.findall(r"\[([^\]]*)\]\(([^)]*)\)", content)] == ["查看运行", "退订"]
        assert len(content.encode()) <= 4096
        assert robot.key not in json.dumps(own(client, sub))
    finally:
        robot.close()


def test_platform_rate_limit_is_retried_and_a_refusal_is_not(make_client):
    client, token = make_client(RUNCAST_WEBHOOK_RETRY_BASE_S="0.2", RUNCAST_WEBHOOK_MAX_ATTEMPTS="4")
    limited = Robot("wecom", codes=(45009, 45009))  # over 20 messages a minute, twice
    refusing = Robot("dingtalk", SECRET, codes=(310000,))  # the signature or keyword check failed
    try:
        run = hostile_run(client, token)
        subscribe(client, run, limited)
        subscribe(client, run, refusing, secret=SECRET)
        log_curve(client, token, run, loss_curve(400, seed=4, spike=(300, 10, 0.9)), key=HOSTILE_KEY)
        wait(lambda: len(limited.requests) == 3 and len(refusing.requests) == 1)
        wait(lambda: sorted(d[0] for d in deliveries(client)) == ["failed", "sent"])
        time.sleep(0.8)  # no retry of the refusal follows
        assert len(refusing.requests) == 1 and len(limited.requests) == 3
        by_status = {d[0]: d for d in deliveries(client)}
        assert by_status["sent"][1] == 3 and by_status["sent"][2] is None
        status, attempts, error = by_status["failed"]
        assert attempts == 1 and error.startswith("dingtalk error 310000")
        assert "dingtalktoken" not in error and SECRET not in error
    finally:
        limited.close()
        refusing.close()


def test_the_robot_token_is_scrubbed_from_the_delivery_log(make_client):
    from runcast_server.alerts import chat

    url = "http://127.0.0.1:9/cgi-bin/webhook/send?key=averysecretkey1234"
    assert chat.scrub("wecom", url, f"ConnectError: {url}") == (
        "ConnectError: http://127.0.0.1:9/cgi-bin/webhook/send?key=****1234")
    assert chat.mask("feishu", "https://open.feishu.cn/open-apis/bot/v2/hook/abcdef-123456") == (
        "https://open.feishu.cn/open-apis/bot/v2/hook/****3456")


@pytest.mark.parametrize(("body", "field"), [
    ({"format": "telegram"}, "format"),
    ({"format": "feishu", "language": "fr"}, "language"),
    ({"format": "feishu", "language": ""}, "language"),
    ({"format": "wecom", "secret": "x"}, "secret"),
    ({"format": "json", "secret": "x"}, "secret"),
    ({"format": "wecom", "url": "https://qyapi.example.com/cgi-bin/webhook/send"}, "url"),
    ({"format": "dingtalk", "url": "http://10.1.2.3/robot/send?access_token=abc"}, "url"),
    ({"format": "feishu", "url": "http://169.254.169.254/open-apis/bot/v2/hook/abc"}, "url"),
])
def test_subscription_validation_names_the_field(make_client, body, field):
    client, token = make_client(RUNCAST_WEBHOOK_ALLOW_CIDRS="")
    run = hostile_run(client, token)
    payload = {"run": run.run, "channel": "webhook", "url": "http://127.0.0.1/open-apis/bot/v2/hook/t?key=k&access_token=a",
               **body}
    r = client.post("/api/v1/subscriptions", json=payload)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == field
    assert deliveries(client) == []
    from runcast_server.alerts.models import Subscription
    from sqlalchemy import func, select

    with client.app.state.context.database.scope() as s:
        assert s.scalar(select(func.count()).select_from(Subscription)) == 0  # nothing half-written


def test_another_projects_token_cannot_subscribe_to_a_private_run(make_client):
    from runcast_server.core.auth import create_token

    client, token = make_client()
    run = WireRun(name="secret")
    post(client, token, [run.started(visibility="private")])
    with client.app.state.context.database.scope() as s:
        other = create_token(s, "other")
    robot = Robot("wecom")
    try:
        body = {"run": run.run, "channel": "webhook", "url": robot.url, "format": "wecom"}
        for headers in ({"Authorization": f"Bearer {other}"}, {}):
            r = client.post("/api/v1/subscriptions", json=body, headers=headers)
            assert r.status_code == 404 and r.json()["error"]["field"] == "run"
        r = client.post("/api/v1/subscriptions", json=body, headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 201
    finally:
        robot.close()
