"""The sign-in tests of test_signin.py again on PostgreSQL (a real server started by the test
setup): the app in-process on a fresh database at head."""

from __future__ import annotations

import pytest

from api.test_manage_postgres import client  # noqa: F401  (the app on PostgreSQL)
from api.test_signin import (  # noqa: F401  (collected here with this module's client)
    test_a_session_expires,
    test_failed_sign_ins_are_rate_limited_per_address,
    test_revoking_the_token_ends_its_sessions_at_once,
    test_sign_in_and_out_refuse_cross_site_requests,
    test_sign_in_sets_an_httponly_strict_cookie_holding_only_a_hash_at_rest,
    test_sign_out_deletes_the_session_and_clears_the_cookie,
    test_the_cookie_never_authorises_a_write,
    test_the_cookie_reads_the_projects_private_run_everywhere_and_never_anothers,
    test_the_stream_of_a_private_run_follows_the_cookie_live_and_replayed,
    test_wrong_revoked_and_admin_tokens_are_refused_alike,
    world,
)

pytestmark = pytest.mark.services
