"""Directives (rules reflect's prompt carries) and the LLM request log.

- ``directives``: a bank's hard rules for reflect (Hindsight's directives): ``name``,
  ``content``, ``priority`` (higher first), ``is_active`` and ``tags`` (empty: global; else
  the directive applies only to a reflect whose tags match). Deleting the bank deletes them.
- ``llm_requests``: one row per call RCLL's LLM client made (each attempt of a retried call
  is its own row): the bank, the operation (``retain``, ``reflect``, ``consolidation``), the
  step (``scope``: ``extract``, ``reflect``, ``closets``), the run it belongs to
  (``trace_id``: the job id, or one id per reflect), the document, provider and model,
  status (``success`` or ``error``) and RCLL's finer ``outcome``, tokens, cost, latency and
  a truncated error. No prompt or reply text is kept. Deleting the bank deletes its rows;
  older rows go after ``RCLL_LLM_REQUEST_LOG_RETENTION_DAYS`` (beat's purge).

Revision ID: 0029
Revises: 0026
"""

from alembic import op

revision = "0029"
down_revision = "0026"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        CREATE TABLE directives (
            id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
            bank_id     text NOT NULL REFERENCES memory_banks(id) ON DELETE CASCADE,
            name        text NOT NULL,
            content     text NOT NULL,
            priority    integer NOT NULL DEFAULT 0,
            is_active   boolean NOT NULL DEFAULT true,
            tags        text[] NOT NULL DEFAULT '{}',
            created_by  text,
            created_at  timestamptz NOT NULL DEFAULT now(),
            updated_at  timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX directives_bank ON directives (bank_id, priority DESC, created_at, id);

        CREATE TABLE llm_requests (
            id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            bank_id        text REFERENCES memory_banks(id) ON DELETE CASCADE,
            operation      text,
            scope          text,
            trace_id       text,
            document_id    text,
            provider       text,
            model          text,
            status         text NOT NULL CHECK (status IN ('success', 'error')),
            outcome        text NOT NULL,
            attempt        integer NOT NULL DEFAULT 1,
            started_at     timestamptz NOT NULL,
            ended_at       timestamptz NOT NULL,
            duration_ms    integer NOT NULL,
            input_tokens   integer NOT NULL DEFAULT 0,
            output_tokens  integer NOT NULL DEFAULT 0,
            cost_usd       double precision NOT NULL DEFAULT 0,
            error          text
        );
        CREATE INDEX llm_requests_bank ON llm_requests (bank_id, started_at DESC, id DESC);
        CREATE INDEX llm_requests_trace ON llm_requests (bank_id, trace_id);
        CREATE INDEX llm_requests_started ON llm_requests (started_at);
    """)


def downgrade() -> None:
    op.execute("""
        DROP TABLE IF EXISTS llm_requests;
        DROP TABLE IF EXISTS directives;
    """)
