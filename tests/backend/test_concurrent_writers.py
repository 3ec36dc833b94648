"""Concurrent store_batch calls on one run (PostgreSQL): no deadlock, no lost update, exact totals."""

from __future__ import annotations

import threading
from typing import Any

from runcast.wire.events import validate_event
from runcast_server.ingest.store import store_batch
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from backend.helpers import metrics, started


def test_racing_writers_store_everything_once(pg_url: str) -> None:
    from runcast_server.core.auth import get_or_create_project
    from runcast_server.core.db import make_engine

    engine: Engine = make_engine(pg_url)
    with Session(engine) as session:
        pid = get_or_create_project(session, "demo").id
        session.commit()
    runs = ["run_race0001", "run_race0002"]
    # Each worker opens its own segment of both runs and writes overlapping points to them,
    # touching the runs in opposite orders.
    batches: list[list[dict[str, Any]]] = []
    for w in range(6):
        seg = f"seg_worker{w:02d}"
        order = runs if w % 2 else runs[::-1]
        events = [started(run=r, segment=seg, seq=0) for r in order]
        events += [metrics(s, {"loss": float(s)}, run=r, segment=seg, seq=1 + s) for r in order for s in range(200)]
        batches.append([validate_event(e) for e in events])
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(batches))

    def work(batch: list[dict[str, Any]]) -> None:
        try:
            barrier.wait()
            for _ in range(2):  # each batch delivered twice
                with Session(engine) as session:
                    store_batch(session, pid, batch)
                    session.commit()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(b,)) for b in batches]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    with engine.connect() as conn:
        segs = conn.execute(text('SELECT run_id, array_agg("index" ORDER BY "index") FROM segments GROUP BY run_id ORDER BY run_id')).all()
        assert [tuple(s) for s in segs] == [(r, list(range(6))) for r in runs]
        logged = "series_id IN (SELECT id FROM series WHERE key <> '_timestamp')"  # not the step times
        assert conn.execute(text(f"SELECT count(*) FROM points WHERE {logged}")).scalar() == 2 * 6 * 200
        assert conn.execute(text("SELECT id, version FROM runs ORDER BY id")).all() == [(r, 6) for r in runs]
        # Level-3 rollups count every point exactly once.
        assert conn.execute(text(f"SELECT sum(count) FROM rollups WHERE level = 3 AND {logged}")).scalar() == 2 * 6 * 200
    engine.dispose()
