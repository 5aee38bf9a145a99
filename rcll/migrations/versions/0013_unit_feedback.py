"""Memory Worth: success/failure outcomes per unit (spec §3 ``unit_feedback``, §5).

One row per unit that has received feedback; ``POST …/memories/{unit_id}/feedback`` adds one
outcome atomically (:mod:`rcll.store.feedback`); recall's ``worth`` step reads it. Deleting
the unit or its bank deletes the row.

Revision ID: 0013
Revises: 0012
"""

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE unit_feedback (
            unit_id     uuid PRIMARY KEY REFERENCES memory_units(id) ON DELETE CASCADE,
            bank_id     text NOT NULL REFERENCES memory_banks(id) ON DELETE CASCADE,
            success     integer NOT NULL DEFAULT 0 CHECK (success >= 0),
            failure     integer NOT NULL DEFAULT 0 CHECK (failure >= 0),
            updated_at  timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX unit_feedback_bank ON unit_feedback (bank_id);
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS unit_feedback")
