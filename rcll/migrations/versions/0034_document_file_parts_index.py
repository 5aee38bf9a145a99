"""Index for a file's parts: the documents one uploaded file became.

A file job makes one document per page or section (``<document_id>#p<n>``, ``#s<n>``, or
the bare id for one section: :mod:`rcll.files.stage`), each with the file's id in
``metadata.file.document_id``. ``documents (bank_id, (metadata -> 'file' ->>
'document_id')) WHERE metadata ? 'file'`` serves :func:`rcll.store.units.retire_file_parts`,
which every file job runs to retire the parts a newer version of the file no longer has.

Revision ID: 0034
Revises: 0033
"""

from alembic import op

revision = "0034"
down_revision = "0033"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE INDEX IF NOT EXISTS documents_file_parts
            ON documents (bank_id, (metadata -> 'file' ->> 'document_id'))
            WHERE metadata ? 'file';
        """
    )


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS documents_file_parts;")
