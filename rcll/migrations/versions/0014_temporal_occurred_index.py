"""Index for the temporal channel: a bank's units by occurrence start.

``memory_units (bank_id, occurred_start) WHERE occurred_start IS NOT NULL`` serves the
occurrence half of the temporal channel's window query (:mod:`rcll.search.temporal`); its
mention half uses ``memory_units_bank_mentioned`` (migration 0011).

Revision ID: 0014
Revises: 0012 (re-chained onto 0013 at merge)
"""

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE INDEX IF NOT EXISTS memory_units_bank_occurred
            ON memory_units (bank_id, occurred_start) WHERE occurred_start IS NOT NULL;
        """
    )


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS memory_units_bank_occurred;")
