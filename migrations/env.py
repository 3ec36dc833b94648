"""Alembic environment: the URL comes from Runcast's settings (or the caller's config)."""

from __future__ import annotations

from alembic import context

from runcast_server.db import make_engine
from runcast_server.models import Base
from runcast_server.settings import get_settings

config = context.config
url = config.get_main_option("sqlalchemy.url") or get_settings().sqlalchemy_url


def run_migrations_offline() -> None:
    context.configure(
        url=url, target_metadata=Base.metadata, literal_binds=True, render_as_batch=True
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    engine = make_engine(url)
    with engine.connect() as connection:
        context.configure(
            connection=connection, target_metadata=Base.metadata, render_as_batch=True
        )
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
