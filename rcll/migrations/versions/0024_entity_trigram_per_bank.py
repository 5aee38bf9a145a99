"""Entity resolution's fuzzy match searches one bank's entities through an index.

:func:`rcll.store.entities.resolve` looks up, for each new name of a batch, the bank's
live entities whose ``normalized`` name is trigram-similar (``e.bank_id = … AND
e.merged_into_id IS NULL AND e.normalized % name``). The GIN index of migration 0010 is on
``normalized`` alone, over every bank, so the planner scanned the bank's rows through the
``(bank_id, normalized)`` b-tree and compared each name with every entity of the bank: the
cost of a batch grew with the bank's size. A GiST index on ``(bank_id, normalized
gist_trgm_ops)`` over live entities answers the same predicate in one index search per name
(``btree_gist`` gives GiST its ``=`` on text; both are contrib extensions of PostgreSQL).
Measured: docs/decisions/0020-document-ingest-processes-and-entity-index.md.

Revision ID: 0024
Revises: 0023
"""

from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS btree_gist")
    op.execute("""CREATE INDEX entities_bank_normalized_trgm ON entities
                  USING gist (bank_id, normalized gist_trgm_ops)
                  WHERE merged_into_id IS NULL""")
    op.execute("DROP INDEX IF EXISTS entities_normalized_trgm")


def downgrade() -> None:
    op.execute("CREATE INDEX entities_normalized_trgm ON entities "
               "USING gin (normalized gin_trgm_ops)")
    op.execute("DROP INDEX IF EXISTS entities_bank_normalized_trgm")
