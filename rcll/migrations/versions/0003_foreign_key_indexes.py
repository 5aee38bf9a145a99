"""Index the foreign keys and the job column of memory_units.

Without them, deleting a bank checks every cascaded unit against the whole table
(superseded_by_id, document_id, chunk_id): ~5 s per 500-unit bank at 36k units. job_id
serves the embed stage and the per-job counts.

Revision ID: 0003
Revises: 0002
"""

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE INDEX memory_units_document ON memory_units (document_id);
        CREATE INDEX memory_units_chunk ON memory_units (chunk_id);
        CREATE INDEX memory_units_job ON memory_units (job_id);
        CREATE INDEX memory_units_superseded_by ON memory_units (superseded_by_id)
            WHERE superseded_by_id IS NOT NULL;
        """
    )


def downgrade() -> None:
    op.execute(
        "DROP INDEX memory_units_document, memory_units_chunk, memory_units_job, "
        "memory_units_superseded_by"
    )
