"""The run-management, token, export-bytes, Parquet-export and export step-time tests of test_manage.py,
test_export_bytes.py, test_export_parquet.py and test_step_times.py,
again on PostgreSQL (a real server started by the test setup): the app in-process on a fresh
database at head, data written by ``store_batch``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from api.test_export_bytes import (  # noqa: F401  (collected here with this module's client)
    test_a_delayed_readers_bytes_are_the_first_exporters,
    test_the_export_bytes_are_the_first_exporters,
    test_the_parquet_export_reads_back_as_the_jsonl_points,
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
