"""Index for the L0 step: a bank's layer-0 units, newest first.

``memory_units (bank_id, created_at DESC, id) WHERE layer = 0`` serves
:func:`rcll.search.post.l0_step`, which every recall runs (the spec's "L0 units of the bank
are always included"). Without it the step read every unit of the bank to find the few
(usually none) of layer 0 (docs/decisions/0027-overlap-when-idle.md).

Revision ID: 0033
Revises: 0032
"""

from alembic import op

revision = "0033"
down_revision = "0032"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE INDEX IF NOT EXISTS memory_units_bank_l0
            ON memory_units (bank_id, created_at DESC, id) WHERE layer = 0;
        """
    )


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS memory_units_bank_l0;")
