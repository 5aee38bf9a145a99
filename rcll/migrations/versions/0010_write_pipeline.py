"""Write pipeline tables: entities and mentions, links, closets, proposals, LLM accounting.

Spec §3: ``entities`` (global UUID per bank, normalised name, aliases) with ``unit_entities``
(mentions); ``memory_links`` written once, never edited; ``closets`` (summaries of a room ×
hall group); ``dedup_proposals`` and ``entity_merge_proposals`` (nothing merges silently,
claim 6) with ``entity_history`` for merges and splits. ``memory_units`` gains the kinds
extraction produces, the extraction prompt version and the entity names the extractor
named; ``jobs`` gains LLM usage; ``job_item_errors`` keeps each failing item's reason and
raw LLM reply (claim 7). The chunk-and-store stage is now called ``chunk``.

Revision ID: 0010
Revises: 0009
"""

from alembic import context, op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    dim = int(context.config.attributes.get("embedding_dim", 384))
    op.execute(
        """
        ALTER TABLE memory_units DROP CONSTRAINT IF EXISTS memory_units_kind_check;
        ALTER TABLE memory_units ADD CONSTRAINT memory_units_kind_check CHECK (kind IN
            ('fact', 'note', 'decision', 'preference', 'event', 'summary', 'chunk'));
        ALTER TABLE memory_units
            ADD COLUMN extraction_version text,
            ADD COLUMN entity_names text[] NOT NULL DEFAULT '{}';

        ALTER TABLE jobs ADD COLUMN llm_usage jsonb NOT NULL DEFAULT '{}'::jsonb;
        UPDATE jobs SET stage = 'chunk' WHERE stage = 'extract';

        CREATE TABLE job_item_errors (
            id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            job_id      uuid NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
            stage       text NOT NULL,
            item_index  integer,
            unit_id     uuid,
            error       text NOT NULL,
            raw_reply   text,
            created_at  timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX job_item_errors_job ON job_item_errors (job_id, id);

        CREATE TABLE entities (
            id              uuid PRIMARY KEY DEFAULT uuidv7(),
            bank_id         text NOT NULL REFERENCES memory_banks(id) ON DELETE CASCADE,
            name            text NOT NULL,
            normalized      text NOT NULL,
            entity_type     text NOT NULL DEFAULT 'other',
            aliases         text[] NOT NULL DEFAULT '{}',
            merged_into_id  uuid REFERENCES entities(id) ON DELETE SET NULL,
            created_at      timestamptz NOT NULL DEFAULT now(),
            updated_at      timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX entities_bank_normalized ON entities (bank_id, normalized);
        CREATE INDEX entities_merged_into ON entities (merged_into_id)
            WHERE merged_into_id IS NOT NULL;
        CREATE INDEX entities_normalized_trgm ON entities USING gin (normalized gin_trgm_ops);
        CREATE INDEX entities_aliases ON entities USING gin (aliases);

        CREATE TABLE unit_entities (
            unit_id    uuid NOT NULL REFERENCES memory_units(id) ON DELETE CASCADE,
            entity_id  uuid NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
            bank_id    text NOT NULL REFERENCES memory_banks(id) ON DELETE CASCADE,
            mention    text NOT NULL,
            source     text NOT NULL DEFAULT 'deterministic',
            PRIMARY KEY (unit_id, entity_id)
        );
        CREATE INDEX unit_entities_entity ON unit_entities (entity_id);
        CREATE INDEX unit_entities_bank ON unit_entities (bank_id);

        CREATE TABLE entity_merge_proposals (
            id          uuid PRIMARY KEY DEFAULT uuidv7(),
            bank_id     text NOT NULL REFERENCES memory_banks(id) ON DELETE CASCADE,
            entity_a    uuid NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
            entity_b    uuid NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
            score       real NOT NULL,
            reason      text NOT NULL,
            state       text NOT NULL DEFAULT 'open'
                        CHECK (state IN ('open', 'merged', 'rejected')),
            decided_by  text,
            decided_at  timestamptz,
            created_at  timestamptz NOT NULL DEFAULT now(),
            CHECK (entity_a < entity_b),
            UNIQUE (entity_a, entity_b)
        );
        CREATE INDEX entity_merge_proposals_bank ON entity_merge_proposals (bank_id, state);
        CREATE INDEX entity_merge_proposals_b ON entity_merge_proposals (entity_b);

        CREATE TABLE entity_history (
            id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            bank_id     text NOT NULL REFERENCES memory_banks(id) ON DELETE CASCADE,
            entity_id   uuid NOT NULL,
            action      text NOT NULL,
            detail      jsonb NOT NULL DEFAULT '{}'::jsonb,
            actor       text,
            created_at  timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX entity_history_entity ON entity_history (entity_id, id);
        CREATE INDEX entity_history_bank ON entity_history (bank_id);

        CREATE TABLE memory_links (
            from_unit   uuid NOT NULL REFERENCES memory_units(id) ON DELETE CASCADE,
            to_unit     uuid NOT NULL REFERENCES memory_units(id) ON DELETE CASCADE,
            bank_id     text NOT NULL REFERENCES memory_banks(id) ON DELETE CASCADE,
            type        text NOT NULL CHECK (type IN ('temporal', 'semantic', 'entity', 'causal',
                                                      'derived_from', 'about', 'supersedes')),
            weight      real NOT NULL DEFAULT 1.0,
            created_at  timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (from_unit, to_unit, type),
            CHECK (from_unit <> to_unit)
        );
        CREATE INDEX memory_links_to ON memory_links (to_unit, type);
        CREATE INDEX memory_links_bank ON memory_links (bank_id);

        CREATE TABLE dedup_proposals (
            id          uuid PRIMARY KEY DEFAULT uuidv7(),
            bank_id     text NOT NULL REFERENCES memory_banks(id) ON DELETE CASCADE,
            unit_a      uuid NOT NULL REFERENCES memory_units(id) ON DELETE CASCADE,
            unit_b      uuid NOT NULL REFERENCES memory_units(id) ON DELETE CASCADE,
            cosine      real NOT NULL,
            state       text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'merged', 'kept')),
            decided_by  text,
            decided_at  timestamptz,
            created_at  timestamptz NOT NULL DEFAULT now(),
            CHECK (unit_a < unit_b),
            UNIQUE (unit_a, unit_b)
        );
        CREATE INDEX dedup_proposals_bank ON dedup_proposals (bank_id, state);
        CREATE INDEX dedup_proposals_b ON dedup_proposals (unit_b);
        """
    )
    op.execute(
        f"""
        CREATE TABLE closets (
            id               uuid PRIMARY KEY DEFAULT uuidv7(),
            bank_id          text NOT NULL REFERENCES memory_banks(id) ON DELETE CASCADE,
            room             text NOT NULL,
            hall             text NOT NULL,
            summary          text NOT NULL,
            unit_id          uuid REFERENCES memory_units(id) ON DELETE SET NULL,
            embedding        vector({dim}),
            model            text,
            prompt_version   text,
            source_unit_ids  uuid[] NOT NULL,
            job_id           uuid REFERENCES jobs(id) ON DELETE SET NULL,
            created_at       timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX closets_bank_group ON closets (bank_id, room, hall, created_at DESC);
        CREATE INDEX closets_unit ON closets (unit_id);
        CREATE INDEX closets_job ON closets (job_id);
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP TABLE IF EXISTS closets, dedup_proposals, memory_links, entity_history,
            entity_merge_proposals, unit_entities, entities, job_item_errors;
        UPDATE jobs SET stage = 'extract' WHERE stage = 'chunk';
        ALTER TABLE jobs DROP COLUMN llm_usage;
        ALTER TABLE memory_units DROP COLUMN extraction_version, DROP COLUMN entity_names;
        ALTER TABLE memory_units DROP CONSTRAINT IF EXISTS memory_units_kind_check;
        ALTER TABLE memory_units ADD CONSTRAINT memory_units_kind_check CHECK (kind IN
            ('fact', 'note', 'decision', 'summary', 'chunk'));
        """
    )
