"""Indexes for the entities stage: mention order per entity, bank timeline by mention time.

``unit_entities.seq`` (an identity, the order mentions were written) with an index on
``(entity_id, seq DESC)`` lets the entities stage find the few most recent mentions of an
entity without reading all of them (entity links, bounded per mention).
``memory_units (bank_id, mentioned_at, created_at)`` serves temporal links (the units just
before a unit on its bank's timeline).

Revision ID: 0011
Revises: 0010
"""

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        ALTER TABLE unit_entities ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY;
        CREATE INDEX unit_entities_entity_recent ON unit_entities (entity_id, seq DESC);
        CREATE INDEX memory_units_bank_mentioned ON memory_units (bank_id, mentioned_at, created_at)
            WHERE mentioned_at IS NOT NULL;
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP INDEX IF EXISTS memory_units_bank_mentioned;
        DROP INDEX IF EXISTS unit_entities_entity_recent;
        ALTER TABLE unit_entities DROP COLUMN seq;
        """
    )
