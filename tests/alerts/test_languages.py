"""Server-rendered text in the reader's language (?lang= or Accept-Language), from a reader's seat:
the badge, the figures, the Atom feeds, an error a person reads, and a zh-CN subscriber's e-mail.
A client that asks for no language gets the English bytes it always got."""

from __future__ import annotations

import time
from typing import Any
from xml.etree import ElementTree as ET

from alerts.helpers import WireRun, loss_curve, post, wait
from alerts.test_embedded import log_curve, mail_text

ATOM = "{http://www.w3.org/2005/Atom}"
ZH = {"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.8"}


def spiked(client: Any, token: str) -> WireRun:
    run = WireRun(name="gpt-小模型")
    post(client, token, [run.started()])
    log_curve(client, token, run, loss_curve(400, seed=4, spike=(300, 10, 0.9)))
    return run


def test_badge_follows_the_reader_language_with_its_own_etag(make_client):
    client, token = make_client()
    run = spiked(client, token)
    en = client.get(f"/badge/runs/{run.run}.svg?key=loss")
    zh = client.get(f"/badge/runs/{run.run}.svg?key=loss", headers=ZH)
    by_query = client.get(f"/badge/runs/{run.run}.svg?key=loss&lang=zh-CN")
    assert "running · step 399" in en.text and "运行中 · 第 399 步" in zh.text
    assert by_query.content == zh.content
    assert "Accept-Language" in en.headers["vary"] and "Accept-Language" in zh.headers["vary"]
    assert en.headers["etag"] != zh.headers["etag"]
    # a cache holding the English badge revalidates a Chinese reader to the Chinese one
    again = client.get(f"/badge/runs/{run.run}.svg?key=loss", headers={**ZH, "If-None-Match": en.headers["etag"]})
    assert again.status_code == 200 and again.content == zh.content
    assert client.get(f"/badge/runs/{run.run}.svg?key=loss", headers={"Accept-Language": "fr"}).content == en.content


def test_figures_label_their_axes_in_the_reader_language(make_client):
    client, token = make_client()
    run = spiked(client, token)
    en = client.get(f"/api/v1/runs/{run.run}/plot.svg?key=loss")
    zh = client.get(f"/api/v1/runs/{run.run}/plot.svg?key=loss", headers=ZH)
    assert ">step<" in en.text and ">步数<" in zh.text and ">步数<" not in en.text
    assert en.headers["etag"] != zh.headers["etag"] and "Accept-Language" in zh.headers["vary"]
    png = client.get(f"/api/v1/runs/{run.run}/plot.png?key=loss", headers=ZH)
    assert png.status_code == 200 and png.content.startswith(b"\x89PNG")  # with or without a CJK font
    assert png.headers["etag"] != client.get(f"/api/v1/runs/{run.run}/plot.png?key=loss").headers["etag"]


def test_feeds_in_chinese_and_english(make_client):
    client, token = make_client()
    run = spiked(client, token)
    wait(lambda: client.get(f"/api/v1/runs/{run.run}/alerts").json()["alerts"])
    en = ET.fromstring(client.get(f"/api/v1/runs/{run.run}/alerts.atom").content)
    zh_resp = client.get("/api/v1/projects/demo/alerts.atom", headers=ZH)
    zh = ET.fromstring(zh_resp.content)
    assert en.findtext(f"{ATOM}title") == "Runcast alerts: demo/gpt-小模型"
    assert en.find(f"{ATOM}entry/{ATOM}title").text.startswith("Loss spike on demo/gpt-小模型 loss ended at step 3")
    assert zh.findtext(f"{ATOM}title") == "Runcast 告警：demo"
    title = zh.find(f"{ATOM}entry/{ATOM}title").text
    assert title.startswith("demo/gpt-小模型 的 loss 的损失尖峰已于第 3") and title.endswith("，始于第 300 步。"), title
    assert zh.find(f"{ATOM}entry/{ATOM}category").get("label") == "损失尖峰"
    assert zh.get("{http://www.w3.org/XML/1998/namespace}lang") == "zh-CN" and en.get(
        "{http://www.w3.org/XML/1998/namespace}lang") is None
    assert zh_resp.headers["content-language"] == "zh-CN" and "Accept-Language" in zh_resp.headers["vary"]


def test_errors_a_person_reads_keep_their_shape(make_client):
    client, _ = make_client()
    en = client.get("/api/v1/runs/nosuchrun0000000")
    zh = client.get("/api/v1/runs/nosuchrun0000000", headers=ZH)
    assert en.json() == {"error": {"message": "run not found", "field": "run"}}
    assert zh.json() == {"error": {"message": "未找到运行", "field": "run"}}
    assert zh.status_code == en.status_code == 404 and "Accept-Language" in zh.headers["vary"]
    bad = client.post("/api/v1/ingest", content=b"[]", headers={**ZH, "Authorization": "Bearer nope",
                                                               "Content-Type": "application/json"})
    assert bad.status_code == 401 and bad.json()["error"]["message"] == "令牌无效或已被吊销"
    # a message with no translation yet stays English rather than vanish
    odd = client.post("/api/v1/subscriptions", json={"project": "demo", "channel": "webhook", "url": "ftp://x"},
                      headers=ZH)
    assert odd.status_code == 422 and odd.json()["error"]["field"] == "url"


def test_a_zh_cn_subscriber_gets_chinese_mail(make_client):
    from aiosmtpd.controller import Controller
    from services import free_port

    class Inbox:
        def __init__(self) -> None:
            self.mails: list[Any] = []

        async def handle_DATA(self, server, session, envelope):
            self.mails.append(envelope)
            return "250 OK"

    inbox, port = Inbox(), free_port()
    smtp = Controller(inbox, hostname="127.0.0.1", port=port)
    smtp.start()
    try:
        client, token = make_client(RUNCAST_SMTP_HOST="127.0.0.1", RUNCAST_SMTP_PORT=str(port))
        run = WireRun(name="中文运行")
        post(client, token, [run.started()])
        sub = client.post("/api/v1/subscriptions", json={"run": run.run, "channel": "email", "email": "a@example.org",
                                                         "language": "zh-CN"})
        assert sub.status_code == 201 and sub.json()["language"] == "zh-CN"
        confirm = mail_text(inbox.mails[0])
        assert "希望是您本人" in confirm and "退订" in confirm
        link = next(line for line in confirm.splitlines() if "/subscriptions/confirm?token=" in line).strip()
        client.get(link.split("testserver")[1])
        log_curve(client, token, run, loss_curve(400, seed=7, spike=(300, 5, 1.0)))
        wait(lambda: len(inbox.mails) == 2)
        mail = mail_text(inbox.mails[1])
        assert "出现损失尖峰（第 300 步）" in mail and "依据" in mail and "退订" in mail
        time.sleep(0.1)
    finally:
        smtp.stop()
