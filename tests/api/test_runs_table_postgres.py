"""The run-table tests of test_runs_table.py again on PostgreSQL, whose JSON functions differ from
SQLite's (a real server started by the test setup; the app in-process on a fresh database at head)."""

from __future__ import annotations

import pytest

from api.test_manage_postgres import client  # noqa: F401  (this module's client: PostgreSQL)
from api.test_runs_table import (  # noqa: F401  (collected here with this module's client)
    sweep,
    test_columns_sort_and_offset_pages,
    test_filters_config_tags_group_status_time,
    test_group_by_with_aggregates,
    test_keys_are_data_never_sql,
    test_keys_of_the_page,
    test_private_runs_of_another_project_never_match,
    test_withheld_values_neither_match_nor_show,
)

pytestmark = pytest.mark.services
