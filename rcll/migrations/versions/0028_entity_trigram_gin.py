"""Entity resolution's fuzzy match through a GIN trigram index per bank.

:func:`rcll.store.entities.resolve` looks up, for each new name of a batch, the bank's live
entities whose ``normalized`` name is trigram-similar (``e.bank_id = … AND
e.merged_into_id IS NULL AND e.normalized % name``). Migration 0024 gave it a GiST index on
``(bank_id, normalized gist_trgm_ops)``; a GiST trigram index keeps a lossy signature per
name and walks many pages per search, and with a document bank (thousands of new names per
ingest) that search was most of the entities stage and held the bank's entity lock while it
ran. A GIN index on ``(bank_id, normalized gin_trgm_ops)`` (``btree_gin`` gives GIN its ``=``
on text) answers the same predicate from the posting lists of the name's trigrams,
intersected with the bank's; ``fastupdate = off`` as for the lexical index (0008): no
pending list that every search reads. Both are contrib extensions of PostgreSQL. Measured:
docs/decisions/0022-document-ingest-at-the-embedders-rate.md.

Revision ID: 0028
Revises: 0024
"""

from alembic import op

revision = "0028"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS btree_gin")
    op.execute("""CREATE INDEX IF NOT EXISTS entities_bank_normalized_gin ON entities
                  USING gin (bank_id, normalized gin_trgm_ops) WITH (fastupdate = off)
                  WHERE merged_into_id IS NULL""")
    op.execute("DROP INDEX IF EXISTS entities_bank_normalized_trgm")


def downgrade() -> None:
    op.execute("""CREATE INDEX IF NOT EXISTS entities_bank_normalized_trgm ON entities
                  USING gist (bank_id, normalized gist_trgm_ops)
                  WHERE merged_into_id IS NULL""")
    op.execute("DROP INDEX IF EXISTS entities_bank_normalized_gin")
