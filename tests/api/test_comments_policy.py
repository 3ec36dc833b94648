"""The publication policy holds on comments: a withheld metric cannot be commented on by outsiders
and the team's comments on it are hidden from them; a delayed run's comments on a step not yet
public are not shown publicly, and an outsider cannot anchor there."""

from __future__ import annotations

from typing import Any

from runcast_server.people import service as people
from sqlalchemy import text

from api.test_comments import PASSWORD, bearer, browser, post, step

API = "/api/v1"


def _setup(client: Any, seed: Any, db: Any) -> tuple[Any, str]:
    sim = seed.run("pp", name="open").start()
    token = seed.token("pp")
    with db.scope() as session:
        people.create_user(session, "zed", display_name="Zed", password=PASSWORD)
    return sim, token


def test_a_withheld_metric_takes_its_comments_out_of_public_view(client: Any, seed: Any, db: Any) -> None:
    sim, token = _setup(client, seed, db)
    sim.log({"loss": [(1, 2.0)], "secret": [(1, 9.0)]})
    team = client.post(f"{API}/runs/{sim.run}/comments", json={"body": "on secret", "anchor": step("secret", 1)},
                       headers=bearer(token))
    assert team.status_code == 201
    zed = browser(client, "zed")
    assert post(zed, sim.run, "on secret too", anchor=step("secret", 1)).status_code == 201  # still public
    res = client.put(f"{API}/runs/{sim.run}/policy", json={"metrics": ["loss"]}, headers=bearer(token))
    assert res.status_code == 200, res.text
    refused = post(zed, sim.run, "again", anchor=step("secret", 1))
    assert refused.status_code == 404 and refused.json()["error"]["field"] == "key"
    assert post(zed, sim.run, "on loss", anchor=step("loss", 1)).status_code == 201
    public = [c["anchor"]["key"] for c in zed.get(f"{API}/runs/{sim.run}/comments").json()["comments"]]
    assert public == ["loss"]
    assert len(client.get(f"{API}/runs/{sim.run}/comments", headers=bearer(token)).json()["comments"]) == 3


def test_a_delayed_runs_comments_wait_for_their_step(client: Any, seed: Any, db: Any) -> None:
    sim, token = _setup(client, seed, db)
    sim.log({"loss": [(1, 2.0), (2, 1.8)]})
    with db.engine.begin() as conn:  # those batches were stored two hours ago
        conn.execute(text("UPDATE run_versions SET committed_at = committed_at - 7200"))
    sim.log({"loss": [(3, 1.5), (4, 1.4)]})
    assert client.put(f"{API}/runs/{sim.run}/policy", json={"delay_s": 3600},
                      headers=bearer(token)).status_code == 200
    early = client.post(f"{API}/runs/{sim.run}/comments", json={"body": "early", "anchor": step("loss", 2)},
                        headers=bearer(token)).json()
    late = client.post(f"{API}/runs/{sim.run}/comments", json={"body": "late", "anchor": step("loss", 4)},
                       headers=bearer(token)).json()
    zed = browser(client, "zed")
    assert [c["id"] for c in zed.get(f"{API}/runs/{sim.run}/comments").json()["comments"]] == [early["id"]]
    refused = post(zed, sim.run, "what happens at 4?", anchor=step("loss", 4))
    assert refused.status_code == 404 and refused.json()["error"]["field"] == "anchor.step"
    assert post(zed, sim.run, "reply to the future", parent=late["id"]).status_code == 404
    assert post(zed, sim.run, "at 2", anchor=step("loss", 2)).status_code == 201
    ids = [c["id"] for c in client.get(f"{API}/runs/{sim.run}/comments", headers=bearer(token)).json()["comments"]]
    assert late["id"] in ids
