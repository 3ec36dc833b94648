"""A report's draft from the period's record: the loss's change, alerts, checkpoints, evaluations,
data-mix changes, resumes and the team's notes, each a line; what the run's policy withholds never
appears in the public draft, and a delayed run's draft stops where its public record stops."""

from __future__ import annotations

from typing import Any

from sqlalchemy import text

API = "/api/v1"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def draft(client: Any, run: str, token: str, start: int, end: int, audience: str = "public") -> str:
    res = client.get(f"{API}/runs/{run}/report-draft", params={"from_step": start, "to_step": end,
                                                               "audience": audience}, headers=bearer(token))
    assert res.status_code == 200, res.text
    return str(res.json()["body"])


def test_a_draft_tells_the_periods_record(client: Any, seed: Any) -> None:
    sim = seed.run("pp", name="lm").start()
    sim.log({"train/loss": [(s, 3.0 - s / 10) for s in range(1, 11)]})
    sim.send([sim.event("checkpoint", step=5, path="/ck/5", size=10, public=True),
              sim.evaluation(5, "hellaswag", {"acc": 0.41}),
              sim.event("data_mix", step=6, weights={"web": 0.7, "code": 0.3}),
              sim.event("note", step=7, text="lowered the learning rate")])
    sim.resume(8)
    sim.log({"train/loss": [(9, 2.05)]})
    body = draft(client, sim.run, seed.token("pp"), 2, 9)
    assert "`train/loss`: 2.8 at step 2 -> 2.05 at step 9" in body and "lowest 2.05 at step 9" in body
    assert "```runcast-chart keys=train/loss from=2 to=9" in body
    assert "- step 5" in body and "```runcast-checkpoint step=5" in body
    assert "hellaswag: acc 0.41" in body and "```runcast-evals from=2 to=9" in body
    assert "data mix: code 0.3, web 0.7" in body
    assert "resumed at step 8 (segment 1)" in body
    # The draft is a valid report body: published as is, its blocks draw.
    made = client.post(f"{API}/runs/{sim.run}/reports", json={"title": "t", "body": body, "from_step": 2, "to_step": 9},
                       headers=bearer(seed.token("pp")))
    assert made.status_code == 201, made.text
    assert [b["kind"] for b in made.json()["blocks"]] == ["chart", "checkpoint", "evals", "changes"]
    # Outside the period, nothing of it.
    assert "data mix" not in draft(client, sim.run, seed.token("pp"), 8, 9)


def test_withheld_kinds_stay_out_of_the_public_draft(client: Any, seed: Any) -> None:
    sim = seed.run("pp", name="lm").start()
    token = seed.token("pp")
    sim.log({"loss": [(1, 2.0), (2, 1.5)], "secret/loss": [(1, 9.0)]})
    sim.send([sim.event("data_mix", step=2, weights={"web": 1.0}), sim.evaluation(2, "mmlu", {"acc": 0.3}),
              sim.event("note", step=2, text="private thoughts")])
    res = client.put(f"{API}/runs/{sim.run}/policy", json={"metrics": ["loss"], "data_mix": "hidden", "evals": "hidden",
                                                                 "notes": "hidden"},
                     headers=bearer(token))
    assert res.status_code == 200, res.text
    public = draft(client, sim.run, token, 0, 10)
    assert "secret" not in public and "data mix" not in public and "mmlu" not in public
    assert "private thoughts" not in public and "`loss`" in public
    team = draft(client, sim.run, token, 0, 10, audience="team")
    assert "data mix: web 1" in team and "mmlu" in team and "private thoughts" in team


def test_a_delayed_runs_public_draft_stops_where_its_public_record_stops(client: Any, seed: Any, db: Any) -> None:
    sim = seed.run("pp", name="lm").start()
    token = seed.token("pp")
    sim.log({"loss": [(1, 2.0), (2, 1.8)]})
    with db.engine.begin() as conn:  # those batches were stored two hours ago
        conn.execute(text("UPDATE run_versions SET committed_at = committed_at - 7200"))
    sim.log({"loss": [(3, 1.5), (4, 0.9)]})
    sim.send([sim.event("data_mix", step=4, weights={"web": 0.5, "math": 0.5})])
    assert client.put(f"{API}/runs/{sim.run}/policy", json={"delay_s": 3600}, headers=bearer(token)).status_code == 200
    public = draft(client, sim.run, token, 0, 10)
    assert "1.8 at step 2" in public and "0.9" not in public and "math" not in public
    assert "0.9 at step 4" in draft(client, sim.run, token, 0, 10, audience="team")


def test_a_delayed_runs_report_blocks_stop_where_its_public_record_stops(client: Any, seed: Any, db: Any) -> None:
    sim = seed.run("pp", name="lm").start()
    token = seed.token("pp")
    sim.log({"loss": [(1, 2.0), (2, 1.8)]})
    with db.engine.begin() as conn:
        conn.execute(text("UPDATE run_versions SET committed_at = committed_at - 7200"))
    sim.log({"loss": [(3, 1.5), (4, 0.9)]})
    sim.send([sim.event("data_mix", step=4, weights={"web": 0.5, "math": 0.5})])
    assert client.put(f"{API}/runs/{sim.run}/policy", json={"delay_s": 3600}, headers=bearer(token)).status_code == 200
    body = "```runcast-chart keys=loss\n```\n\n```runcast-changes from=0 to=10\n```\n"
    api = f"{API}/runs/{sim.run}/reports"
    assert client.post(api, json={"title": "t", "body": body, "from_step": 0, "to_step": 10},
                       headers=bearer(token)).status_code == 201
    client.post(f"{api}/1/publish", json={}, headers=bearer(token))
    chart, changes = client.get(f"{api}/1/data").json()["blocks"]
    assert chart["series"]["loss"]["step"] == [1, 2] and changes["rows"] == []
    exported = client.get(f"{api}/1/export.html").text
    assert "0.9" not in exported.split('id="runcast-report-data"')[1].split("</script>")[0]
    team_chart, team_changes = client.get(f"{api}/1/data", headers=bearer(token)).json()["blocks"]
    assert team_chart["series"]["loss"]["step"] == [1, 2, 3, 4] and "math" in team_changes["rows"][0]["text"]
