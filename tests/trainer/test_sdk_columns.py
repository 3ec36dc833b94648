"""The SDK sends dense series as columns (``metrics_columns``) only to a server that lists the type in
whoami's ``event_types``, only for batches dense enough, and falls back to one event per step when a
server refuses the form; a spooled columnar body reads back as its events. The servers are real HTTP
servers in the test."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import runcast
from runcast.sender.batches import batch_bodies, is_columnar
from runcast.sender.config import SenderConfig
from runcast.sender.encode import encode_items, to_wire
from runcast.sender.renames import Renames
from runcast.sender.spool import Spool
from runcast.sender.spool_parts import Parts
from runcast.sender.transport import Rejected
from runcast.values import Deferred
from runcast.wire.columns import MIN_COLUMN_ROWS, expand_columns
from runcast.wire.events import EVENT_TYPES, MAX_BATCH_BYTES


class FakeServer(ThreadingHTTPServer):
    def __init__(self, lists: bool, takes: bool) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.lists, self.takes = lists, takes  # whoami lists metrics_columns; POST takes it
        self.bodies: list[dict[str, Any]] = []
        self.stored: list[dict[str, Any]] = []
        self.url = f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    server: FakeServer

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self, status: int, doc: dict[str, Any]) -> None:
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802
        types = [t for t in EVENT_TYPES if self.server.lists or t != "metrics_columns"]
        self._answer(200, {"project": "p", "run": None, "max_batch_events": 5000, "event_types": types})

    def do_POST(self) -> None:  # noqa: N802
        batch = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.bodies.append(batch)
        for index, e in enumerate(batch["events"]):
            if e["type"] == "metrics_columns" and not self.server.takes:
                return self._answer(422, {"error": {"message": "must be one of ...", "field": "type", "index": index}})
        self.server.stored.extend(expand_columns(batch["events"]))
        self._answer(202, {"accepted": len(batch["events"])})


@pytest.fixture()
def serve() -> Iterator[Any]:
    made: list[FakeServer] = []

    def start(lists: bool, takes: bool) -> FakeServer:
        server = FakeServer(lists, takes)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        made.append(server)
        return server

    yield start
    for server in made:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(("lists", "takes"), [(True, True), (False, False), (True, False)],
                         ids=["takes-columns", "older-server", "lists-but-refuses"])
def test_columns_go_only_to_a_server_that_takes_them_and_nothing_is_lost(serve, tmp_path, lists, takes):
    server = serve(lists, takes)
    run = runcast.init(project="p", name="dense", server=server.url, token="t", dir=tmp_path / "spool",
                       flush_interval=60, max_queue=10_000, heartbeat_interval=3600, capture_code=False)
    for step in range(3000):
        run.log({"loss": 1.0 / (step + 1), "lr": float("nan") if step == 7 else 3e-4}, step=step)
    run.finish()
    columnar = [b for b in server.bodies if any(e["type"] == "metrics_columns" for e in b["events"])]
    assert bool(columnar) == lists
    metrics = [e for e in server.stored if e["type"] == "metrics"]
    assert [e["step"] for e in metrics] == list(range(3000))
    assert metrics[7]["values"] == {"loss": 1.0 / 8, "lr": "NaN"}
    stats = run.stats
    assert (stats.dropped, stats.spooled, stats.sent) == (0, 0, stats.logged)  # counted per event, whatever the form


def event(i: int, **values: Any) -> dict[str, Any]:
    return {"v": 1, "type": "metrics", "run": "run_aaaaaaaa", "segment": "seg_aaaaaaaa", "seq": i, "ts": 1.0 + i,
            "step": i, "values": values or {"loss": float(i)}}


def test_only_a_dense_batch_goes_as_columns():
    sparse = [event(i) for i in range(MIN_COLUMN_ROWS - 1)]
    ((body, batch),) = batch_bodies(sparse, columns=True)
    assert not is_columnar(body) and batch == sparse
    dense = [event(i) for i in range(MIN_COLUMN_ROWS)]
    ((body, batch),) = batch_bodies(dense, columns=True)
    assert is_columnar(body) and batch == dense  # the batch stays its events: counted and halved as such
    assert expand_columns(json.loads(body)["events"]) == dense
    ((body, _),) = batch_bodies(dense)
    assert not is_columnar(body)
    system = [event(i, **{"system/n0/rank0/cpu": 1.0}) for i in range(100)]
    ((body, _),) = batch_bodies(system, columns=True)
    assert not is_columnar(body)  # the sampler's events go one by one


def test_a_spooled_columnar_body_reads_back_as_its_events(tmp_path: Path):
    dense = [event(i, loss=float(i), **({"acc": 0.5} if i % 3 else {})) for i in range(50)]
    ((body, _),) = batch_bodies(dense, columns=True)
    spool = Spool.create(tmp_path, {"run": "run_aaaaaaaa", "segment": "seg_aaaaaaaa"})
    spool.append(body)
    ((stored, events, _),) = list(spool.pending())
    assert stored == body and events == dense  # sent again as stored; counted per event


class Recorder:
    """A transport that takes every body of at most ``max_events`` events, and answers a larger one 422."""

    url = "http://recorder"

    def __init__(self, max_events: int) -> None:
        self.max_events = max_events
        self.taken: list[bytes] = []

    def send(self, body: bytes, events: list[dict[str, Any]], timeout: float) -> None:
        if len(events) > self.max_events:
            raise Rejected("HTTP 422: too many events", 422, field="events")
        self.taken.append(body)


@pytest.mark.parametrize("said", [1000, 5000], ids=["server-said", "server-said-more-than-it-takes"])
def test_a_spooled_columnar_batch_cut_for_a_smaller_server_stays_columns(said):
    """``runcast sync`` of a columnar body larger than the server takes: its parts are columns too,
    whether the server's whoami said its limit or the parts are halved at its refusal."""
    dense = [event(i) for i in range(3000)]
    ((body, _),) = batch_bodies(dense, columns=True)
    server = Recorder(max_events=1000)
    sent, refused = Parts(said).send(server, body, dense, 10.0, ())
    assert sent == 3000 and refused == []
    assert all(is_columnar(b) for b in server.taken)
    assert [e for b in server.taken for e in expand_columns(json.loads(b)["events"])] == dense


class Tensor:
    """A one-element device tensor as ``Deferred`` reads it (``.item()``), or one the device cannot give."""

    def __init__(self, value: float | None) -> None:
        self.value = value

    def item(self) -> float:
        if self.value is None:
            raise RuntimeError("device lost")
        return self.value


def queued(tensors: bool) -> list[Any]:
    """Queue items as the outbox holds them: a note first, dense metrics with a sparse key, NaN and
    +-Inf, heartbeats between and after them, and (with ``tensors``) device tensors, one unreadable."""
    items: list[Any] = [(0, "note", 1.0, None, {"text": "go"})]
    for i in range(1, 200):
        values: dict[str, Any] = {"loss": 1.0 / i, "lr": 3e-4}
        if i % 7 == 0:
            values["val/loss"] = [float("nan"), float("inf"), -float("inf")][i % 3]
        if tensors and i % 5 == 0:
            values["loss"] = Deferred(Tensor(2.0 * i))
        if tensors and i == 50:
            values = {"loss": Deferred(Tensor(None))}  # every value lost: the item is not sent
        items.append((i, "metrics", 1.0 + i, i, values))
        if i % 60 == 0:
            items.append((1000 + i, "heartbeat", 1.0 + i, i, {"step": i}))
    return [*items, (2000, "heartbeat", 500.0, 199, {"step": 199})]


@pytest.mark.parametrize("columns", [True, False], ids=["columns", "events"])
@pytest.mark.parametrize("tensors", [False, True], ids=["floats", "device-tensors"])
@pytest.mark.parametrize("max_bytes", [MAX_BATCH_BYTES, 3000], ids=["one-body", "halved"])
def test_the_senders_bodies_are_those_of_its_events(columns, tensors, max_bytes):
    """The sender builds columns from its queue's items without an event a step: the bodies and the
    batches' events are exactly what cutting the items' wire events gives."""
    config = SenderConfig(run="run_aaaaaaaa", segment="seg_aaaaaaaa", batch_size=5000, flush_interval=0,
                          heartbeat_interval=60, retry_initial=1, retry_max=2, spool_dir=Path("unused"), spool_meta={},
                          batch_bytes=max_bytes, columns=columns)
    items = queued(tensors)
    bodies, unreadable = encode_items(items, config, Renames("here"), lambda: False, 5000)
    wire = [e for item in queued(tensors) if (e := to_wire(item, config.run, config.segment, lambda: False))]
    expected = batch_bodies(wire, 5000, max_bytes, columns=columns)
    assert [body for body, _ in bodies] == [body for body, _ in expected]
    assert [list(batch) for _, batch in bodies] == [batch for _, batch in expected]
    assert unreadable == (1 if tensors else 0)
    assert (len(bodies) > 1) == (max_bytes < MAX_BATCH_BYTES)
    assert is_columnar(bodies[0][0]) == columns
    events = [e for body, _ in bodies for e in expand_columns(json.loads(body)["events"])]
    assert len(events) == len(wire) == len(items) - unreadable  # every readable item once, none lost
