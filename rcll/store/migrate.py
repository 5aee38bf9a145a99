"""Apply Alembic migrations programmatically (``rcll migrate``)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

from rcll.config import Settings

MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"


def alembic_config(url: str) -> Config:
    """An Alembic config for ``url`` (a ``postgresql://`` URL) using the packaged scripts."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", url.replace("postgresql://", "postgresql+psycopg://", 1))
    return cfg


def upgrade(settings: Settings, url: str | None = None, revision: str = "head") -> None:
    """Upgrade the database at ``url`` (default: the configured one) to ``revision``."""
    cfg = alembic_config(url or settings.db_url)
    cfg.attributes["embedding_dim"] = settings.embedding_dim
    command.upgrade(cfg, revision)


def heads() -> list[str]:
    """The migration heads; exactly one means the history cannot fork."""
    from alembic.script import ScriptDirectory

    return list(ScriptDirectory.from_config(alembic_config("postgresql://x/x")).get_heads())
