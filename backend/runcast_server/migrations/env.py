"""Alembic environment: the URL comes from Runcast's settings (or the caller's config)."""

from __future__ import annotations

from alembic import context
from runcast_server.core.db import make_engine
from runcast_server.core.settings import Settings
from runcast_server.tables import METADATA

config = context.config
# The caller's URL (core.migrate), else, for a bare `alembic` command, the environment's settings.
url = config.get_main_option("sqlalchemy.url") or Settings().sqlalchemy_url


def run_migrations_offline() -> None:
    context.configure(
        url=url, target_metadata=METADATA, literal_binds=True, render_as_batch=True
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    engine = make_engine(url)
    with engine.connect() as connection:
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            # A batch migration rebuilds a table (copy, drop, rename); with foreign keys
            # enforced, the drop would cascade and delete every row that references it.
            # The pragma only takes effect outside a transaction.
            connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
            connection.commit()
        context.configure(
            connection=connection, target_metadata=METADATA, render_as_batch=True
        )
        with context.begin_transaction():
            context.run_migrations()
        if sqlite:
            broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
            connection.exec_driver_sql("PRAGMA foreign_keys=ON")
            connection.commit()
            if broken:
                raise RuntimeError(f"migration left rows whose references are gone: {broken[:5]}")
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
