"""Dedup clusters: one proposal for a group of identical or near-identical units.

``dedup_proposals.members`` (uuid[], NOT NULL): every unit the proposal is about, sorted; a
pair proposal holds its two units, a cluster proposal (N units whose vectors are at least
``RCLL_DEDUP_CLUSTER_MIN_COSINE`` apart, :mod:`rcll.store.dedup`) holds all N, and its
decision applies to all of them. ``unit_a``/``unit_b`` stay: a pair of the members (the pair
that opened the proposal), so the pair shape and its uniqueness hold. Backfill: ``members =
{unit_a, unit_b}``; a row inserted without ``members`` gets that pair too (trigger
``dedup_proposals_members_default``). A GIN index finds the proposals holding a unit.

Revision ID: 0021
Revises: 0020
"""

from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE dedup_proposals ADD COLUMN IF NOT EXISTS members uuid[]")
    op.execute("UPDATE dedup_proposals SET members = ARRAY[unit_a, unit_b] WHERE members IS NULL")
    op.execute("""
        CREATE OR REPLACE FUNCTION dedup_proposals_members_default() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            NEW.members := coalesce(NEW.members, ARRAY[NEW.unit_a, NEW.unit_b]);
            RETURN NEW;
        END $$""")
    op.execute("""
        CREATE TRIGGER dedup_proposals_members_default BEFORE INSERT ON dedup_proposals
        FOR EACH ROW EXECUTE FUNCTION dedup_proposals_members_default()""")
    op.execute("ALTER TABLE dedup_proposals ALTER COLUMN members SET NOT NULL")
    op.execute("ALTER TABLE dedup_proposals ADD CONSTRAINT dedup_proposals_members_pair "
               "CHECK (cardinality(members) >= 2 AND unit_a = ANY(members) "
               "AND unit_b = ANY(members))")
    op.execute("CREATE INDEX IF NOT EXISTS dedup_proposals_members ON dedup_proposals "
               "USING gin (members)")


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS dedup_proposals_members")
    op.execute("DROP TRIGGER IF EXISTS dedup_proposals_members_default ON dedup_proposals")
    op.execute("DROP FUNCTION IF EXISTS dedup_proposals_members_default()")
    op.execute("ALTER TABLE dedup_proposals DROP CONSTRAINT IF EXISTS dedup_proposals_members_pair")
    op.execute("ALTER TABLE dedup_proposals DROP COLUMN IF EXISTS members")
