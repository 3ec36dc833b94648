"""The demo project in the shared ``engine`` database, for the store_batch tests."""

from __future__ import annotations

import pytest
from runcast_server.core.auth import get_or_create_project
from sqlalchemy import Engine
from sqlalchemy.orm import Session


@pytest.fixture
def project_id(engine: Engine) -> int:
    with Session(engine) as session:
        pid = get_or_create_project(session, "demo").id
        session.commit()
    return pid
