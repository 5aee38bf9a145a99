"""Mental models (Hindsight's ``…/mental-models`` family): a named, stored reflect answer on
its ``source_query``, and the history of its contents.

- ``mental_models``: one row per model of a bank (``id`` unique within the bank), its name,
  query, tags and ``max_tokens``; ``content`` and ``reflect_response`` from the last
  refresh; ``seen_unit_ids``: every unit that refresh gave the language model (read back to
  withhold the content from a caller who may not see one of them); ``refreshed_by``: the
  member whose refresh wrote it.
- ``mental_model_history``: one row per refresh or clear (the content before and after).
  Deleting the model or its bank deletes both.

Revision ID: 0030
Revises: 0026
"""

from alembic import op

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        CREATE TABLE mental_models (
            bank_id            text NOT NULL REFERENCES memory_banks(id) ON DELETE CASCADE,
            id                 text NOT NULL,
            name               text NOT NULL,
            source_query       text NOT NULL,
            tags               text[] NOT NULL DEFAULT '{}',
            max_tokens         integer NOT NULL DEFAULT 2048,
            content            text,
            reflect_response   jsonb,
            seen_unit_ids      uuid[] NOT NULL DEFAULT '{}',
            refreshed_by       text,
            created_by         text,
            created_at         timestamptz NOT NULL DEFAULT now(),
            updated_at         timestamptz NOT NULL DEFAULT now(),
            last_refreshed_at  timestamptz,
            PRIMARY KEY (bank_id, id)
        );
        CREATE TABLE mental_model_history (
            seq                bigserial PRIMARY KEY,
            bank_id            text NOT NULL,
            mental_model_id    text NOT NULL,
            action             text NOT NULL CHECK (action IN ('refresh', 'clear')),
            previous_content   text,
            content            text,
            source_query       text NOT NULL,
            actor              text,
            at                 timestamptz NOT NULL DEFAULT now(),
            FOREIGN KEY (bank_id, mental_model_id) REFERENCES mental_models(bank_id, id)
                ON DELETE CASCADE
        );
        CREATE INDEX mental_model_history_model ON mental_model_history
            (bank_id, mental_model_id, seq DESC);
    """)


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS mental_model_history; DROP TABLE IF EXISTS mental_models;")
