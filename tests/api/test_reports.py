"""Training reports from the seats of their users: the team (a member's session, a ``team`` token)
writes a report with live blocks, edits it (each edit a version), publishes and unpublishes it;
the public reads only the published version of a public run's reports; a viewer, a ``read`` token,
a stranger and another project's token cannot write; another project's private run is not found;
script in the body is neutralised; a bad live block is refused and nothing is written."""

from __future__ import annotations

from typing import Any

import pytest

from api import test_comments
from api.test_comments import SAME, bearer, browser

world = test_comments.world  # the fixture: a public, a private and another project's run; people; tokens

API = "/api/v1"
BODY = """Loss fell steadily.

```runcast-chart keys=loss,secret from=1 to=3
```

<script>alert(1)</script> <img src=x onerror=alert(2)> [click](javascript:alert(3)) ![pic](http://evil.example/p.png)
"""


def report(**kw: Any) -> dict[str, Any]:
    return {"title": "Week 1", "body": BODY, "from_step": 1, "to_step": 3, **kw}


def create(who: Any, run: str, headers: dict[str, str], **kw: Any) -> Any:
    return who.post(f"{API}/runs/{run}/reports", json=report(**kw), headers=headers)


def test_the_team_writes_edits_and_publishes_and_the_public_reads_the_published_version(
        client: Any, world: dict[str, Any]) -> None:
    run, team = world["run"], bearer(world["tokens"]["team"])
    made = create(client, run, team)
    assert made.status_code == 201, made.text
    r = made.json()
    assert r["number"] == 1 and r["state"] == "draft" and r["version"] == 1 and r["author"] is None
    assert r["url"] == f"/runs/{run}/reports/1"
    assert r["blocks"] == [{"index": 0, "kind": "chart", "keys": ["loss", "secret"], "from": 1, "to": 3, "step": None}]
    anonymous = browser(client)
    assert anonymous.get(f"{API}/runs/{run}/reports/1").status_code == 404  # a draft is the team's
    assert anonymous.get(f"{API}/runs/{run}/reports").json()["reports"] == []
    published = client.post(f"{API}/runs/{run}/reports/1/publish", json={}, headers=team)
    assert published.status_code == 200 and published.json()["state"] == "published"
    # A member edits in the browser: a new version, which the public does not see until published.
    ada = browser(client, "ada")
    edited = ada.put(f"{API}/runs/{run}/reports/1", json=report(title="Week 1 (revised)"), headers=SAME)
    assert edited.status_code == 200, edited.text
    assert edited.json()["version"] == 2 and edited.json()["author"]["name"] == "ada"
    public = anonymous.get(f"{API}/runs/{run}/reports/1").json()
    assert public["title"] == "Week 1" and public["version"] == 1 and public["latest_version"] is None
    assert anonymous.get(f"{API}/runs/{run}/reports/1?version=2").status_code == 404
    assert [x["title"] for x in anonymous.get(f"{API}/runs/{run}/reports").json()["reports"]] == ["Week 1"]
    assert client.post(f"{API}/runs/{run}/reports/1/publish", json={}, headers=team).json()["version"] == 2
    assert anonymous.get(f"{API}/runs/{run}/reports/1").json()["title"] == "Week 1 (revised)"
    versions = client.get(f"{API}/runs/{run}/reports/1/versions", headers=team).json()["versions"]
    assert [(v["version"], v["author"] and v["author"]["name"]) for v in versions] == [(1, None), (2, "ada")]
    # Unpublished, it is gone for the public again.
    assert client.post(f"{API}/runs/{run}/reports/1/unpublish", headers=team).json()["state"] == "draft"
    assert anonymous.get(f"{API}/runs/{run}/reports/1").status_code == 404


def test_script_in_the_body_is_neutralised(client: Any, world: dict[str, Any]) -> None:
    run, team = world["run"], bearer(world["tokens"]["team"])
    create(client, run, team)
    html = client.post(f"{API}/runs/{run}/reports/1/publish", json={}, headers=team).json()["html"]
    assert "<script" not in html and "<img" not in html and 'href="javascript' not in html  # all shown as text
    assert "&lt;script&gt;alert(1)" in html and "&lt;img src=x onerror=alert(2)&gt;" in html
    assert '<div class="runcast-block" data-index="0" data-block="chart"' in html
    assert 'href="http://evil.example/p.png"' in html  # an image becomes a link, never fetched


@pytest.mark.parametrize("who", ["viewer", "stranger", "read", "other", "anonymous"])
def test_only_the_team_writes(client: Any, world: dict[str, Any], who: str) -> None:
    run = world["run"]
    seat = {"viewer": (browser(client, "vic"), SAME), "stranger": (browser(client, "zed"), SAME),
            "read": (client, bearer(world["tokens"]["read"])), "other": (client, bearer(world["tokens"]["qq"])),
            "anonymous": (browser(client), SAME)}[who]
    res = create(seat[0], run, seat[1])
    assert res.status_code == (401 if who == "anonymous" else 403), res.text
    assert res.json()["error"]["field"] in ("Authorization", "runcast_session")
    team = bearer(world["tokens"]["team"])
    assert client.get(f"{API}/runs/{run}/reports", headers=team).json()["reports"] == []
    assert seat[0].get(f"{API}/runs/{run}/report-draft?from_step=1&to_step=3", headers=seat[1]).status_code in (401, 403)


def test_a_cross_site_write_is_refused(client: Any, world: dict[str, Any]) -> None:
    ada = browser(client, "ada")
    res = ada.post(f"{API}/runs/{world['run']}/reports", json=report(), headers={"Sec-Fetch-Site": "cross-site"})
    assert res.status_code == 403 and res.json()["error"]["field"] == "Origin"


def test_another_projects_private_run_is_not_found(client: Any, world: dict[str, Any]) -> None:
    pp_team = bearer(world["tokens"]["team"])
    res = create(client, world["theirs"], pp_team)
    assert res.status_code == 404 and res.json()["error"]["field"] == "run"
    # Their own private run's reports: the team reads them, nobody else does.
    assert create(client, world["private"], pp_team).status_code == 201
    client.post(f"{API}/runs/{world['private']}/reports/1/publish", json={}, headers=pp_team)
    for who, headers in ((browser(client), {}), (client, bearer(world["tokens"]["qq"]))):
        assert who.get(f"{API}/runs/{world['private']}/reports", headers=headers).status_code == 404
        assert who.get(f"{API}/runs/{world['private']}/reports/1/export.html", headers=headers).status_code == 404


@pytest.mark.parametrize("body, to_step, field", [
    ("```runcast-chart from=1\n```", 3, "body"), ("```runcast-planet\n```", 3, "body"),
    ("```runcast-chart keys=loss from=x\n```", 3, "body"), ("```runcast-checkpoint\n```", 3, "body"),
    ("fine", 0, "to_step"),
])
def test_a_bad_report_is_refused_and_nothing_is_written(client: Any, world: dict[str, Any], body: str, to_step: int,
                                                         field: str) -> None:
    team = bearer(world["tokens"]["team"])
    res = create(client, world["run"], team, body=body, to_step=to_step)
    assert res.status_code == 422 and res.json()["error"]["field"] == field, res.text
    assert client.get(f"{API}/runs/{world['run']}/reports", headers=team).json()["reports"] == []


def test_the_blocks_data_follow_the_policy(client: Any, world: dict[str, Any]) -> None:
    run, team = world["run"], bearer(world["tokens"]["team"])
    create(client, run, team)
    client.post(f"{API}/runs/{run}/reports/1/publish", json={}, headers=team)
    assert client.put(f"{API}/runs/{run}/policy", json={"metrics": ["loss"]}, headers=team).status_code == 200
    public = browser(client).get(f"{API}/runs/{run}/reports/1/data").json()["blocks"][0]
    assert public["series"] == {"loss": {"step": [1, 2, 3], "value": [2.0, 1.5, 1.2]}}
    page = browser(client).get(f"{API}/runs/{run}/reports/1").json()
    assert "secret" not in page["html"] and page["blocks"][0]["keys"] == ["loss"] and page["body"] is None
    mine = client.get(f"{API}/runs/{run}/reports/1/data", headers=team).json()["blocks"][0]
    assert set(mine["series"]) == {"loss", "secret"}
    exported = client.get(f"{API}/runs/{run}/reports/1/export.html", headers=team)
    assert exported.status_code == 200 and "attachment" in exported.headers["content-disposition"]
    assert '"secret"' not in exported.text.split('id="runcast-report-data"')[1].split("</script>")[0]
    assert "<script>alert(1)" not in exported.text


def test_each_publication_is_an_entry_of_the_runs_atom_feed(client: Any, world: dict[str, Any]) -> None:
    from xml.etree import ElementTree as ET

    run, team = world["run"], bearer(world["tokens"]["team"])
    create(client, run, team, title="Week 1")
    create(client, run, team, title="Week 2 (a draft)")
    client.post(f"{API}/runs/{run}/reports/1/publish", json={}, headers=team)
    feed = ET.fromstring(browser(client).get(f"{API}/runs/{run}/alerts.atom").content)
    ns = {"a": "http://www.w3.org/2005/Atom"}
    entries = [(e.findtext("a:title", namespaces=ns), e.find("a:link", ns).get("href"))  # type: ignore[union-attr]
               for e in feed.findall("a:entry", ns)]
    assert entries == [("Report: Week 1", f"http://testserver/runs/{run}/reports/1")]
    zh = browser(client).get(f"{API}/runs/{run}/alerts.atom", headers={"Accept-Language": "zh-CN"}).text
    assert "训练报告：Week 1" in zh
    # The private run's reports are in no feed anyone else reads.
    assert create(client, world["private"], team).status_code == 201
    client.post(f"{API}/runs/{world['private']}/reports/1/publish", json={}, headers=team)
    assert browser(client).get(f"{API}/runs/{world['private']}/alerts.atom").status_code == 404


def test_comments_on_a_report_follow_its_publication(client: Any, world: dict[str, Any]) -> None:
    run, team = world["run"], bearer(world["tokens"]["team"])
    create(client, run, team)
    zed, anonymous = browser(client, "zed"), browser(client)
    on_report = {"kind": "report", "id": 1}
    refused = zed.post(f"{API}/runs/{run}/comments", json={"body": "?", "anchor": on_report}, headers=SAME)
    assert refused.status_code == 404 and refused.json()["error"]["field"] == "anchor.id"  # a draft: nobody else sees it
    client.post(f"{API}/runs/{run}/reports/1/publish", json={}, headers=team)
    made = zed.post(f"{API}/runs/{run}/comments", json={"body": "Why the cut?", "anchor": on_report}, headers=SAME)
    assert made.status_code == 201, made.text
    assert made.json()["anchor"] == {"kind": "report", "key": None, "id": 1, "step": None}
    assert zed.post(f"{API}/runs/{run}/comments", json={"body": "?", "anchor": {"kind": "report", "id": 9}},
                    headers=SAME).status_code == 404
    assert [c["anchor"]["kind"] for c in anonymous.get(f"{API}/runs/{run}/comments").json()["comments"]] == ["report"]
    client.post(f"{API}/runs/{run}/reports/1/unpublish", headers=team)
    assert anonymous.get(f"{API}/runs/{run}/comments").json()["comments"] == []
    assert len(client.get(f"{API}/runs/{run}/comments", headers=team).json()["comments"]) == 1


def test_deleting_the_run_deletes_its_reports_and_their_versions(client: Any, world: dict[str, Any], db: Any) -> None:
    from sqlalchemy import text

    run, team = world["run"], bearer(world["tokens"]["team"])
    create(client, run, team)
    client.put(f"{API}/runs/{run}/reports/1", json=report(title="v2"), headers=team)
    create(client, world["private"], team)  # another run's report stays
    assert client.delete(f"{API}/runs/{run}", headers=team).status_code in (200, 204)
    with db.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM reports")).scalar() == 1
        assert conn.execute(text("SELECT count(*) FROM report_versions")).scalar() == 1
