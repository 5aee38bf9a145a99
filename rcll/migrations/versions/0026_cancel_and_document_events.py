"""A job can be cancelled; a document keeps the history of its changes.

- ``jobs.state`` gains ``cancelled`` (a terminal state, like ``succeeded``): a queued job
  is never started, a running one stops at its next check of the job row
  (:func:`rcll.store.jobs.lock_for_work`), and nothing a worker still holds can end it
  otherwise (:func:`rcll.store.jobs.finish` only ends queued and running jobs).
- ``document_events``: one row per change of a document lineage — each version applied
  (``retain``, or ``reprocess`` for a version re-made from the stored one) with its
  revision, operation, writer and the units it added and replaced, and each retag
  (``PATCH …/documents/{id}``). Deleting the document deletes its events. ``operation_id``
  has no foreign key: an operation record may be deleted while the document stays.

Backfill: every existing lineage gets one ``retain`` event for its current revision (its
live units as ``units_added``, at its ``updated_at``); earlier versions were not recorded.

Revision ID: 0026
Revises: 0024
"""

from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        ALTER TABLE jobs DROP CONSTRAINT IF EXISTS jobs_state_check;
        ALTER TABLE jobs ADD CONSTRAINT jobs_state_check CHECK (state IN
            ('queued', 'running', 'succeeded', 'failed', 'partial', 'cancelled'));

        CREATE TABLE document_events (
            id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            document_id    uuid NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            kind           text NOT NULL CHECK (kind IN ('retain', 'reprocess', 'retag')),
            revision       integer NOT NULL,
            operation_id   uuid,
            actor          text,
            units_added    integer NOT NULL DEFAULT 0,
            units_removed  integer NOT NULL DEFAULT 0,
            details        jsonb NOT NULL DEFAULT '{}'::jsonb,
            at             timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX document_events_document ON document_events (document_id, at DESC, id DESC);
        CREATE UNIQUE INDEX document_events_version ON document_events (document_id, revision)
            WHERE kind IN ('retain', 'reprocess');

        INSERT INTO document_events (document_id, kind, revision, units_added, at)
        SELECT d.id, 'retain', d.revision,
               (SELECT count(*) FROM memory_units u WHERE u.document_id = d.id
                  AND u.invalidated_reason IS NULL AND u.superseded_by_id IS NULL),
               d.updated_at
        FROM documents d;
    """)


def downgrade() -> None:
    op.execute("""
        DROP TABLE IF EXISTS document_events;
        UPDATE jobs SET state = 'failed', error = coalesce(error, 'cancelled')
            WHERE state = 'cancelled';
        ALTER TABLE jobs DROP CONSTRAINT IF EXISTS jobs_state_check;
        ALTER TABLE jobs ADD CONSTRAINT jobs_state_check CHECK (state IN
            ('queued', 'running', 'succeeded', 'failed', 'partial'));
    """)
