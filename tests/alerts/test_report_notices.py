"""Report notices from the subscribers' seat: a real webhook receiver on a loopback port and a
real SMTP sink get one notice when the team publishes a report (not for each new version),
signed like the alerts; subscriptions made before (or without ``notices``) keep getting
alerts only; a delayed run's notice waits until the report is public, and one unpublished
before then sends nothing; a private run's project-wide subscribers and another project's
subscribers get nothing."""

from __future__ import annotations

import json
import time
from typing import Any

from standardwebhooks import Webhook

from alerts.helpers import Receiver, WireRun, post, wait
from alerts.test_embedded import mail_text

API = "/api/v1"
BODY = "Loss fell <b>steadily</b>; we cut the LR at step 3.\n\n```runcast-chart keys=loss from=1 to=3\n```\n"


def token_for(client: Any, project: str, scopes: tuple[str, ...]) -> str:
    from runcast_server.core.auth import create_token

    with client.app.state.context.database.scope() as s:
        return create_token(s, project, label="+".join(scopes), scopes=scopes)


def team_token(client: Any, project: str = "demo") -> dict[str, str]:
    return {"Authorization": f"Bearer {token_for(client, project, ('team',))}"}


def started(client: Any, token: str, project: str = "demo", **fields: Any) -> WireRun:
    run = WireRun(project=project)
    post(client, token, [run.started(**fields), run.metrics(1, loss=2.0), run.metrics(2, loss=1.5),
                         run.metrics(3, loss=1.2)])
    return run


def subscribe(client: Any, headers: dict[str, str] | None = None, **body: Any) -> Any:
    r = client.post(f"{API}/subscriptions", json={"channel": "webhook", **body}, headers=headers or {})
    assert r.status_code == 201, r.text
    return r.json()


def write(client: Any, run: str, team: dict[str, str], title: str = "Week 1") -> int:
    r = client.post(f"{API}/runs/{run}/reports", headers=team,
                    json={"title": title, "body": BODY, "from_step": 1, "to_step": 3})
    assert r.status_code == 201, r.text
    return int(r.json()["number"])


def publish(client: Any, run: str, team: dict[str, str], number: int) -> dict[str, Any]:
    r = client.post(f"{API}/runs/{run}/reports/{number}/publish", headers=team, json={})
    assert r.status_code == 200, r.text
    return dict(r.json())


def test_a_published_report_is_sent_once_signed_to_those_who_asked(make_client):
    client, token = make_client()
    team = team_token(client)
    run = started(client, token)
    wants, alerts_only, project_wide, slack, theirs = Receiver(), Receiver(), Receiver(), Receiver(), Receiver()
    try:
        sub = subscribe(client, run=run.run, url=wants.url, notices=["alerts", "reports"])
        assert sub["notices"] == ["alerts", "reports"]
        old = subscribe(client, run=run.run, url=alerts_only.url)  # as every subscription made before notices
        assert old["notices"] == ["alerts"]
        subscribe(client, project="demo", url=project_wide.url, notices=["reports"])
        subscribe(client, run=run.run, url=slack.url, format="slack", notices=["reports"])
        other = started(client, token_for(client, "elsewhere", ("read", "ingest")), project="elsewhere")
        subscribe(client, run=other.run, url=theirs.url, notices=["reports"])
        subscribe(client, project="elsewhere", url=theirs.url, notices=["reports"])

        number = write(client, run.run, team, title="Week 1 <!channel>")
        out = publish(client, run.run, team, number)
        wait(lambda: wants.requests and project_wide.requests and slack.requests)
        req = wants.requests[0]
        body = Webhook(sub["secret"]).verify(req["body"], req["headers"])  # Standard Webhooks, like the alerts
        assert req["headers"]["X-Runcast-Event"] == body["event"] == "report.published"
        report = body["report"]
        assert (report["run"], report["number"], report["title"]) == (run.run, number, "Week 1 <!channel>")
        assert report["url"] == f"http://testserver/runs/{run.run}/reports/{number}"
        assert report["summary"] == "Loss fell <b>steadily</b>; we cut the LR at step 3."  # text, as the public reads it
        assert report["published_at"] == out["published_at"] and report["project"] == "demo"
        assert body["unsubscribe_url"] == sub["unsubscribe_url"] and "Week 1" in body["text"]
        assert project_wide.json(0)["report"]["number"] == number
        assert "&lt;!channel&gt;" in slack.json(0)["text"] and "<!channel>" not in slack.json(0)["text"]

        # A new version published, or the report published again after an unpublish: no second notice.
        client.put(f"{API}/runs/{run.run}/reports/{number}", headers=team,
                   json={"title": "Week 1 (fixed)", "body": BODY, "from_step": 1, "to_step": 3})
        publish(client, run.run, team, number)
        client.post(f"{API}/runs/{run.run}/reports/{number}/unpublish", headers=team)
        publish(client, run.run, team, number)
        second = publish(client, run.run, team, write(client, run.run, team, title="Week 2"))
        wait(lambda: len(wants.requests) == 2)
        time.sleep(1.0)
        assert [json.loads(r["body"])["report"]["title"] for r in wants.requests] == ["Week 1 <!channel>", "Week 2"]
        assert len(project_wide.requests) == 2 and second["number"] == 2
        assert alerts_only.requests == [] and theirs.requests == []
        # Another project's report reaches its own subscribers only.
        theirs_team = team_token(client, "elsewhere")
        publish(client, other.run, theirs_team, write(client, other.run, theirs_team))
        wait(lambda: len(theirs.requests) == 2)
        time.sleep(0.5)
        assert len(wants.requests) == 2 and len(project_wide.requests) == 2
    finally:
        for r in (wants, alerts_only, project_wide, slack, theirs):
            r.close()


def test_a_delayed_runs_notice_waits_until_the_report_is_public(make_client):
    client, token = make_client()
    team = team_token(client)
    run = started(client, token)
    assert client.put(f"{API}/runs/{run.run}/policy", json={"delay_s": 2}, headers=team).status_code == 200
    rec = Receiver()
    try:
        subscribe(client, run=run.run, url=rec.url, notices=["reports"])
        out = publish(client, run.run, team, write(client, run.run, team))
        time.sleep(1.0)
        assert rec.requests == []  # not before the broadcast delay has passed
        wait(lambda: rec.requests, timeout=10)
        assert rec.arrived[0] >= out["published_at"] + 2
        # Unpublished before it was public: nothing, even after the delay.
        withdrawn = write(client, run.run, team, title="Too early")
        publish(client, run.run, team, withdrawn)
        client.post(f"{API}/runs/{run.run}/reports/{withdrawn}/unpublish", headers=team)
        time.sleep(3.5)
        assert len(rec.requests) == 1
        # Published again later: it waits its own delay, then goes out once.
        again = publish(client, run.run, team, withdrawn)
        wait(lambda: len(rec.requests) == 2, timeout=10)
        assert rec.arrived[1] >= again["published_at"] + 2 and rec.json(1)["report"]["title"] == "Too early"
    finally:
        rec.close()


def test_a_private_runs_report_reaches_only_its_own_subscribers(make_client):
    client, token = make_client()
    team = team_token(client)
    run = started(client, token, visibility="private")
    inside, project_wide = Receiver(), Receiver()
    try:
        refused = client.post(f"{API}/subscriptions", json={"run": run.run, "channel": "webhook", "url": inside.url,
                                                             "notices": ["reports"]})
        assert refused.status_code == 404  # a stranger cannot subscribe to it
        subscribe(client, {"Authorization": f"Bearer {token}"}, run=run.run, url=inside.url, notices=["reports"])
        subscribe(client, project="demo", url=project_wide.url, notices=["reports"])
        publish(client, run.run, team, write(client, run.run, team))
        wait(lambda: inside.requests)
        time.sleep(1.0)
        assert project_wide.requests == []
    finally:
        inside.close()
        project_wide.close()


def test_bad_notices_are_refused_naming_the_field_and_nothing_is_written(make_client):
    client, token = make_client()
    run = started(client, token)
    for bad in (["planet"], [], "reports", ["reports"] * 3):
        r = client.post(f"{API}/subscriptions", json={"run": run.run, "channel": "webhook",
                                                       "url": "http://127.0.0.1:9/", "notices": bad})
        assert r.status_code == 422 and "notices" in r.text, r.text
    from runcast_server.alerts.models import Subscription

    with client.app.state.context.database.scope() as s:
        assert s.query(Subscription).count() == 0


def test_email_notice_with_an_unsubscribe_link(make_client):
    from aiosmtpd.controller import Controller
    from services import free_port

    class Inbox:
        def __init__(self) -> None:
            self.mails: list[Any] = []

        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
            self.mails.append(envelope)
            return "250 OK"

    inbox, port = Inbox(), free_port()
    smtp = Controller(inbox, hostname="127.0.0.1", port=port)
    smtp.start()
    try:
        client, token = make_client(RUNCAST_SMTP_HOST="127.0.0.1", RUNCAST_SMTP_PORT=str(port))
        team = team_token(client)
        run = started(client, token)
        sub = client.post(f"{API}/subscriptions", json={"run": run.run, "channel": "email", "email": "a@example.org",
                                                        "notices": ["reports"], "language": "zh-CN"}).json()
        link = next(line for line in mail_text(inbox.mails[0]).splitlines() if "/subscriptions/confirm?token=" in line)
        number = write(client, run.run, team)
        publish(client, run.run, team, number)
        time.sleep(1.0)
        assert len(inbox.mails) == 1  # nothing before confirmation
        assert client.get(link.strip().split("testserver")[1]).json()["status"] == "active"
        publish(client, run.run, team, write(client, run.run, team, title="Week 2"))
        wait(lambda: len(inbox.mails) == 2)
        mail = mail_text(inbox.mails[1])
        assert "第 2 期报告：Week 2" in mail and "Loss fell <b>steadily</b>" in mail
        assert f"/runs/{run.run}/reports/2" in mail and sub["unsubscribe_url"] in mail
    finally:
        smtp.stop()
