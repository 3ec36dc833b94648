"""``runcast eval import``: results files of lm-evaluation-harness (written by the harness itself, 0.4.4
and 0.4.13, and by hand after 0.3.0 and 0.4.0: data/lm_eval/README.md) as a run's evaluations."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from outputs_core import needs_outputs_core
from runcast.wire import events
from runcast.cli.eval_cmd import stored_run, summary
from runcast.importers import ImportFailed, send
from runcast.importers.eval_plan import BLOCK, EvalPlan, EvalRequest, eval_segment, plan_evals
from runcast.importers.lm_eval_results import SUITE, read

from importers.conftest import AppTransport
from importers.tools import runcast_cli

DATA = Path(__file__).parent / "data" / "lm_eval"
T0 = 1_700_000_000


def harness(name: str) -> dict[str, Any]:
    return json.loads((DATA / name).read_text())


def expected_rows(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any], int | None]]:
    """(task, metrics, n) as the contract reads a results file: every number of each row but the bookkeeping."""
    rows = {**doc["results"], **{k: v for k, v in doc.get("groups", {}).items() if k not in doc["results"]}}
    out = []
    for task, row in rows.items():
        metrics = {k: v for k, v in row.items() if k not in ("alias", "name", "sample_len", "sample_count")
                   and isinstance(v, (int, float)) and not isinstance(v, bool)}
        n = doc.get("n-samples", {}).get(task, {}).get("effective", row.get("sample_len"))
        out.append((task, metrics, n))
    return out


def a_run(hub, tmp_path: Path, *, steps: int = 10) -> str:
    log = tmp_path / "train.jsonl"
    log.write_text("".join(json.dumps({"step": s, "loss": 1.0 / (s + 1), "timestamp": T0 + s}) + "\n" for s in range(steps)))
    (plan,) = hub.load([log])
    return plan.run_id


def import_evals(hub, path: Path, run_id: str, request: EvalRequest) -> tuple[EvalPlan, AppTransport]:
    """What ``runcast eval import`` does, against the embedded app: read, ask for the run, plan, send."""
    found = read(path)
    plan = plan_evals(found, path.read_bytes(), stored_run(hub.run(run_id)), request)
    transport = AppTransport(hub.client, hub.token())
    send([plan], transport, sleep=lambda s: None)
    return plan, transport


@pytest.mark.parametrize("name", ["0.3.0.json", "0.4.0.json", "0.4.4-group.json", "0.4.13-group.json", "0.4.13-limit1.json"])
def test_every_row_with_its_numbers_as_the_harness_wrote_them(name):
    doc = harness(name)
    found = read(DATA / name)
    assert [(t.task, t.metrics, t.n) for t in found.tasks] == expected_rows(doc)
    for task in found.tasks:
        assert task.versions.get("task") == doc["versions"].get(task.task)
        assert task.config.get("run") == doc["config"]
        assert task.config.get("task") == doc.get("configs", {}).get(task.task)
        assert task.left_out == tuple(k for k, v in {**doc["results"], **doc.get("groups", {})}[task.task].items()
                                      if v == "N/A")


def test_what_each_evaluation_carries_of_a_recent_harness():
    doc = harness("0.4.13-group.json")
    tasks = {t.task: t for t in read(DATA / "0.4.13-group.json").tasks}
    assert list(tasks) == ["tiny_mc", "tiny_gen", "tiny_suite"]
    mc = tasks["tiny_mc"]
    assert mc.metrics == {"acc,none": 0.4, "acc_stderr,none": 0.24494897427831783, "acc_norm,none": 0.2,
                          "acc_norm_stderr,none": 0.2}
    assert mc.n == 5
    assert mc.versions == {"task": 1.0, "lm_eval": "0.4.13", "date": doc["date"], "transformers": "5.25.0"}
    assert mc.config == {"task": doc["configs"]["tiny_mc"], "run": doc["config"], "n-shot": 0,
                         "higher_is_better": {"acc": True, "acc_norm": True}, "n-samples": {"original": 5, "effective": 5}}
    suite = tasks["tiny_suite"]  # a group: its aggregate, its subtasks, the documents of its row
    assert suite.metrics == {"acc,none": 0.4, "acc_stderr,none": 0.24494897427831783} and suite.n == 8
    assert suite.config["group_subtasks"] == ["tiny_mc", "tiny_gen"] and "task" not in suite.config
    assert suite.versions["task"] == "1.0"


def test_na_stderrs_are_left_out_and_said():
    found = read(DATA / "0.4.13-limit1.json")
    assert [(t.task, t.metrics, t.left_out) for t in found.tasks] == [
        ("tiny_mc", {"acc,none": 0.0, "acc_norm,none": 0.0}, ("acc_stderr,none", "acc_norm_stderr,none")),
        ("tiny_gen", {"exact_match,none": 0.0}, ("exact_match_stderr,none",)),
    ]
    line = summary(found, 3, EvalRequest(suite=SUITE, checkpoint=3)).splitlines()
    assert line[1] == "left out (not numbers): tiny_mc acc_stderr,none, tiny_mc acc_norm_stderr,none, tiny_gen exact_match_stderr,none"


def test_a_large_task_config_is_clipped_to_fit_and_nan_kept(tmp_path):
    doc = harness("0.4.13-group.json")
    doc["configs"]["tiny_mc"]["description"] = "x" * 200_000
    doc["results"]["tiny_mc"]["acc,none"] = math.nan
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    mc = read(path).tasks[0]
    assert mc.metrics["acc,none"] == "NaN"
    description = mc.config["task"]["description"]
    assert description == "x" * 4095 + "…"
    assert len(json.dumps(mc.config, separators=(",", ":")).encode()) <= 64 * 1024
    assert mc.config["task"]["doc_to_text"] == doc["configs"]["tiny_mc"]["doc_to_text"]  # short texts whole


@pytest.mark.parametrize(("text", "message"), [
    ("[1, 2]", "no 'results' object"),
    ('{"results": {"t": {"alias": "t", "acc": "N/A"}}}', "no task with a score"),
    ('{"results": {"t": 0.5}}', "results.t): a task's results must be an object"),
    ("{", "not a JSON results file"),
])
def test_not_a_results_file(tmp_path, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ImportFailed, match=message.replace("(", r"\(").replace(")", r"\)")):
        read(path)


def test_the_events_on_the_wire_and_the_run_left_as_it_was(hub, tmp_path):
    run_id = a_run(hub, tmp_path)
    before = hub.run(run_id)

    plan, transport = import_evals(hub, DATA / "0.4.13-group.json", run_id, EvalRequest(suite=SUITE, checkpoint=8))

    doc = harness("0.4.13-group.json")
    segment = eval_segment(run_id)
    started, *evals = transport.sent
    assert started == {"v": 1, "type": "run_started", "run": run_id, "segment": segment, "seq": 0, "ts": T0,
                       "project": "demo", "name": "train", "config": {}, "code": {}, "seed": None, "resume_step": None,
                       "env": {"imported_from": {"format": "lm-eval-harness"}}, "visibility": "public"}
    assert [(e["type"], e["segment"], e["step"], e["checkpoint"], e["suite"], e["task"], e["metrics"], e.get("n"), e["ts"])
            for e in evals] == [("eval", segment, 8, 8, SUITE, task, metrics, n, doc["date"])
                                for task, metrics, n in expected_rows(doc)]
    first = evals[0]["seq"]
    assert [e["seq"] for e in evals] == [first, first + 1, first + 2] and (first - 1) % BLOCK == 0
    for e in evals:
        events.validate_event(e)
    after = hub.run(run_id)
    for key in ("name", "status", "started_at", "finished_at", "last_step", "config", "env", "visibility", "tags"):
        assert after[key] == before[key], key
    assert after["segments"][:1] == before["segments"]
    assert [(s["index"], s["start_step"], s["resumed"], s["last_step"]) for s in after["segments"][1:]] == [(1, 0, False, None)]
    alerts = hub.client.get(f"/api/v1/runs/{run_id}/alerts", headers=hub.auth()).json()["alerts"]
    assert alerts == []  # no restart counted


def test_the_same_import_twice_sends_the_same_events_and_another_file_other_numbers(hub, tmp_path):
    run_id = a_run(hub, tmp_path)
    request = EvalRequest(suite=SUITE, checkpoint=5)
    first, sent = import_evals(hub, DATA / "0.4.4-group.json", run_id, request)
    again, resent = import_evals(hub, DATA / "0.4.4-group.json", run_id, request)
    assert resent.sent == sent.sent
    other, more = import_evals(hub, DATA / "0.4.13-group.json", run_id, request)
    seqs = {e["seq"] for e in sent.sent[1:]}
    assert not seqs & {e["seq"] for e in more.sent[1:]}
    assert len(hub.run(run_id)["segments"]) == 2  # one segment holds every import into the run


def test_a_run_without_times_keeps_its_status(hub, tmp_path):
    log = tmp_path / "untimed.csv"
    log.write_text("step,loss\n" + "".join(f"{s},{1 / (s + 1)}\n" for s in range(5)))
    (plan,) = hub.load([log])
    before = hub.run(plan.run_id)
    assert before["started_at"] == before["finished_at"]  # the import's time, both
    _, sent = import_evals(hub, DATA / "0.3.0.json", plan.run_id, EvalRequest(suite="pythia", step=4))
    assert [e["type"] for e in sent.sent[:2]] == ["run_started", "finished"]
    after = hub.run(plan.run_id)
    assert (after["status"], after["started_at"], after["finished_at"]) == ("finished", before["started_at"],
                                                                          before["finished_at"])


def test_default_step_is_the_runs_last_step(hub, tmp_path):
    run_id = a_run(hub, tmp_path, steps=12)
    plan, sent = import_evals(hub, DATA / "0.4.0.json", run_id, EvalRequest(suite=SUITE))
    assert plan.step == 11 and {e["step"] for e in sent.sent[1:]} == {11}
    assert all("checkpoint" not in e for e in sent.sent[1:])
    assert [e["task"] for e in sent.sent[1:]] == ["arc_easy", "mmlu_stem", "mmlu_abstract_algebra", "mmlu_anatomy"]
    assert sent.sent[2]["versions"] == {"task": "N/A", "git_hash": "4d7d2f6"}


@needs_outputs_core
def test_round_trip_what_the_server_holds(hub, tmp_path):
    run_id = a_run(hub, tmp_path)
    import_evals(hub, DATA / "0.4.13-group.json", run_id, EvalRequest(suite=SUITE, checkpoint=8))
    doc = harness("0.4.13-group.json")
    listed = hub.client.get(f"/api/v1/runs/{run_id}/evals", headers=hub.auth()).json()["evals"]
    assert [(e["segment"], e["step"], e["checkpoint"], e["suite"], e["task"], e["metrics"], e["n"]) for e in listed] \
        == sorted([(1, 8, 8, SUITE, task, metrics, n) for task, metrics, n in expected_rows(doc)], key=lambda r: r[4])
    exported = hub.client.get(f"/api/v1/runs/{run_id}/export", params={"what": "evals", "format": "jsonl"},
                              headers=hub.auth()).text
    held = {row["task"]: row for row in map(json.loads, exported.splitlines())}
    tasks = {t.task: t for t in read(DATA / "0.4.13-group.json").tasks}
    assert {task: (row["config"], row["versions"]) for task, row in held.items()} \
        == {task: (t.config, t.versions) for task, t in tasks.items()}
    import_evals(hub, DATA / "0.4.13-group.json", run_id, EvalRequest(suite=SUITE, checkpoint=8))
    assert hub.client.get(f"/api/v1/runs/{run_id}/evals", headers=hub.auth()).json()["evals"] == listed


def test_the_command(hub, server, tmp_path):
    run_id = a_run(hub, tmp_path)
    base = ["--server", server, "--token", hub.token()]
    ok = runcast_cli("eval", "import", str(DATA / "0.4.13-limit1.json"), "--run", run_id, "--checkpoint", "step:7", *base)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.splitlines()[0].startswith(
        "imported 2 evaluation(s) of suite 'lm-eval-harness' at step 7 of checkpoint step:7, evaluated ")
    assert ok.stdout.splitlines()[0].endswith(" UTC: tiny_mc, tiny_gen")
    assert runcast_cli("eval", "import", str(DATA / "0.4.13-limit1.json"), "--run", run_id, "--checkpoint",
                       "step:7", *base).stdout == ok.stdout
    assert len(hub.run(run_id)["segments"]) == 2

    missing = runcast_cli("eval", "import", str(DATA / "0.3.0.json"), "--run", "no-such-run", *base)
    assert missing.returncode == 3 and "answered 404" in missing.stderr
    bad = runcast_cli("eval", "import", str(DATA / "0.3.0.json"), "--run", run_id, "--checkpoint", "epoch:3", *base,
                      COLUMNS="300")
    assert bad.returncode == 2 and "step:N or N" in bad.stderr
    text = tmp_path / "notes.json"
    text.write_text('{"hello": 1}')
    res = runcast_cli("eval", "import", str(text), "--run", run_id, *base)
    assert (res.returncode, res.stderr) == (2, f"error: {text}: not an lm-evaluation-harness results file: no 'results' object\n")
    refused = runcast_cli("eval", "import", str(DATA / "0.3.0.json"), "--run", run_id, "--server", server, "--token", "rc_x")
    assert refused.returncode == 4
