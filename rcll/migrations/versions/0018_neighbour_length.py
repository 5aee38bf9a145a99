"""Each unit's neighbour length, stored, for the lexical channel's context field.

The lexical channel scores a short unit with its temporal neighbours' words as a second
field (:data:`rcll.search.lexical._CONTEXT_SQL`, BM25F-style). Its document length is the
unit's own token count plus γ × Σ w · (the neighbour's token count) over its ``temporal``
links, either direction, the first ``CONTEXT_FANOUT`` (8) by neighbour id. Read at query
time, that sum cost two index scans of ``memory_links`` and a unit lookup per neighbour for
every scored unit — the largest single part of what the ``full`` recipe cost over
``hybrid`` (docs/decisions/0004-latency-of-full.md).

- ``memory_units.nb_len`` (real): Σ w · tsv_len over those neighbours, or NULL when one of
  them has another audience or other purposes than the unit (the channel counts only
  neighbours the caller may see; a stored sum is right for every caller only when the
  neighbours are visible exactly when the unit is). New units start at 0 (no links yet).
- ``nb_len_stale (unit_id)``: units whose stored sum may be out of date. Writers never lock
  or update another unit's row (that deadlocked two concurrent edits of neighbouring units):
  triggers only append the ids a write affects, in the writer's own transaction —
  after INSERT or DELETE on ``memory_links`` (statement level, transition tables; cascaded
  deletes included) the endpoints of the temporal links; after an UPDATE of a unit's
  ``text``, ``audience`` or ``purposes`` that changes its ``tsv_len``, audience or purposes,
  the unit and its temporal neighbours. A reader trusts ``nb_len`` only for a unit with no
  stale row, else sums at query time as before.
- ``rcll_drain_nb_len(limit)``: recomputes up to ``limit`` stale units and deletes the stale
  rows it saw, in one statement — one snapshot, so a change committed after it started left
  a stale row it did not see and stays marked. It locks with ``SKIP LOCKED`` and never
  waits: a unit another transaction holds stays stale for the next run. Called after each
  batch of the retain pipeline's entity stage and by the beat sweep
  (:func:`rcll.store.neighbour_length.drain`).

Writes the triggers do not see: ``UPDATE`` of a link's weight or type, ``TRUNCATE
memory_links``, a change of ``tsv_len``'s expression; no code does these — a migration that
does must mark the affected units stale.

The upgrade computes the column for every unit with a temporal link.

Revision ID: 0018
Revises: 0017
"""

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

FANOUT = 8  # rcll.search.lexical.CONTEXT_FANOUT when this was written

# Σ w · tsv_len over the first FANOUT temporal neighbours (by id) of each unit ``x`` that
# ``{units}`` selects; NULL when a neighbour's audience or purposes differ.
_SUM = f"""
    SELECT x.id,
           CASE WHEN bool_or(o.id IS NOT NULL AND (o.audience <> x.audience
                                                  OR o.purposes <> x.purposes))
                THEN NULL
                ELSE coalesce(sum(l.weight * o.tsv_len), 0) END AS len
    FROM memory_units x
    LEFT JOIN LATERAL (
        SELECT nb, weight FROM (
            SELECT to_unit AS nb, weight FROM memory_links
            WHERE from_unit = x.id AND type = 'temporal'
            UNION ALL
            SELECT from_unit, weight FROM memory_links
            WHERE to_unit = x.id AND type = 'temporal') a
        ORDER BY nb LIMIT {FANOUT}) l ON TRUE
    LEFT JOIN memory_units o ON o.id = l.nb
    WHERE x.id IN ({{units}})
    GROUP BY x.id"""


def upgrade() -> None:
    op.execute("ALTER TABLE memory_units ADD COLUMN IF NOT EXISTS nb_len real DEFAULT 0")
    op.execute("CREATE TABLE IF NOT EXISTS nb_len_stale (unit_id uuid NOT NULL)")
    op.execute("CREATE INDEX IF NOT EXISTS nb_len_stale_unit ON nb_len_stale (unit_id)")
    op.execute(f"""
        CREATE OR REPLACE FUNCTION rcll_drain_nb_len(lim integer DEFAULT 1000) RETURNS integer
        LANGUAGE sql AS $fn$
          WITH st AS MATERIALIZED (SELECT ctid AS c, unit_id FROM nb_len_stale LIMIT lim),
          lk AS MATERIALIZED (
              SELECT u.id FROM memory_units u WHERE u.id IN (SELECT unit_id FROM st)
              ORDER BY u.id FOR NO KEY UPDATE SKIP LOCKED),
          s AS MATERIALIZED ({_SUM.format(units="SELECT id FROM lk")}),
          up AS (UPDATE memory_units u SET nb_len = s.len FROM s
                 WHERE u.id = s.id AND u.nb_len IS DISTINCT FROM s.len RETURNING u.id),
          del AS (DELETE FROM nb_len_stale t USING st
                  WHERE t.ctid = st.c
                    AND (st.unit_id IN (SELECT id FROM lk)
                         OR NOT EXISTS (SELECT 1 FROM memory_units u WHERE u.id = st.unit_id))
                  RETURNING 1)
          SELECT (SELECT count(*) FROM del)::integer + 0 * (SELECT count(*) FROM up)::integer
        $fn$;

        CREATE OR REPLACE FUNCTION rcll_links_nb_len() RETURNS trigger
        LANGUAGE plpgsql AS $fn$
        BEGIN
          INSERT INTO nb_len_stale (unit_id)
          SELECT from_unit FROM changed WHERE type = 'temporal'
          UNION SELECT to_unit FROM changed WHERE type = 'temporal';
          RETURN NULL;
        END
        $fn$;

        CREATE OR REPLACE FUNCTION rcll_units_nb_len() RETURNS trigger
        LANGUAGE plpgsql AS $fn$
        BEGIN
          INSERT INTO nb_len_stale (unit_id)
          SELECT NEW.id
          UNION SELECT to_unit FROM memory_links WHERE from_unit = NEW.id AND type = 'temporal'
          UNION SELECT from_unit FROM memory_links WHERE to_unit = NEW.id AND type = 'temporal';
          RETURN NULL;
        END
        $fn$;

        DROP TRIGGER IF EXISTS memory_links_nb_len_insert ON memory_links;
        CREATE TRIGGER memory_links_nb_len_insert AFTER INSERT ON memory_links
            REFERENCING NEW TABLE AS changed
            FOR EACH STATEMENT EXECUTE FUNCTION rcll_links_nb_len();
        DROP TRIGGER IF EXISTS memory_links_nb_len_delete ON memory_links;
        CREATE TRIGGER memory_links_nb_len_delete AFTER DELETE ON memory_links
            REFERENCING OLD TABLE AS changed
            FOR EACH STATEMENT EXECUTE FUNCTION rcll_links_nb_len();
        DROP TRIGGER IF EXISTS memory_units_nb_len ON memory_units;
        CREATE TRIGGER memory_units_nb_len AFTER UPDATE OF text, audience, purposes
            ON memory_units FOR EACH ROW
            WHEN (OLD.tsv_len IS DISTINCT FROM NEW.tsv_len
                  OR OLD.audience IS DISTINCT FROM NEW.audience
                  OR OLD.purposes IS DISTINCT FROM NEW.purposes)
            EXECUTE FUNCTION rcll_units_nb_len();

        UPDATE memory_units u SET nb_len = s.len
        FROM ({_SUM.format(units='''SELECT from_unit FROM memory_links WHERE type = 'temporal'
                                    UNION SELECT to_unit FROM memory_links
                                    WHERE type = 'temporal' ''')}) s
        WHERE u.id = s.id;
    """)


def downgrade() -> None:
    op.execute("""
        DROP TRIGGER IF EXISTS memory_units_nb_len ON memory_units;
        DROP TRIGGER IF EXISTS memory_links_nb_len_delete ON memory_links;
        DROP TRIGGER IF EXISTS memory_links_nb_len_insert ON memory_links;
        DROP FUNCTION IF EXISTS rcll_units_nb_len();
        DROP FUNCTION IF EXISTS rcll_links_nb_len();
        DROP FUNCTION IF EXISTS rcll_refresh_nb_len(uuid[]);
        DROP FUNCTION IF EXISTS rcll_drain_nb_len(integer);
        DROP TABLE IF EXISTS nb_len_stale;
        ALTER TABLE memory_units DROP COLUMN IF EXISTS nb_len;
    """)
