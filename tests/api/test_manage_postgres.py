"""The run-management, token, export-bytes, Parquet-export, dense-page and export step-time tests of
test_manage.py, test_export_bytes.py, test_export_parquet.py, test_export_dense_pages.py and test_step_times.py,
again on PostgreSQL (a real server started by the test setup): the app in-process on a fresh
database at head, data written by ``store_batch``."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from api.test_export_bytes import (  # noqa: F401  (collected here with this module's client)
    test_a_delayed_readers_bytes_are_the_first_exporters,
    test_the_export_bytes_are_the_first_exporters,
    test_the_parquet_export_reads_back_as_the_jsonl_points,
)
from api.test_export_dense_pages import (  # noqa: F401
    test_a_delayed_reader_gets_the_row_by_row_bytes,
    test_a_series_dense_up_to_a_gap_gets_the_row_by_row_bytes,
    test_dense_pages_write_the_row_by_row_bytes,
)
from api.test_export_parquet import (  # noqa: F401
    test_a_series_that_starts_with_many_nans_keeps_its_types,
    test_parquet_export_equals_jsonl_exactly,
    test_parquet_is_streamed_one_row_group_per_page,
)
from api.test_manage import (  # noqa: F401
    test_a_revoked_token_stops_working_at_once_on_every_write,
    test_another_projects_token_changes_nothing_and_answers_as_unknown,
    test_delete_removes_every_row_of_the_run_and_only_of_it,
    two,
)
from api.test_step_times import (  # noqa: F401
    test_every_export_row_has_its_step_time,
    test_the_parquet_times_hold_across_pages_and_for_a_delayed_reader,
)

pytestmark = pytest.mark.services


@pytest.fixture
def client(embedded_env: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from fastapi.testclient import TestClient
    from runcast_server.app import create_app
    from runcast_server.core.settings import Settings

    monkeypatch.setenv("RUNCAST_DATABASE_URL", pg_url)
    settings = Settings()
    assert settings.sqlalchemy_url.startswith("postgresql") and "RUNCAST_REDIS_URL" not in os.environ
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def test_a_parquet_export_closed_early_leaves_no_reader_behind(seed: Any, db: Any, pg_server: Any, pg_url: str) -> None:
    """A client gone mid-download: the threads reading pages ahead stop and their connections close."""
    from runcast_server.metrics.export import export_chunks, series_to_export
    from runcast_server.record.models import Run

    run = seed.run(name="long").start(ts=1000.0)
    run.send([run.event("metrics_columns", steps=list(range(i, i + 1000)), times=[1000.0 + i] * 1000,
                        values={"loss": [1.0 / (s + 1) for s in range(i, i + 1000)]}) for i in range(0, 5000, 1000)])
    with db.scope() as session:
        refs = series_to_export(session, session.get(Run, run.run), None)
    name = pg_url.rsplit("/", 1)[1]

    def connections() -> int:
        return int(pg_server.execute(f"SELECT count(*) FROM pg_stat_activity WHERE datname = '{name}'")[0][0])

    def readers() -> list[str]:
        return [t.name for t in threading.enumerate() if t.name.startswith("runcast-export-read")]

    before = connections()
    chunks = export_chunks(db, refs, "parquet", page_rows=100)
    next(chunks), next(chunks)
    assert readers() and connections() >= before + 2  # read ahead on connections of their own
    chunks.close()
    assert not readers() and connections() == before


def test_the_parquet_export_keeps_its_connections_and_replaces_one_the_server_closed(
        client: Any, seed: Any, pg_server: Any, pg_url: str) -> None:
    """The app keeps the export's connections open between exports; after the server ends them (a restart,
    an idle timeout), the next export opens new ones and answers the same bytes."""
    run = seed.run(name="kept").start(ts=1000.0)
    run.send([run.event("metrics_columns", steps=list(range(i, i + 1000)), times=[1000.0 + i] * 1000,
                        values={"loss": [1.0 / (s + 1) for s in range(i, i + 1000)]}) for i in range(0, 3000, 1000)])
    name = pg_url.rsplit("/", 1)[1]
    url = f"/api/v1/runs/{run.run}/export"
    first = client.get(url, params={"format": "parquet"})
    kept = pg_server.execute(f"SELECT count(*) FROM pg_stat_activity WHERE datname = '{name}' AND state = 'idle'"
                             " AND query LIKE 'COPY (SELECT % FROM points %'")  # ADBC reads through COPY
    assert first.status_code == 200 and kept[0][0] >= 1
    pg_server.execute(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'")
    again = client.get(url, params={"format": "parquet"})
    assert again.status_code == 200 and again.content == first.content
