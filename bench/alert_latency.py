"""Alert latency in production mode: ingest of the point that opens a spike alert -> webhook request arrival.

    .venv/bin/python bench/alert_latency.py [--trials 30]

Starts PostgreSQL, Redis, one Celery worker and one API process (tests/services.py),
subscribes a local receiver (127.0.0.1, allow-listed) to a run, then per trial posts the
jump of a loss spike alone (HTTP ingest, as the SDK does; no alert may come of it: a
one-point jump is not a spike), then the next point, still high, which confirms the spike
(docs/alerts.md, "The spike rule"), and measures the time from the start of that second POST
to the receiver getting the signed request. The time between a trainer's two logged points
is the trainer's, not the server's, and comes on top of this.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import httpx
import services
from alerts.helpers import Receiver, WireRun
from runcast.wire import events as ev


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=30)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="runcast-alert-latency-"))
    pg, redis = services.PostgresServer(), services.RedisServer()
    pg.start()
    redis.start()
    procs = []
    try:
        from runcast_server.core import migrate
        from runcast_server.core.auth import create_token
        from runcast_server.core.db import make_engine
        from sqlalchemy.orm import Session

        db = pg.create_database("latency")
        url = pg.url(db)
        migrate.upgrade(url)
        engine = make_engine(url)
        with Session(engine) as s:
            token = create_token(s, "bench")
            s.commit()
        env = {"RUNCAST_DATABASE_URL": url, "RUNCAST_REDIS_URL": redis.url(0), "RUNCAST_DATA_DIR": str(tmp),
               "RUNCAST_WEBHOOK_ALLOW_CIDRS": "127.0.0.0/8"}
        procs.append(services.start_worker(env, tmp / "worker.log", concurrency=2, pool="threads"))
        api, base = services.start_api(env, tmp / "api.log")
        procs.append(api)
        rec = Receiver()
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        run = WireRun(project="bench")
        with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
            client.post("/api/v1/ingest", content=ev.dumps_batch([run.started()])).raise_for_status()
            time.sleep(1.0)
            client.post("/api/v1/subscriptions", json={"run": run.run, "channel": "webhook", "url": rec.url},
                        headers={"Content-Type": "application/json"}).raise_for_status()
            step = 0
            latencies = []
            for _ in range(args.trials):
                calm = [run.metrics(step + i, loss=2.0 + 0.01 * ((step + i) % 7)) for i in range(60)]
                step += 60
                client.post("/api/v1/ingest", content=ev.dumps_batch(calm)).raise_for_status()
                time.sleep(0.3)
                seen = len(rec.requests)
                client.post("/api/v1/ingest", content=ev.dumps_batch([run.metrics(step, loss=9.0)])).raise_for_status()
                time.sleep(0.3)
                if len(rec.requests) != seen:
                    raise SystemExit(f"step {step}: a one-point jump sent an alert; the spike rule is not the documented one")
                t0 = time.time()
                client.post("/api/v1/ingest", content=ev.dumps_batch([run.metrics(step + 1, loss=9.0)])).raise_for_status()
                step += 2
                while len(rec.requests) == seen and time.time() - t0 < 30:
                    time.sleep(0.002)
                if len(rec.requests) == seen:
                    raise SystemExit(f"step {step - 2}: no alert 30 s after the confirming point")
                latencies.append(rec.arrived[seen] - t0)
        rec.close()
        latencies.sort()
        p = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))]
        print(f"alert latency over {len(latencies)} spikes: p50 {p(0.5):.3f} s, p95 {p(0.95):.3f} s, "
              f"max {latencies[-1]:.3f} s, mean {statistics.mean(latencies):.3f} s")
    finally:
        for proc in procs:
            proc.stop()
        redis.stop()
        pg.stop()


if __name__ == "__main__":
    main()
