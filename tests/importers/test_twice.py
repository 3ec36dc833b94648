"""Every format imported twice in one go: the second import stores nothing, counted in the database."""

from __future__ import annotations

import json
from typing import Any

from mlflow import MlflowClient
from mlflow.entities import Metric
from runcast_server.metrics.models import Rollup
from runcast_server.record.models import Event, Point, Run, RunVersion, Segment, Series
from sqlalchemy import func, select
from torch.utils.tensorboard import SummaryWriter

T0 = 1_700_000_000.0
TABLES = (Run, Segment, Series, Point, Rollup, Event, RunVersion)


def stored(db: Any) -> dict[str, int]:
    """Row count of every table an import writes."""
    with db.scope() as session:
        return {t.__tablename__: session.scalar(select(func.count()).select_from(t)) for t in TABLES}


def test_every_format_twice(db: Any, hub, wandb_dir, tmp_path):
    with SummaryWriter(str(tmp_path / "tb" / "run")) as w:
        for s in range(100):
            w.add_scalar("loss", 1.0 / (1 + s), s, walltime=T0 + s)
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    run = client.create_run(client.create_experiment("e"), run_name="m").info.run_id
    client.log_batch(run, metrics=[Metric("loss", 1.0 / (1 + s), int(T0 * 1000) + 1000 * s, s) for s in range(50)])
    client.set_terminated(run, "FINISHED")
    seed = tmp_path / "seed.jsonl"
    seed.write_text("".join(
        json.dumps({"step": s, "loss": 3 - s / 100, "learning_rate": 1e-3, "grad_norm": 1.0, "tokens_seen": 10 * s,
                    "timestamp": T0 + s}) + "\n" for s in range(1, 21)))
    chart = tmp_path / "chart.csv"
    chart.write_text('"Step","a - loss","a - loss__MIN","a - loss__MAX"\n0,3.1,3.1,3.1\n10,2.5,2.4,2.6\n')
    sources = [tmp_path / "tb", tmp_path / "mlflow.db", wandb_dir, seed, chart]

    first = hub.load(sources)

    counts = stored(db)
    # points: each source's own (TensorBoard 100, MLflow 50, W&B 312 and 20, seed log 80, chart 2) and
    # the server's step times (_timestamp), at least one a segment
    with db.scope() as session:
        times = session.scalar(select(func.count()).select_from(Point).join(Series, Series.id == Point.series_id)
                               .where(Series.key == "_timestamp"))
    assert counts["points"] == 100 + 50 + 312 + 20 + 80 + 2 + times and times >= 7
    assert sum(p.run.points for p in first) == 100 + 50 + 312 + 20 + 80 + 2
    assert counts["runs"] == len(first) == 6 and counts["segments"] == 7

    again = hub.load(sources)

    assert [p.run_id for p in again] == [p.run_id for p in first]
    assert stored(db) == counts
