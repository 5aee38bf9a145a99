"""Job leases and re-send counts for broker-loss recovery.

``lease_owner``/``lease_until``: the worker (or API thread) running a job's stage holds a
lease it renews by heartbeat; a duplicate message for a leased job is dropped, and a running
job whose lease expired is re-sent by the recovery sweep. ``resends``: how often the sweep
re-sent the job since it last made progress (the sweep backs off exponentially with it).
``lease_expiries``: how often a worker stopped while holding the job's lease (killed, out of
memory); past a limit the job ends ``failed`` instead of killing workers forever.

Revision ID: 0005
Revises: 0004
"""

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        ALTER TABLE jobs ADD COLUMN lease_owner text,
                         ADD COLUMN lease_until timestamptz,
                         ADD COLUMN resends integer NOT NULL DEFAULT 0,
                         ADD COLUMN lease_expiries integer NOT NULL DEFAULT 0;
        CREATE INDEX jobs_unfinished_updated ON jobs (updated_at)
            WHERE state IN ('queued', 'running');
        CREATE INDEX jobs_created_id ON jobs (created_at DESC, id DESC);
        CREATE INDEX jobs_bank_created_id ON jobs (bank_id, created_at DESC, id DESC);
        DROP INDEX IF EXISTS jobs_bank_created;
        """
    )


def downgrade() -> None:
    op.execute(
        """
        CREATE INDEX IF NOT EXISTS jobs_bank_created ON jobs (bank_id, created_at DESC);
        DROP INDEX IF EXISTS jobs_bank_created_id;
        DROP INDEX IF EXISTS jobs_created_id;
        DROP INDEX IF EXISTS jobs_unfinished_updated;
        ALTER TABLE jobs DROP COLUMN lease_expiries, DROP COLUMN resends,
                         DROP COLUMN lease_until, DROP COLUMN lease_owner;
        """
    )
