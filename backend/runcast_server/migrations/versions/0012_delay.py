"""Broadcast delay: each timeline event remembers the run version of the batch that stored it.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # NULL for events stored before: they were published when stored (policy/delay.py).
    with op.batch_alter_table("events") as batch:
        batch.add_column(sa.Column("version", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("events") as batch:
        batch.drop_column("version")
