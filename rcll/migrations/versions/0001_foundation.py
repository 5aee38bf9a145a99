"""Foundation schema: banks, documents, chunks, memory units, embeddings, jobs (spec §3).

Revision ID: 0001
Revises:
"""

from alembic import context, op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    # The embedding column's width comes from the configured embedder (spec §3); the
    # migration runner passes it in, 384 (all-MiniLM-L6-v2) by default.
    dim = int(context.config.attributes.get("embedding_dim", 384))
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    op.execute(
        """
        CREATE TABLE memory_banks (
            id          text PRIMARY KEY,
            name        text NOT NULL,
            config      jsonb NOT NULL DEFAULT '{}'::jsonb,
            created_at  timestamptz NOT NULL DEFAULT now()
        );

        CREATE TABLE documents (
            id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
            bank_id       text NOT NULL REFERENCES memory_banks(id) ON DELETE CASCADE,
            document_id   text NOT NULL,
            content_hash  text NOT NULL,
            metadata      jsonb NOT NULL DEFAULT '{}'::jsonb,
            created_at    timestamptz NOT NULL DEFAULT now(),
            updated_at    timestamptz NOT NULL DEFAULT now(),
            UNIQUE (bank_id, document_id)
        );

        CREATE TABLE chunks (
            id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
            document_id   uuid NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            index         integer NOT NULL,
            text          text NOT NULL,
            content_hash  text NOT NULL,
            UNIQUE (document_id, content_hash)
        );

        CREATE TABLE memory_units (
            id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
            bank_id             text NOT NULL REFERENCES memory_banks(id) ON DELETE CASCADE,
            document_id         uuid REFERENCES documents(id) ON DELETE CASCADE,
            chunk_id            uuid REFERENCES chunks(id) ON DELETE CASCADE,
            chunk_hash          text,
            job_id              uuid,
            kind                text NOT NULL DEFAULT 'chunk'
                                CHECK (kind IN ('fact', 'note', 'decision', 'summary', 'chunk')),
            text                text NOT NULL,
            context             text,
            room                text NOT NULL DEFAULT 'general',
            hall                text NOT NULL DEFAULT 'fact',
            layer               smallint NOT NULL DEFAULT 2 CHECK (layer BETWEEN 0 AND 3),
            audience            text NOT NULL DEFAULT 'bank',
            purposes            text[] NOT NULL DEFAULT ARRAY['assist','operate','audit','personal'],
            origin              text NOT NULL DEFAULT 'told'
                                CHECK (origin IN ('told', 'derived', 'migrated')),
            confidence          real NOT NULL DEFAULT 1.0,
            revision            integer NOT NULL DEFAULT 1,
            superseded_by_id    uuid REFERENCES memory_units(id),
            invalidated_reason  text,
            occurred_start      timestamptz,
            occurred_end        timestamptz,
            mentioned_at        timestamptz,
            created_at          timestamptz NOT NULL DEFAULT now(),
            metadata            jsonb NOT NULL DEFAULT '{}'::jsonb,
            tags                text[] NOT NULL DEFAULT '{}',
            tsv                 tsvector GENERATED ALWAYS AS
                                (to_tsvector('english'::regconfig, text)) STORED
        );
        CREATE UNIQUE INDEX memory_units_idempotency
            ON memory_units (bank_id, document_id, chunk_hash);
        CREATE INDEX memory_units_bank ON memory_units (bank_id, created_at);
        CREATE INDEX memory_units_bank_room_hall ON memory_units (bank_id, room, hall);
        CREATE INDEX memory_units_tsv ON memory_units USING gin (tsv);
        """
    )
    op.execute(
        f"""
        CREATE TABLE memory_embeddings (
            unit_id      uuid NOT NULL REFERENCES memory_units(id) ON DELETE CASCADE,
            bank_id      text NOT NULL REFERENCES memory_banks(id) ON DELETE CASCADE,
            model        text NOT NULL,
            input_stamp  text NOT NULL,
            embedding    vector({dim}) NOT NULL,
            created_at   timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (unit_id, model)
        );
        CREATE INDEX memory_embeddings_bank ON memory_embeddings (bank_id);
        -- One HNSW cosine index for every bank; recall filters by bank (spec §3).
        CREATE INDEX memory_embeddings_hnsw
            ON memory_embeddings USING hnsw (embedding vector_cosine_ops);
        """
    )
    op.execute(
        """
        CREATE TABLE jobs (
            id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
            bank_id          text NOT NULL REFERENCES memory_banks(id) ON DELETE CASCADE,
            kind             text NOT NULL,
            state            text NOT NULL DEFAULT 'queued'
                             CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'partial')),
            stage            text,
            payload          jsonb,
            counts           jsonb NOT NULL DEFAULT '{}'::jsonb,
            error            text,
            attempts         integer NOT NULL DEFAULT 0,
            idempotency_key  text,
            created_at       timestamptz NOT NULL DEFAULT now(),
            updated_at       timestamptz NOT NULL DEFAULT now(),
            started_at       timestamptz,
            finished_at      timestamptz,
            UNIQUE (bank_id, idempotency_key)
        );
        CREATE INDEX jobs_bank_created ON jobs (bank_id, created_at DESC);
        CREATE INDEX jobs_state ON jobs (state) WHERE state IN ('queued', 'running');
        """
    )


def downgrade() -> None:
    op.execute(
        "DROP TABLE IF EXISTS jobs, memory_embeddings, memory_units, chunks, documents, "
        "memory_banks CASCADE"
    )
