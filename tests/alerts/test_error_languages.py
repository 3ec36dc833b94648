"""The errors a person reads, in the reader's language (issue 29), from a client's seat: FastAPI's
422 validation messages, a 429, a 503 and a 500. Only the message changes: the status, the
``field`` (the 422's ``loc``), the headers and the body's shape are the English answer's; a client
that asks for no language gets the bytes it always got; Traditional Chinese and bare ``zh`` read
the Simplified Chinese catalog rather than English."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from alerts.helpers import WireRun, post

ZH = {"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.8"}


def same_but_message(en: Any, zh: Any) -> tuple[str, str]:
    """The two answers agree but for the message; the two messages."""
    assert en.status_code == zh.status_code
    a, b = en.json()["error"], zh.json()["error"]
    assert set(a) == set(b) and {k: v for k, v in a.items() if k != "message"} == {k: v for k, v in b.items() if k != "message"}
    assert "Accept-Language" in zh.headers["vary"]
    return a["message"], b["message"]


@pytest.mark.parametrize(("url", "english", "chinese", "field"), [
    ("/api/v1/runs?limit=0", "Input should be greater than or equal to 1", "输入应大于或等于 1", "limit"),
    ("/api/v1/runs?limit=abc", "Input should be a valid integer, unable to parse string as an integer",
     "输入应为有效的整数，无法将字符串解析为整数", "limit"),
    ("/api/v1/runs?project=" + "p" * 101, "String should have at most 100 characters", "字符串长度最多为 100 个字符", "project"),
])
def test_validation_messages_follow_the_language_and_keep_the_field(make_client, url, english, chinese, field):
    client, _ = make_client()
    plain, en, zh = client.get(url), client.get(url, headers={"Accept-Language": "en-GB"}), client.get(url, headers=ZH)
    assert plain.status_code == 422 and plain.json() == {"error": {"message": english, "field": field}}
    assert en.content == plain.content
    assert same_but_message(en, zh) == (english, chinese)
    assert client.get(url + "&lang=zh-CN" if "?" in url else url).json()["error"]["message"] == chinese


def test_a_body_field_and_a_validator_message(make_client):
    client, token = make_client()
    auth = {"Authorization": f"Bearer {token}"}
    body = {"channel": "webhook", "url": "http://127.0.0.1:9/hook", "project": "demo", "language": "fr"}
    en = client.post("/api/v1/subscriptions", json=body, headers=auth)
    zh = client.post("/api/v1/subscriptions", json=body, headers={**auth, **ZH})
    english, chinese = same_but_message(en, zh)
    assert en.status_code == 422 and en.json()["error"]["field"] == "language", en.text
    assert english == "Value error, the language must be one of en, zh-CN" and chinese.startswith("取值错误："), chinese
    both = {**body, "language": "zh-CN", "run": "r"}  # the route's own check, after validation
    assert client.post("/api/v1/subscriptions", json=both, headers={**auth, **ZH}).json()["error"]["message"] == (
        "run 和 project 必须且只能给出其中一个")
    missing = client.post("/api/v1/session/password", json={"name": "x"}, headers=ZH)
    assert missing.status_code == 422 and missing.json() == {"error": {"message": "缺少必填字段", "field": "password"}}
    not_json = client.post("/api/v1/session/password", content=b"{", headers={**ZH, "Content-Type": "application/json"})
    assert not_json.status_code == 422 and not_json.json()["error"]["field"] == "body"
    assert not_json.json()["error"]["message"].startswith("请求体不是 JSON：")


@pytest.mark.parametrize("header", ["zh-TW", "zh-Hant-HK", "zh-HK,en;q=0.5", "zh", "fr;q=0.9,zh-MO;q=0.8"])
def test_traditional_chinese_and_bare_zh_read_the_chinese_catalog(make_client, header):
    client, _ = make_client()
    res = client.get("/api/v1/runs/nosuchrun0000000", headers={"Accept-Language": header})
    assert res.json() == {"error": {"message": "未找到运行", "field": "run"}}
    assert client.get("/api/v1/runs?limit=0", headers={"Accept-Language": header}).json()["error"]["message"] == "输入应大于或等于 1"
    assert client.get("/api/v1/runs/nosuchrun0000000", headers={"Accept-Language": "fr, de"}).json()["error"]["message"] == (
        "run not found")


def test_a_rate_limited_sign_in_is_told_in_chinese(make_client, monkeypatch):
    client, _ = make_client()
    monkeypatch.setattr(client.app.state.context.settings, "signin_rate_limit", 1)
    first = client.post("/api/v1/session/password", json={"name": "nobody", "password": "wrong password"}, headers=ZH)
    assert first.status_code == 401 and first.json()["error"] == {"message": "用户名或密码错误", "field": "password"}
    again = client.post("/api/v1/session/password", json={"name": "nobody", "password": "wrong password"}, headers=ZH)
    assert again.status_code == 429 and int(again.headers["retry-after"]) > 0
    assert again.json() == {"error": {"message": "来自该地址的登录尝试过多，请稍后再试"}}
    english = client.post("/api/v1/session/password", json={"name": "nobody", "password": "wrong password"})
    assert english.json() == {"error": {"message": "too many sign-in attempts from this address; try again later"}}


def test_a_full_disk_503_and_an_internal_500_in_chinese(make_client, monkeypatch):
    from runcast_server.core import disk
    from runcast_server.runs import queries

    client, token = make_client()
    run = WireRun(name="r")
    post(client, token, [run.started()])
    settings = client.app.state.context.settings
    monkeypatch.setattr(disk, "free_bytes", lambda _: settings.min_free_bytes - 1)
    batch = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    en = client.post("/api/v1/ingest", content=b'{"events": []}', headers=batch)
    zh = client.post("/api/v1/ingest", content=b'{"events": []}', headers={**batch, **ZH})
    assert en.status_code == 503 and int(zh.headers["retry-after"]) > 0
    assert same_but_message(en, zh) == ("the server's disk is full; retry later", "服务器磁盘已满，请稍后重试")

    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(queries, "run_detail", broken)
    quiet = TestClient(client.app, raise_server_exceptions=False)
    en, zh = quiet.get(f"/api/v1/runs/{run.run}"), quiet.get(f"/api/v1/runs/{run.run}", headers=ZH)
    assert en.status_code == 500 and en.json() == {"error": {"message": "internal server error"}}
    assert same_but_message(en, zh)[1] == "服务器内部错误"
