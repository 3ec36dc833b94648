"""On PostgreSQL, the exports read each page of a series from the points' primary key, in step order,
never by sorting the rest of the series. With no statistics yet (a new partition after a burst of
points, or a series far larger than the planner's estimate), a page of ``step > after ... LIMIT n``
was planned as a bitmap scan of every point past ``after`` and a sort of all of them: a
million-point series took three times as long to export as eight series of the same points.

The plans are the server's own: ``auto_explain`` logs the plan of every statement of the test's
database, and the test reads the reads of ``points`` from the server log."""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from runcast_server.metrics.export import PAGE_ROWS

pytestmark = pytest.mark.services

STEPS = PAGE_ROWS + 7_000  # two JSONL pages; Parquet pages of 10,000 points
API = "/api/v1/runs"


@pytest.fixture
def client(embedded_env: Path, pg_server: Any, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from fastapi.testclient import TestClient
    from runcast_server.app import create_app
    from runcast_server.core.settings import Settings

    name = pg_url.rsplit("/", 1)[1]
    pg_server.execute(f"ALTER DATABASE \"{name}\" SET session_preload_libraries = 'auto_explain'")
    pg_server.execute(f'ALTER DATABASE "{name}" SET auto_explain.log_min_duration = 0')
    monkeypatch.setenv("RUNCAST_DATABASE_URL", pg_url)
    settings = Settings()
    assert settings.sqlalchemy_url.startswith("postgresql") and "RUNCAST_REDIS_URL" not in os.environ
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def point_plans(log: str) -> list[str]:
    """The logged plans of the statements that read points (JSONL's pages, Parquet's through ADBC's
    ``COPY (SELECT ...)``, their step times), but a series' bounds (``max(step)``, ``min(step), max(step)``)."""
    entries = re.split(r"\n(?=\S)", log)  # an entry's plan lines are indented
    return [entry for entry in entries if re.search(r"Query Text: (COPY \()?SELECT .*FROM points", entry, re.DOTALL)
            and not re.search(r"Query Text: (COPY \()?SELECT (min\(step\), )?max\(step\) FROM points", entry, re.IGNORECASE)]


def test_every_page_of_a_long_series_is_read_in_index_order(client: Any, seed: Any, pg_server: Any,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from runcast_server.metrics import export

    monkeypatch.setattr(export, "PARQUET_PAGE_ROWS", 10_000)  # Parquet pages known ahead, read two at once
    run = seed.run(name="long").start()
    run.send([run.event("metrics_columns", steps=list(range(start, min(start + 5000, STEPS))),
                        times=[1000.0 + s / 100 for s in range(start, min(start + 5000, STEPS))],
                        values={"loss": [1.0 / (s + 1) for s in range(start, min(start + 5000, STEPS))]})
              for start in range(0, STEPS, 5000)])
    mark = pg_server.log_path.stat().st_size
    lines = client.get(f"{API}/{run.run}/export").text.splitlines()
    parquet = client.get(f"{API}/{run.run}/export", params={"format": "parquet"}).content
    assert len(lines) == STEPS and pq.read_table(io.BytesIO(parquet)).num_rows == STEPS
    with pg_server.log_path.open(errors="replace") as f:
        f.seek(mark)
        plans = point_plans(f.read())
    assert len(plans) >= 2 + 2 * 4, plans  # two JSONL pages, four Parquet pages at least, and their step times
    for plan in plans:
        assert "Index Scan" in plan and "Sort" not in plan and "Bitmap" not in plan, plan
