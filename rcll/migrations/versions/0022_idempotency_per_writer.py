"""Idempotency keys belong to the member who sent them, not to the whole bank.

``jobs`` was unique on ``(bank_id, idempotency_key)``: a member reusing a key another member
of the bank had used got 409 ``idempotency_key_reused`` and lost its write, and learnt that
someone had used that key (a key nobody used succeeds). Now a key is unique per
``(bank_id, submitted_by, idempotency_key)`` — ``submitted_by`` NULL (auth off, internal
calls) is one writer (``NULLS NOT DISTINCT``) — over the jobs that carry a key.

Revision ID: 0022
Revises: 0021
"""

from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        ALTER TABLE jobs DROP CONSTRAINT IF EXISTS jobs_bank_id_idempotency_key_key;
        CREATE UNIQUE INDEX jobs_idempotency_per_writer
            ON jobs (bank_id, submitted_by, idempotency_key) NULLS NOT DISTINCT
            WHERE idempotency_key IS NOT NULL;
    """)


def downgrade() -> None:
    # fails (unique violation) while two writers of a bank hold the same key
    op.execute("""
        DROP INDEX jobs_idempotency_per_writer;
        ALTER TABLE jobs ADD CONSTRAINT jobs_bank_id_idempotency_key_key
            UNIQUE (bank_id, idempotency_key);
    """)
