"""The warm tier's LSH signature on every embedding row, and the index its shortlist reads.

- ``rcll_lsh_signature(vector) → bit(512)``: SimHash of the first 64 dimensions against 512
  fixed hyperplanes (:mod:`rcll.cascade.lsh`; seed ``0x52434C4C``; PL/pgSQL). The planes are written
  into the function as constants here, once: later code changes cannot make rows and queries
  disagree, because both get their signature from this function.
- ``memory_embeddings.lsh``: a ``STORED`` generated column (PostgreSQL 18 defaults to
  virtual, which cannot be indexed), so the write path is unchanged and the rewrite of the
  table fills the existing rows.
- ``memory_embeddings_bank_lsh (bank_id, model) INCLUDE (unit_id, lsh)``: the warm tier's
  shortlist (a bank's units nearest the query's signature in Hamming distance) is an
  index-only scan of the bank's entries (~110 bytes each), not a read of its heap rows
  (~1.6 kB each with the vector).
- ``unit_entities_entity (entity_id)`` dropped: ``unit_entities_entity_recent (entity_id, seq
  DESC)`` (0011) leads with the same column and serves every lookup it served. While both
  existed, the planner read a common entity's mentions through the first and sorted them
  all for "its N most recent" (the warm tier's drawer, the graph channel's hop 0): reading
  the most recent of a common entity's mentions took far longer that way
  (EXPLAIN ANALYZE, ``benchmarks/warm_tier.py`` ``big_bank``:
  docs/decisions/0007-hot-and-warm-tier-lookups.md).

Revision ID: 0016
Revises: 0015
"""

from alembic import op

from rcll.cascade.lsh import BITS, DIMS, FUNCTION, SEED, signature_function_sql

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(signature_function_sql(FUNCTION, BITS, DIMS, SEED))
    op.execute(f"ALTER TABLE memory_embeddings ADD COLUMN IF NOT EXISTS lsh bit({BITS}) "
               f"GENERATED ALWAYS AS ({FUNCTION}(embedding)) STORED")
    op.execute("CREATE INDEX IF NOT EXISTS memory_embeddings_bank_lsh "
               "ON memory_embeddings (bank_id, model) INCLUDE (unit_id, lsh)")
    op.execute("DROP INDEX IF EXISTS unit_entities_entity")


def downgrade() -> None:
    op.execute("CREATE INDEX IF NOT EXISTS unit_entities_entity ON unit_entities (entity_id)")
    op.execute("DROP INDEX IF EXISTS memory_embeddings_bank_lsh")
    op.execute("ALTER TABLE memory_embeddings DROP COLUMN IF EXISTS lsh")
    op.execute(f"DROP FUNCTION IF EXISTS {FUNCTION}(vector)")
