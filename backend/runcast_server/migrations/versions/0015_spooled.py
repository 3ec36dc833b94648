"""Spool reports: how many of a segment's events wait in the trainer's local spool, and since when.

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("segments") as batch:
        batch.add_column(sa.Column("spooled_events", sa.BigInteger(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("spooled_at", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("segments") as batch:
        batch.drop_column("spooled_at")
        batch.drop_column("spooled_events")
