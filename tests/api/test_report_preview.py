"""The editor's live preview (``POST /runs/{id}/report-preview``, docs/reports.md): the team's
unsaved Markdown rendered by the server's own renderer and sanitizer, exactly as the saved report
is, with its blocks' data; nobody else may use it (a viewer, a stranger, a ``read`` token, another
project's token, a cross-site page); a bad block is refused naming ``body``; nothing is written."""

from __future__ import annotations

from typing import Any

from api import test_comments
from api.test_comments import SAME, bearer, browser

world = test_comments.world

API = "/api/v1"
HOSTILE = """Plan.

```runcast-chart keys=loss from=1 to=3
```

<script>alert(1)</script> [x](javascript:alert(2)) ![p](http://evil.example/p.png)
<svg onload="alert(3)"><circle r="4"/></svg>
"""


def test_the_preview_is_the_saved_reports_html_with_its_data(client: Any, world: dict[str, Any]) -> None:
    run, team = world["run"], bearer(world["tokens"]["team"])
    preview = client.post(f"{API}/runs/{run}/report-preview", json={"body": HOSTILE}, headers=team)
    assert preview.status_code == 200, preview.text
    made = client.post(f"{API}/runs/{run}/reports", json={"title": "T", "body": HOSTILE, "from_step": 1,
                                                           "to_step": 3}, headers=team).json()
    assert preview.json()["html"] == made["html"]  # one renderer, one sanitizer
    html = preview.json()["html"]
    assert not any(tag in html for tag in ("<script", "<svg", "<img", 'href="javascript'))  # all shown as text
    assert "&lt;script&gt;" in html and "&lt;svg onload" in html
    [block] = preview.json()["blocks"]
    assert block["kind"] == "chart" and block["series"]["loss"] == {"step": [1, 2, 3], "value": [2.0, 1.5, 1.2]}
    # A signed-in member previews from this site's pages; nothing was written by any preview.
    ada = browser(client, "ada")
    assert ada.post(f"{API}/runs/{run}/report-preview", json={"body": "**hi**"}, headers=SAME).status_code == 200
    listed = client.get(f"{API}/runs/{run}/reports", headers=team).json()["reports"]
    assert [r["number"] for r in listed] == [1]


def test_only_the_team_previews_and_a_bad_block_is_refused(client: Any, world: dict[str, Any]) -> None:
    run, tokens = world["run"], world["tokens"]
    url = f"{API}/runs/{run}/report-preview"
    body = {"body": "words"}
    assert browser(client).post(url, json=body, headers=SAME).status_code == 401
    for name in ("vic", "zed"):  # a viewer, a stranger
        res = browser(client, name).post(url, json=body, headers=SAME)
        assert res.status_code == 403 and res.json()["error"]["field"] == "runcast_session", res.text
    res = client.post(url, json=body, headers=bearer(tokens["read"]))
    assert res.status_code == 403 and res.json()["error"]["field"] == "Authorization"
    assert client.post(url, json=body, headers=bearer(tokens["qq"])).status_code == 403
    assert client.post(f"{API}/runs/{world['theirs']}/report-preview", json=body,
                       headers=bearer(tokens["team"])).status_code == 404
    # A member's session from another site's page: refused (cross-site request forgery).
    res = browser(client, "ada").post(url, json=body, headers={"Sec-Fetch-Site": "cross-site"})
    assert res.status_code == 403 and res.json()["error"]["field"] == "Origin"
    res = client.post(url, json={"body": "```runcast-chart keys=loss from=x\n```\n"}, headers=bearer(tokens["team"]))
    assert res.status_code == 422 and res.json()["error"]["field"] == "body"
    res = client.post(url, json={"body": ""}, headers=bearer(tokens["team"]))
    assert res.status_code == 422 and "body" in res.json()["error"]["field"]


def test_the_preview_shows_what_the_public_will_see_of_the_published_report(client: Any, world: dict[str, Any]) -> None:
    """The run publishes ``loss`` only: the team's preview of a chart of ``loss`` and ``secret`` holds
    what an anonymous reader of the published report gets (no ``secret``), not the team's view."""
    run, team = world["run"], bearer(world["tokens"]["team"])
    policy = client.put(f"{API}/runs/{run}/policy", json={"metrics": ["loss"]}, headers=team)
    assert policy.status_code == 200, policy.text
    body = "Both curves.\n\n```runcast-chart keys=loss,secret from=1 to=3\n```\n"
    preview = client.post(f"{API}/runs/{run}/report-preview", json={"body": body}, headers=team)
    assert preview.status_code == 200, preview.text
    [block] = preview.json()["blocks"]
    assert set(block["series"]) == {"loss"}
    made = client.post(f"{API}/runs/{run}/reports", json={"title": "T", "body": body, "from_step": 1, "to_step": 3},
                       headers=team).json()
    assert client.post(f"{API}/runs/{run}/reports/{made['number']}/publish", json={}, headers=team).status_code == 200
    public = browser(client)
    assert public.get(f"{API}/runs/{run}/reports/{made['number']}/data").json()["blocks"] == preview.json()["blocks"]
    assert public.get(f"{API}/runs/{run}/reports/{made['number']}").json()["html"] == preview.json()["html"]
    # The team's own read of the published report still has everything (its reads are the team's).
    team_blocks = client.get(f"{API}/runs/{run}/reports/{made['number']}/data", headers=team).json()["blocks"]
    assert set(team_blocks[0]["series"]) == {"loss", "secret"}
