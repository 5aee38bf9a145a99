"""A hash of each retain request's items on its job, so a reused idempotency key with a
different body is refused (409) instead of silently answering with the first job.

Revision ID: 0009
Revises: 0008
"""

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE jobs ADD COLUMN request_hash text")


def downgrade() -> None:
    op.execute("ALTER TABLE jobs DROP COLUMN request_hash")
