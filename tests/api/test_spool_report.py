"""``PUT /runs/{id}/segments/{segment}/spool``: the trainer says how many events wait in its local
spool; the run's detail shows them until a later report says 0. Only the run's project's token
may say it; anyone else gets exactly what an unknown run gets, and nothing changes."""

from __future__ import annotations

from typing import Any

import pytest


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def resumed(client: Any, seed: Any) -> dict[str, Any]:
    sim = seed.run("pproj", name="a").start()
    sim.log({"loss": [(s, 1.0) for s in range(1, 11)]})
    first = sim.segment
    sim.resume(5)
    sim.log({"loss": [(s, 2.0) for s in range(6, 21)]})
    other = seed.run("qproj", name="q").start()
    return {"run": sim.run, "segments": [first, sim.segment], "p": seed.token("pproj"), "q": seed.token("qproj"),
            "other": other.run, "other_segment": other.segment}


def _path(run: str, segment: str) -> str:
    return f"/api/v1/runs/{run}/segments/{segment}/spool"


def test_a_report_shows_on_the_run_until_a_report_of_zero(client, resumed):
    run, (first, second) = resumed["run"], resumed["segments"]
    answer = client.put(_path(run, second), json={"events": 47_750}, headers=_auth(resumed["p"]))
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["run"] == run and body["segment"] == 1 and body["spooled_events"] == 47_750
    detail = client.get(f"/api/v1/runs/{run}").json()  # public: anyone reading the run sees it
    assert detail["spooled_events"] == 47_750
    assert [s["spooled_events"] for s in detail["segments"]] == [0, 47_750]
    assert detail["segments"][1]["spooled_at"] == body["spooled_at"]
    client.put(_path(run, first), json={"events": 3}, headers=_auth(resumed["p"]))
    assert client.get(f"/api/v1/runs/{run}").json()["spooled_events"] == 47_753
    for segment in (first, second):
        assert client.put(_path(run, segment), json={"events": 0}, headers=_auth(resumed["p"])).status_code == 200
    assert client.get(f"/api/v1/runs/{run}").json()["spooled_events"] == 0


@pytest.mark.parametrize(("who", "status"), [("anonymous", 401), ("other project", 404), ("bad token", 401)])
def test_only_the_runs_project_reports_its_spool(client, resumed, who, status):
    headers = {"anonymous": {}, "other project": _auth(resumed["q"]), "bad token": _auth("rc_nope")}[who]
    answer = client.put(_path(resumed["run"], resumed["segments"][0]), json={"events": 9}, headers=headers)
    assert answer.status_code == status and "error" in answer.json()
    assert client.get(f"/api/v1/runs/{resumed['run']}").json()["spooled_events"] == 0


@pytest.mark.parametrize(("run", "segment"), [("unknownrun000", "seg"), ("ok", "nosuchsegment0"), ("ok", "b@d"),
                                              ("other", "other")])
def test_an_unknown_run_or_segment_is_a_404_naming_it(client, resumed, run, segment):
    run_id = {"ok": resumed["run"], "other": resumed["other"]}.get(run, run)
    seg = resumed["other_segment"] if segment == "other" else segment
    answer = client.put(_path(run_id, seg), json={"events": 1}, headers=_auth(resumed["p"]))
    assert answer.status_code == 404
    assert answer.json()["error"]["field"] in ("run", "segment")


@pytest.mark.parametrize("body", [{}, {"events": -1}, {"events": "3"}, {"events": 1.5}, {"events": True},
                                  {"events": 2**53}, {"events": 1, "extra": 2}, [1]])
def test_a_bad_report_is_a_422_naming_the_field_and_changes_nothing(client, resumed, body):
    run, segment = resumed["run"], resumed["segments"][0]
    answer = client.put(_path(run, segment), json=body, headers=_auth(resumed["p"]))
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["field"]
    assert client.get(f"/api/v1/runs/{run}").json()["spooled_events"] == 0
