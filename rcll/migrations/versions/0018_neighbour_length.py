"""Each unit's neighbour length, kept by the database, for the lexical channel's context field.

The lexical channel scores a short unit with its temporal neighbours' words as a second
field (:data:`rcll.search.lexical._CONTEXT_SQL`, BM25F-style). Its document length is the
unit's own token count plus γ × Σ w · (the neighbour's token count) over its ``temporal``
links, either direction, at most ``CONTEXT_FANOUT`` (8) of them. Read at query time, that sum
cost two index scans of ``memory_links`` and a unit lookup per neighbour for every scored
unit — about 1 ms of a 2.6 ms channel on LoCoMo (EXPLAIN ANALYZE), the largest single part
of what the ``full`` recipe costs over ``hybrid``.

``memory_units.nb_len`` (real) stores Σ w · tsv_len of the unit's temporal neighbours (same
links, same cap of 8), or NULL when one of those neighbours has another audience or other
purposes than the unit: the channel counts only neighbours the caller may see, and a stored
sum is right for every caller only when the neighbours are visible exactly when the unit is.
A NULL is computed at query time as before. New units start at 0 (no links yet).

Kept up to date by triggers, whatever code path writes (retain stages, edits, forgetting,
document replacement, deletes):

- ``rcll_refresh_nb_len(uuid[])`` locks the given units in id order (two refreshes cannot
  deadlock each other), then recomputes them in a new statement — under READ COMMITTED its
  snapshot is taken after the locks, so a link another transaction committed meanwhile is
  seen. Units of a bank being deleted are neither locked nor updated (deleting a bank
  cascades to its links: nothing is left to keep).
- after INSERT or DELETE on ``memory_links`` (statement level, transition tables): the
  endpoints of the temporal links written or removed (cascaded deletes included);
- after an UPDATE of a unit's ``text``, ``audience`` or ``purposes`` that changes its
  ``tsv_len``, audience or purposes: the unit and its temporal neighbours.

The upgrade fills the column for every unit with a temporal link.

Revision ID: 0018
Revises: 0017
"""

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

FANOUT = 8  # rcll.search.lexical.CONTEXT_FANOUT when this was written


def upgrade() -> None:
    op.execute("ALTER TABLE memory_units ADD COLUMN IF NOT EXISTS nb_len real DEFAULT 0")
    op.execute(f"""
        CREATE OR REPLACE FUNCTION rcll_refresh_nb_len(ids uuid[]) RETURNS void
        LANGUAGE plpgsql AS $fn$
        BEGIN
          IF ids IS NULL OR cardinality(ids) = 0 THEN
            RETURN;
          END IF;
          PERFORM 1 FROM memory_units u
          WHERE u.id = ANY(ids) AND EXISTS (SELECT 1 FROM memory_banks b WHERE b.id = u.bank_id)
          ORDER BY u.id FOR NO KEY UPDATE OF u;
          UPDATE memory_units u SET nb_len = s.len
          FROM (
            SELECT x.id,
                   CASE WHEN bool_or(o.id IS NOT NULL AND (o.audience <> x.audience
                                                          OR o.purposes <> x.purposes))
                        THEN NULL
                        ELSE coalesce(sum(l.weight * o.tsv_len), 0) END AS len
            FROM memory_units x
            LEFT JOIN LATERAL (
                SELECT to_unit AS nb, weight FROM memory_links
                WHERE from_unit = x.id AND type = 'temporal'
                UNION ALL
                SELECT from_unit, weight FROM memory_links
                WHERE to_unit = x.id AND type = 'temporal'
                LIMIT {FANOUT}) l ON TRUE
            LEFT JOIN memory_units o ON o.id = l.nb
            WHERE x.id = ANY(ids)
              AND EXISTS (SELECT 1 FROM memory_banks b WHERE b.id = x.bank_id)
            GROUP BY x.id) s
          WHERE u.id = s.id AND u.nb_len IS DISTINCT FROM s.len;
        END
        $fn$;

        CREATE OR REPLACE FUNCTION rcll_links_nb_len() RETURNS trigger
        LANGUAGE plpgsql AS $fn$
        BEGIN
          PERFORM rcll_refresh_nb_len(ARRAY(
              SELECT from_unit FROM changed WHERE type = 'temporal'
              UNION SELECT to_unit FROM changed WHERE type = 'temporal'));
          RETURN NULL;
        END
        $fn$;

        CREATE OR REPLACE FUNCTION rcll_units_nb_len() RETURNS trigger
        LANGUAGE plpgsql AS $fn$
        BEGIN
          PERFORM rcll_refresh_nb_len(NEW.id || ARRAY(
              SELECT to_unit FROM memory_links WHERE from_unit = NEW.id AND type = 'temporal'
              UNION SELECT from_unit FROM memory_links
                    WHERE to_unit = NEW.id AND type = 'temporal'));
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

        SELECT rcll_refresh_nb_len(ARRAY(
            SELECT from_unit FROM memory_links WHERE type = 'temporal'
            UNION SELECT to_unit FROM memory_links WHERE type = 'temporal'));
    """)


def downgrade() -> None:
    op.execute("""
        DROP TRIGGER IF EXISTS memory_units_nb_len ON memory_units;
        DROP TRIGGER IF EXISTS memory_links_nb_len_delete ON memory_links;
        DROP TRIGGER IF EXISTS memory_links_nb_len_insert ON memory_links;
        DROP FUNCTION IF EXISTS rcll_units_nb_len();
        DROP FUNCTION IF EXISTS rcll_links_nb_len();
        DROP FUNCTION IF EXISTS rcll_refresh_nb_len(uuid[]);
        ALTER TABLE memory_units DROP COLUMN IF EXISTS nb_len;
    """)
