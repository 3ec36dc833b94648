"""The run table's JSON, parsed when written: ``runs.config_jsonb``, ``summary_jsonb`` and
``last_values_jsonb``, generated columns that copy ``config``, ``summary`` and ``last_values``.

On PostgreSQL they are ``jsonb``, STORED: a filter, sort or group aggregate on a key of 10^4
runs reads binary JSON instead of casting each run's ``json`` text per request (the source
columns stay ``json``, which keeps the key order a run logged). Adding them rewrites ``runs``
once. On SQLite they are VIRTUAL (no storage): SQLite reads its JSON text in place either way.

Revision ID: 0019
Revises: 0018
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

SOURCES = ("config", "summary", "last_values")


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    for source in SOURCES:
        kind = JSONB() if postgres else sa.JSON()
        op.add_column("runs", sa.Column(f"{source}_jsonb", kind, sa.Computed(source, persisted=postgres)))


def downgrade() -> None:
    for source in SOURCES:
        op.execute(f"ALTER TABLE runs DROP COLUMN {source}_jsonb")
