"""What a job's visibility rule needs, stored on the job at creation.

A job's JSON describes its items — a file's name, size, type and SHA-256, item errors,
document ids — and must be shown only to members who may see the units it writes
(:func:`rcll.access.jobs.job_visible`, which applies :func:`rcll.access.visibility.unit_visible`).

- ``jobs.submitted_by`` (text, NULL): the member id that submitted the job (NULL: auth off or
  an internal call).
- ``jobs.item_scopes`` (jsonb, NULL): the distinct ``{"audience": text, "purposes": [text]}``
  of the job's items, as the retain service resolved them before storing the job; ``[]`` for
  a job without member items (``closets``); NULL when unknown (fails closed: the job's
  content is shown to the unrestricted principal only).

Backfill: a job's scopes from the units it wrote (``memory_units.job_id``), else from its
payload's items while the payload is kept (queued, running, failed jobs); ``closets`` jobs
get ``[]``. ``submitted_by`` stays NULL for existing jobs (not recorded before).

Revision ID: 0020
Revises: 0019
"""

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE jobs ADD COLUMN IF NOT EXISTS submitted_by text")
    op.execute("ALTER TABLE jobs ADD COLUMN IF NOT EXISTS item_scopes jsonb")
    op.execute("""
        UPDATE jobs j SET item_scopes = s.scopes
        FROM (SELECT job_id,
                     jsonb_agg(DISTINCT jsonb_build_object('audience', audience,
                                                           'purposes', to_jsonb(purposes)))
                         AS scopes
              FROM memory_units WHERE job_id IS NOT NULL GROUP BY job_id) s
        WHERE j.id = s.job_id AND j.item_scopes IS NULL""")
    op.execute("""
        UPDATE jobs j SET item_scopes = (
            SELECT jsonb_agg(DISTINCT jsonb_build_object('audience', e -> 'audience',
                                                         'purposes', e -> 'purposes'))
            FROM jsonb_array_elements(j.payload) e)
        WHERE j.item_scopes IS NULL AND j.kind = 'retain' AND jsonb_typeof(j.payload) = 'array'
          AND jsonb_array_length(j.payload) > 0""")
    op.execute("UPDATE jobs SET item_scopes = '[]'::jsonb "
               "WHERE item_scopes IS NULL AND kind = 'closets'")


def downgrade() -> None:
    op.execute("ALTER TABLE jobs DROP COLUMN IF EXISTS item_scopes, "
               "DROP COLUMN IF EXISTS submitted_by")
