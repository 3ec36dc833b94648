"""Helpers for the production-mode integration tests: wire events, reads, table snapshots.

Everything that depends on the exact shape of the SDK or of the read API lives here,
so a change in either is one edit, not one per test.
"""

from __future__ import annotations

import json
import math
import subprocess
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import httpx
from runcast.wire import events as ev
from runcast.wire.limits import TIMESTAMP_KEY
from services import ServiceError, wait_until
from sqlalchemy import text

INGEST_TASK = "runcast.ingest_batch"

# --- values ---------------------------------------------------------------------------


def value_at(step: int, k: int = 0) -> float:
    """A deterministic, full-precision float for (step, metric index); not round."""
    return math.sin(step * 0.001 + k) * (1 + k) + 1 / 3 + step * 1e-7


SPECIAL = {7: math.nan, 11: math.inf, 13: -math.inf}
"""Steps whose value of metric 0 is non-finite in the round-trip tests."""


def same(a: float | None, b: float | None) -> bool:
    """Equality that treats NaN as equal to NaN (and None as NaN)."""
    a = math.nan if a is None else a
    b = math.nan if b is None else b
    return (math.isnan(a) and math.isnan(b)) or a == b


# --- wire events (for tests that bypass the SDK) ---------------------------------------------


class WireRun:
    """Builds wire events for one run segment, numbering ``seq`` like the SDK does."""

    def __init__(self, project: str, name: str = "wire", run_id: str | None = None) -> None:
        self.project = project
        self.name = name
        self.run = run_id or ev.new_id()
        self.segment = ev.new_id()
        self.seq = 0

    def event(self, type_: str, **fields: Any) -> dict[str, Any]:
        """Any wire event of this segment (sample, eval, media ...), numbered next."""
        event = {
            "v": ev.SCHEMA_VERSION,
            "type": type_,
            "run": self.run,
            "segment": self.segment,
            "seq": self.seq,
            "ts": time.time(),
            **fields,
        }
        self.seq += 1
        return event

    def started(self, **fields: Any) -> dict[str, Any]:
        body = {"project": self.project, "name": self.name, "config": {}, "code": {}, "env": {},
                "seed": None, "resume_step": None, "visibility": "public"}
        body.update(fields)
        return self.event("run_started", **body)

    def metrics(self, step: int, values: Mapping[str, float]) -> dict[str, Any]:
        return self.event("metrics", step=step, values={k: ev.encode_value(v) for k, v in values.items()})

    def finished(self, step: int | None = None, status: str = "finished") -> dict[str, Any]:
        return self.event("finished", step=step, status=status)


def post_batch(api_url: str, token: str, events: list[dict[str, Any]]) -> httpx.Response:
    return httpx.post(
        f"{api_url}/api/v1/ingest",
        content=ev.dumps_batch(events),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        timeout=60,
    )


def celery_client(redis_url: str):  # type: ignore[no-untyped-def]
    """A bare Celery app on the broker: sends tasks by name, imports nothing of the server."""
    from celery import Celery

    return Celery("runcast-tests", broker=redis_url, set_as_current=False)


def send_batch_task(client: Any, events: list[dict[str, Any]], token: str) -> None:
    """Enqueue a ``runcast.ingest_batch`` message of the first task contract (the events in the
    message, token auth in the task), as the previous release's ``redis://`` transport did."""
    client.send_task(INGEST_TASK, kwargs={"events": events, "project_id": None, "token": token})


def push_raw_task(redis_client: Any, body: bytes, *, task: str = INGEST_TASK, content_type: str = "application/json",
                  headers: str = "") -> str:
    """Put a task message on the Celery queue as kombu's Redis transport would, with a ``body``
    no kombu producer would send (too deep to encode, not JSON, ...); ``headers``: JSON members
    added to its headers. Returns the message id."""
    import base64
    import uuid

    task_id = str(uuid.uuid4())
    head = json.dumps({"lang": "py", "task": task, "id": task_id, "root_id": task_id, "parent_id": None,
                       "group": None, "retries": 0, "eta": None, "expires": None, "argsrepr": "()",
                       "kwargsrepr": "{}"})
    if headers:
        head = head[:-1] + ", " + headers + "}"
    properties = json.dumps({"correlation_id": task_id, "reply_to": None, "delivery_mode": 2, "priority": 0,
                             "delivery_info": {"exchange": "", "routing_key": "celery"},
                             "body_encoding": "base64", "delivery_tag": str(uuid.uuid4())})
    redis_client.lpush("celery", '{"body": "' + base64.b64encode(body).decode() + '", "content-encoding": "utf-8", '
                       '"content-type": "' + content_type + '", "headers": ' + head + ', "properties": '
                       + properties + "}")
    return task_id


# --- reads ----------------------------------------------------------------------------------------


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def export_rows(api_url: str, run_id: str, token: str | None = None, key: str | None = None,
                timeout: float = 600) -> list[dict[str, Any]]:
    """Every stored point of ``run_id`` via ``GET /runs/{id}/export?format=jsonl``, values decoded."""
    params = {"format": "jsonl"}
    if key:
        params["key"] = key
    rows = []
    with httpx.stream("GET", f"{api_url}/api/v1/runs/{run_id}/export", params=params,
                      headers=_headers(token), timeout=timeout) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if line.strip():
                row = json.loads(line)
                row["value"] = ev.decode_value(row["value"])
                rows.append(row)
    return rows


def export_count(api_url: str, run_id: str, token: str | None = None) -> int:
    """How many rows the export streams (cheap on memory: counts lines)."""
    n = 0
    with httpx.stream("GET", f"{api_url}/api/v1/runs/{run_id}/export", params={"format": "jsonl"},
                      headers=_headers(token), timeout=900) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if line.strip():
                n += 1
    return n


def raw_metric(api_url: str, run_id: str, key: str, start: int, end: int,
               token: str | None = None) -> list[tuple[int, float]]:
    """(step, value) of ``key`` at the raw level for steps in [start, end], all segments."""
    r = httpx.get(
        f"{api_url}/api/v1/runs/{run_id}/metrics",
        params={"key": key, "start": start, "end": end, "max_points": 20000},
        headers=_headers(token), timeout=60,
    )
    r.raise_for_status()
    body = r.json()
    assert body["level"] == 0, body
    out = []
    for series in body["series"]:
        for step, value in zip(series["step"], series["last"], strict=True):
            out.append((step, ev.decode_value(value)))
    return out


def get_run(api_url: str, run_id: str, token: str | None = None) -> httpx.Response:
    return httpx.get(f"{api_url}/api/v1/runs/{run_id}", headers=_headers(token), timeout=30)


# --- database snapshots (exact comparisons of what the workers wrote) ----------------------------


def point_count(engine: Any, run_id: str) -> int:
    with engine.connect() as conn:
        return conn.execute(
            text("SELECT count(*) FROM points p JOIN series s ON s.id = p.series_id WHERE s.run_id = :r AND s.key <> :t"),
            {"r": run_id, "t": TIMESTAMP_KEY},
        ).scalar_one()


def wait_points(engine: Any, run_id: str, expected: int, timeout: float = 300,
                procs: Iterable[Any] = ()) -> None:
    """Wait until the database holds ``expected`` points of ``run_id``; fail early if a process died."""

    def done() -> bool:
        for p in procs:
            p.check_alive("the test waited for points")
        return point_count(engine, run_id) >= expected

    try:
        wait_until(done, timeout, f"{expected} points of run {run_id}", interval=0.5)
    except ServiceError as exc:
        raise AssertionError(f"{exc}; stored: {point_count(engine, run_id)}") from None


def snapshot(engine: Any, run_id: str) -> dict[str, Any]:
    """The run's points, rollups and series, keyed by names (not ids) so two databases compare.

    Points' ``version`` (which batch wrote them) depends on arrival order and is left out, and so is
    the server's step-time series (``_timestamp``): which steps carry a time depends on the batch
    edges (tests/api/test_step_times.py checks it).
    """
    with engine.connect() as conn:
        series = {
            row.id: (row.seg_index, row.key)
            for row in conn.execute(text(
                "SELECT s.id, g.index AS seg_index, s.key FROM series s "
                "JOIN segments g ON g.id = s.segment_id WHERE s.run_id = :r AND s.key <> :t"), {"r": run_id, "t": TIMESTAMP_KEY})
        }
        series_counts = {
            (row.seg_index, row.key): (row.count, row.min_step, row.max_step)
            for row in conn.execute(text(
                "SELECT g.index AS seg_index, s.key, s.count, s.min_step, s.max_step FROM series s "
                "JOIN segments g ON g.id = s.segment_id WHERE s.run_id = :r AND s.key <> :t"), {"r": run_id, "t": TIMESTAMP_KEY})
        }
        points = {
            (*series[row.series_id], row.step): row.value
            for row in conn.execute(text(
                "SELECT p.series_id, p.step, p.value FROM points p JOIN series s ON s.id = p.series_id "
                "WHERE s.run_id = :r AND s.key <> :t"), {"r": run_id, "t": TIMESTAMP_KEY})
        }
        rollups = {
            (*series[row.series_id], row.level, row.bucket): (
                row.min, row.max, row.sum, row.count, row.nan_count, row.last, row.last_step)
            for row in conn.execute(text(
                "SELECT r.* FROM rollups r JOIN series s ON s.id = r.series_id WHERE s.run_id = :r AND s.key <> :t"),
                {"r": run_id, "t": TIMESTAMP_KEY})
        }
        run = conn.execute(text("SELECT status, last_step, last_values FROM runs WHERE id = :r"),
                           {"r": run_id}).one()
    return {"series": series_counts, "points": points, "rollups": rollups,
            "run": (run.status, run.last_step, _json(run.last_values))}


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def expected_rollups(points: Mapping[tuple[Any, ...], float | None], levels: Iterable[int]) -> dict:
    """Rollup rows computed from scratch from ``points`` ((seg, key, step) -> value, NaN as None)."""
    acc: dict[tuple[Any, ...], list[Any]] = {}
    by_series: dict[tuple[Any, Any], list[tuple[int, float | None]]] = defaultdict(list)
    for (seg, key, step), value in points.items():
        by_series[(seg, key)].append((step, value))
    for (seg, key), pts in by_series.items():
        pts.sort()
        for level in levels:
            for step, value in pts:
                k = (seg, key, level, step >> level)
                row = acc.setdefault(k, [None, None, 0.0, 0, 0, None, -1])
                if value is None or (isinstance(value, float) and math.isnan(value)):
                    row[4] += 1
                    value = None
                else:
                    row[0] = value if row[0] is None else min(row[0], value)
                    row[1] = value if row[1] is None else max(row[1], value)
                    if math.isfinite(value):
                        row[2] += value
                        row[3] += 1
                if step > row[6]:
                    row[5], row[6] = value, step
    return {k: tuple(v) for k, v in acc.items()}


def assert_rollups_equal(actual: Mapping, expected: Mapping, rel: float = 1e-9) -> None:
    """Same keys; min/max/count/nan_count/last/last_step exact; sum within ``rel`` (order of adds)."""
    missing = sorted(set(expected) - set(actual))[:5]
    extra = sorted(set(actual) - set(expected))[:5]
    assert not missing and not extra, f"rollup keys differ: missing {missing}, extra {extra}"
    bad = []
    for k, exp in expected.items():
        got = actual[k]
        ok = (
            same(got[0], exp[0]) and same(got[1], exp[1])
            and got[3] == exp[3] and got[4] == exp[4]
            and same(got[5], exp[5]) and got[6] == exp[6]
            and math.isclose(got[2], exp[2], rel_tol=rel, abs_tol=1e-9)
        )
        if not ok:
            bad.append((k, got, exp))
    assert not bad, f"{len(bad)} rollup rows differ, e.g. {bad[:3]}"


def dump_json(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=1, default=str))


# --- the SDK, driven in its own process ---------------------------------------------------------

DRIVER = Path(__file__).resolve().parent / "sdk_driver.py"


class Driver:
    """``sdk_driver.py`` running as a child process (a training job using the real SDK).

    Its HOME is a temp dir, so whatever the SDK keeps under ~ (its spool) is private to
    the test.
    """

    def __init__(self, stack: Any, *, server: str, token: str, project: str, steps: int,
                 metrics: int = 1, name: str = "driver", extra: Iterable[str] = (),
                 env: Mapping[str, str] | None = None) -> None:
        import sys

        from services import Process, child_env

        home = stack.tmp / f"home-{name}"
        home.mkdir(exist_ok=True)
        self.home = home
        argv = [sys.executable, str(DRIVER), "--server", server, "--token", token,
                "--project", project, "--name", name, "--steps", str(steps),
                "--metrics", str(metrics), *extra]
        self.proc: Process = Process(
            name, argv, child_env({"HOME": str(home), "RUNCAST_SPOOL_DIR": str(home / "spool"), **(env or {})}), stack._log_path(name)
        )
        stack.processes.append(self.proc)
        self._run_id: str | None = None

    def _lines(self) -> list[dict[str, Any]]:
        out = []
        for line in self.proc.output().splitlines():
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
        return out

    @property
    def run_id(self) -> str:
        if self._run_id is None:
            def find() -> str | None:
                for d in self._lines():
                    if "run" in d:
                        return d["run"]
                self.proc.check_alive("the test waited for its run id")
                return None

            self._run_id = wait_until(find, 60, f"{self.proc.name} to print its run id")
        return self._run_id

    def wait(self, timeout: float = 600) -> dict[str, Any]:
        """Wait for the driver to exit 0 after ``finish()``; returns its final JSON line."""
        try:
            code = self.proc.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.proc.name} still running after {timeout}s:\n{self.proc.log()}") from None
        done = [d for d in self._lines() if d.get("done")]
        assert code == 0 and done, f"{self.proc.name} exited {code}:\n{self.proc.log()}"
        return done[-1]


# --- fault injection: beat, restartable servers, a broken detector ------------------------------


def start_beat(stack: Any, name: str = "beat", **env: str) -> Any:
    """``celery beat`` for the stack (the inbox sweeper and the alerts' check), as docker-compose runs it."""
    import sys

    from services import Process, child_env, wait_until

    schedule = stack.tmp / f"{name}-schedule"
    argv = [str(Path(sys.executable).parent / "celery"), "-A", "runcast_server.core.celery_app:app", "beat",
            "--schedule", str(schedule), "--loglevel", "INFO"]
    proc = Process(name, argv, child_env({**stack.env, **env}), stack._log_path(name))
    stack.processes.append(proc)
    wait_until(lambda: proc.check_alive("starting") or "beat: Starting" in proc.output(), 60,
               f"{name} to start", interval=0.2)
    return proc


def restart_redis(server: Any) -> None:
    """Kill ``services.RedisServer``'s process (no persistence: its data is gone) and start a fresh
    one on the same port."""
    server.proc.kill()
    server.dir.mkdir(parents=True, exist_ok=True)
    server.start()


class RestartablePostgres:
    """A PostgreSQL cluster of its own for one test, that can be stopped and started again on
    the same port and data (the test suite's settings: fsync off)."""

    def __init__(self) -> None:
        from services import PostgresServer

        self.server = PostgresServer()
        self.server.start()
        self._opts = self._read_opts()

    def _read_opts(self) -> list[str]:
        import shlex

        argv = shlex.split((self.server.data / "postmaster.opts").read_text())
        return argv[1:]  # without the postgres binary

    def url(self, database: str) -> str:
        return self.server.url(database)

    def stop(self, mode: str = "fast") -> None:
        s = self.server
        s._run([s.pg_ctl, "-D", str(s.data), "-m", mode, "-w", "stop"], "pg_ctl stop")

    def start(self) -> None:
        import shlex

        s = self.server
        opts = " ".join(shlex.quote(a) for a in self._opts if a not in ("-D", str(s.data)))
        s._run([s.pg_ctl, "-D", str(s.data), "-l", str(s.log_path), "-w", "-t", "60", "-o", opts, "start"],
               "pg_ctl start")

    def close(self) -> None:
        from services import ServiceError

        try:
            self.server.stop()
        except ServiceError:
            pass  # it was stopped already (a test failed during the outage)


BROKEN_DETECTORS = '''
import runcast_server.alerts.engine as _engine


def _broken(*args, **kwargs):
    raise RuntimeError("a detector bug, injected by the test")


_engine.run_detectors = _broken
'''


def broken_detectors_path(tmp: Path) -> str:
    """A directory whose ``sitecustomize.py`` makes every detector pass raise; put it first on a
    worker's PYTHONPATH."""
    import os

    folder = tmp / "broken-detectors"
    folder.mkdir(exist_ok=True)
    (folder / "sitecustomize.py").write_text(BROKEN_DETECTORS)
    return os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")])


def inbox_states(engine: Any) -> dict[str, int]:
    with engine.connect() as conn:
        return dict(conn.execute(text("SELECT state, count(*) FROM ingest_inbox GROUP BY state")).all())


def export_steps(api_url: str, run_id: str, token: str | None = None) -> dict[str, list[int]]:
    """key -> stored steps in export order (a repeat would show twice)."""
    out: dict[str, list[int]] = defaultdict(list)
    for row in export_rows(api_url, run_id, token):
        out[row["key"]].append(row["step"])
    return dict(out)
