"""Dedup scan bookkeeping: when each bank was last scanned for duplicate pairs.

``dedup_scans.scanned_through`` is the creation time up to which every live unit of the bank
had a vector when the last scan ran (:mod:`rcll.consolidate.dedup`); the beat task enqueues a
scan for banks holding units created after it.

Revision ID: 0012
Revises: 0011
"""

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE dedup_scans (
            bank_id          text PRIMARY KEY REFERENCES memory_banks(id) ON DELETE CASCADE,
            scanned_through  timestamptz NOT NULL,
            scanned_at       timestamptz NOT NULL DEFAULT now(),
            units_compared   integer NOT NULL DEFAULT 0,
            proposals_added  integer NOT NULL DEFAULT 0
        );
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS dedup_scans")
