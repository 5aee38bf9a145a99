"""Vector search cost follows the bank asked: no HNSW index over every bank.

The one HNSW index over all banks made every vector insert an HNSW insert into a graph the
size of the database (84 rows/s at 300k units, 64 at 1M) and gave mid-size banks a filtered
graph walk or an exact scan through it. Now small banks are searched exactly through the
``bank_id`` btree and banks from ``rcll.store.vector_index.DEFAULT_MIN_UNITS`` vectors up get
their own partial HNSW index from the maintenance task (``ensure_bank_indexes``). Figures:
docs/decisions/0009-vector-index-per-bank.md (benchmarks/scale.py).

New unit ids are time-ordered (``uuidv7()``, PostgreSQL 18) instead of random, so the
primary keys of memory_units and memory_embeddings (unit_id, model) grow at their right edge
instead of touching (and logging a full-page image of) a random leaf per row: embedding
writes into a new bank at 1M units went from 0.65x to 0.83x the rate at 10k units.

Revision ID: 0007
Revises: 0006
"""

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("DROP INDEX IF EXISTS memory_embeddings_hnsw")
    op.execute("CREATE INDEX IF NOT EXISTS memory_embeddings_bank_model "
               "ON memory_embeddings (bank_id, model)")
    op.execute("DROP INDEX IF EXISTS memory_embeddings_bank")
    op.execute("DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_proc WHERE proname = 'uuidv7') THEN "
               "ALTER TABLE memory_units ALTER COLUMN id SET DEFAULT uuidv7(); END IF; END $$")


def downgrade() -> None:
    op.execute("ALTER TABLE memory_units ALTER COLUMN id SET DEFAULT gen_random_uuid()")
    op.execute("CREATE INDEX IF NOT EXISTS memory_embeddings_bank ON memory_embeddings (bank_id)")
    op.execute("DROP INDEX IF EXISTS memory_embeddings_bank_model")
    op.execute("DO $$ DECLARE r record; BEGIN FOR r IN SELECT indexname FROM pg_indexes "
               "WHERE indexname LIKE 'memory_embeddings_hnsw_b_%' LOOP "
               "EXECUTE format('DROP INDEX %I', r.indexname); END LOOP; END $$")
    op.execute("CREATE INDEX IF NOT EXISTS memory_embeddings_hnsw "
               "ON memory_embeddings USING hnsw (embedding vector_cosine_ops)")
