"""test_runs_table_values.py again on PostgreSQL (jsonb: its own type names, number casts and order)."""

from __future__ import annotations

import pytest

from api.test_manage_postgres import client  # noqa: F401  (this module's client: PostgreSQL)
from api.test_runs_table_values import (  # noqa: F401  (collected here with this module's client)
    kinds,
    test_a_nested_object_is_no_value_and_its_keys_no_columns,
    test_numbers_text_booleans_null_and_missing,
    test_offset_pages_of_a_sort_with_ties_hold_every_run_once,
    test_runs_created_while_paging_never_shift_a_page,
    test_sort_puts_runs_without_a_number_or_text_last,
)

pytestmark = pytest.mark.services
