"""Schema management through Alembic: the only way tables are made."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

# Part of the package (runcast_server/migrations), in a checkout and in a wheel alike.
MIGRATIONS_DIR = Path(__file__).resolve().parents[1] / "migrations"


def alembic_config(url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    """Bring the database at ``url`` to ``revision``."""
    command.upgrade(alembic_config(url), revision)


def head_revision(url: str) -> str | None:
    return ScriptDirectory.from_config(alembic_config(url)).get_current_head()


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


class SchemaOutOfDate(RuntimeError):
    """The database is not at the head migration."""


def check_schema(engine: Engine) -> None:
    """Refuse to serve a database that is not at the head revision."""
    url = engine.url.render_as_string(hide_password=False)
    current, head = current_revision(engine), head_revision(url)
    if current != head:
        raise SchemaOutOfDate(
            f"database is at revision {current or 'none'}, this Runcast needs {head}: run `runcast db upgrade`"
        )
