"""Entity resolution's fuzzy match through a GIN trigram index per bank, whatever the planner's statistics.

:func:`rcll.store.entities.resolve` looks up, for each new name of a batch, the bank's live
entities whose ``normalized`` name is trigram-similar (``e.bank_id = … AND
e.merged_into_id IS NULL AND e.normalized % name``). Two things made that lookup most of a
document ingest's ``entities`` stage, and the bank's entity lock was held while it ran:

- the GiST index of 0024 keeps a lossy signature per name, so each search walks many
  pages; a GIN index on ``(bank_id, normalized gin_trgm_ops)`` (``btree_gin`` gives GIN its
  ``=`` on text) answers from the posting lists of the name's trigrams intersected with the
  bank's, with ``fastupdate = off`` as the lexical index (0008): no pending list that every
  search reads. It is not partial, so it also serves every other ``bank_id = …`` read of
  the table (the entity list with merged entities);
- the b-tree ``(bank_id, normalized)`` of 0010 let the planner answer ``bank_id = …`` from
  it and compare the name with every entity of the bank — its choice whenever the
  statistics say the bank is small: a new bank, or any bank in the minute after a large
  delete, before autovacuum analyzes the table again (3.9 s against 0.2 s for a batch of a
  4,000-entity bank). A b-tree that holds ``bank_id`` at all offers that plan (a
  ``(normalized, bank_id)`` one as a scan of the whole index), so the b-tree becomes
  ``(normalized)``: exact name lookups (``normalized = ANY(…)``, resolution and the recall
  path's entity drawer) use it or the GIN index's ``bank_id``, and a bank's entities are
  read only through the GIN index (or a sequential scan, which
  :func:`rcll.store.entities.resolve` turns off for its fuzzy match).

Both are contrib extensions of PostgreSQL. Measured:
docs/decisions/0020-document-ingest-processes-and-entity-index.md.

Revision ID: 0031
Revises: 0030
"""

from alembic import op

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS btree_gin")
    op.execute("""CREATE INDEX IF NOT EXISTS entities_bank_normalized_gin ON entities
                  USING gin (bank_id, normalized gin_trgm_ops) WITH (fastupdate = off)""")
    op.execute("CREATE INDEX IF NOT EXISTS entities_normalized ON entities (normalized)")
    op.execute("DROP INDEX IF EXISTS entities_bank_normalized_trgm")
    op.execute("DROP INDEX IF EXISTS entities_bank_normalized")


def downgrade() -> None:
    op.execute("CREATE INDEX IF NOT EXISTS entities_bank_normalized ON entities "
               "(bank_id, normalized)")
    op.execute("""CREATE INDEX IF NOT EXISTS entities_bank_normalized_trgm ON entities
                  USING gist (bank_id, normalized gist_trgm_ops)
                  WHERE merged_into_id IS NULL""")
    op.execute("DROP INDEX IF EXISTS entities_normalized")
    op.execute("DROP INDEX IF EXISTS entities_bank_normalized_gin")
