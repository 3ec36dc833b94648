"""The inbox row's run (``ingest_inbox.run_id``): the detectors take a run's batches in the order
the API accepted them, whichever worker stored which first (``inbox.process``). NULL for a row
accepted before this revision, and for a batch of several runs (such rows are detected as stored).

Revision ID: 0026
Revises: 0025
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None

_WAITING = sa.text("state IN ('pending', 'stored')")


def upgrade() -> None:
    with op.batch_alter_table("ingest_inbox") as batch:
        batch.add_column(sa.Column("run_id", sa.String(length=64), nullable=True))
    # Only the rows still on their way: the detectors' queue of a run, read once per batch.
    op.create_index("ix_ingest_inbox_run_waiting", "ingest_inbox", ["run_id", "id"],
                    postgresql_where=_WAITING, sqlite_where=_WAITING)


def downgrade() -> None:
    op.drop_index("ix_ingest_inbox_run_waiting", table_name="ingest_inbox")
    with op.batch_alter_table("ingest_inbox") as batch:
        batch.drop_column("run_id")
