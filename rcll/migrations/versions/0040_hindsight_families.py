"""Hindsight 1.1's non-LLM families (issue 25 item 2): bank aliases, webhooks and their
delivery log.

``bank_aliases``: extra ids that reach a bank (Hindsight's ``/aliases``); an alias never
names a bank and is unique across the deployment; deleting the bank drops its aliases.
``webhooks``: one subscription of a bank (URL, HMAC secret, event types, HTTP options).
``webhook_deliveries``: the outbox and delivery log — one row per event and webhook, written
in the transaction that ends the job (:func:`rcll.store.webhooks.job_finished`), sent by the
``webhooks.deliver`` Celery task (``pending`` → ``delivered`` | ``failed`` after its retries).

Revision ID: 0040
Revises: 0023
"""

from alembic import op

revision = "0040"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE bank_aliases (
            alias       text PRIMARY KEY,
            bank_id     text NOT NULL REFERENCES memory_banks(id) ON DELETE CASCADE,
            is_primary  boolean NOT NULL DEFAULT false,
            created_at  timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX bank_aliases_bank ON bank_aliases (bank_id);
        CREATE UNIQUE INDEX bank_aliases_one_primary ON bank_aliases (bank_id) WHERE is_primary;

        CREATE TABLE webhooks (
            id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
            bank_id      text NOT NULL REFERENCES memory_banks(id) ON DELETE CASCADE,
            url          text NOT NULL,
            secret       text NOT NULL,
            event_types  text[] NOT NULL,
            enabled      boolean NOT NULL DEFAULT true,
            http_config  jsonb NOT NULL DEFAULT '{}'::jsonb,
            created_by   text,
            created_at   timestamptz NOT NULL DEFAULT now(),
            updated_at   timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX webhooks_bank ON webhooks (bank_id);

        CREATE TABLE webhook_deliveries (
            id                    uuid PRIMARY KEY DEFAULT gen_random_uuid(),
            webhook_id            uuid NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
            bank_id               text NOT NULL,
            event_id              uuid NOT NULL,
            event_type            text NOT NULL,
            payload               jsonb NOT NULL,
            status                text NOT NULL DEFAULT 'pending'
                                  CHECK (status IN ('pending', 'delivered', 'failed')),
            attempts              integer NOT NULL DEFAULT 0,
            next_retry_at         timestamptz,
            dispatched_at         timestamptz,
            last_error            text,
            last_response_status  integer,
            last_response_body    text,
            last_attempt_at       timestamptz,
            created_at            timestamptz NOT NULL DEFAULT now(),
            updated_at            timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries (webhook_id, created_at DESC);
        CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (next_retry_at)
            WHERE status = 'pending';
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS webhook_deliveries, webhooks, bank_aliases")
