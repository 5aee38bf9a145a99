"""Store each unit's token count (the embedder's tokenizer) so recall's budget cut reads it.

Revision ID: 0002
Revises: 0001
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE memory_units ADD COLUMN token_count integer")


def downgrade() -> None:
    op.execute("ALTER TABLE memory_units DROP COLUMN token_count")
