"""Webhooks (with their outbox and delivery log) and bank aliases: Hindsight 1.1's
``…/webhooks`` and ``…/aliases`` families (issue 25).

- ``webhooks``: one row per registered endpoint of a bank — ``url`` (http or https),
  ``secret`` (the HMAC-SHA256 key; shown once, when the webhook is made), ``event_types``,
  ``enabled``, ``http_config`` (Hindsight's ``{method, timeout_seconds, headers, params}``).
  Deleted with its bank.
- ``webhook_deliveries``: the transactional outbox and the delivery log in one row per
  (event, webhook). :func:`rcll.store.jobs.finish` writes the rows of a job's end in the
  transaction that ends the job (:func:`rcll.store.webhooks.enqueue_job_event`), so an
  event is queued exactly when the state change commits. ``body`` holds the exact bytes
  that are signed and sent on every attempt. ``status`` is Hindsight's (``pending``,
  ``completed``, ``failed``); ``next_attempt_at`` is when the dispatcher may send it next
  (the retry backoff, or a claim's lease); ``claim`` the token of the one delivery task
  allowed to attempt it (:mod:`rcll.webhooks.delivery`). Deleted with its webhook, and
  once ended by the dispatcher after ``RCLL_WEBHOOK_LOG_RETENTION_DAYS``.
- ``webhook_attempts``: one row per attempt — status code, error, duration.
- ``bank_aliases``: extra ids a bank answers to on every bank-scoped route
  (:mod:`rcll.banks.aliases`); at most one ``is_primary`` per bank; deleted with the bank.
  An alias never names a bank and a bank never takes an alias's id: the two triggers check
  the other table under a transaction-scoped advisory lock on the id, so two concurrent
  transactions cannot each miss the other's row (a bank that exists already takes no lock:
  ``banks.ensure`` on every retain stays unserialised); the refusal is SQLSTATE 23505 with
  the constraint name ``bank_alias_id_conflict``.

Revision ID: 0025
Revises: 0024
"""

from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
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
        CREATE INDEX webhooks_bank ON webhooks (bank_id, created_at, id);

        CREATE TABLE webhook_deliveries (
            id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
            webhook_id         uuid NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
            bank_id            text NOT NULL,
            event_id           uuid NOT NULL,
            event_type         text NOT NULL,
            operation_id       uuid,
            body               text NOT NULL,
            status             text NOT NULL DEFAULT 'pending'
                               CHECK (status IN ('pending', 'completed', 'failed')),
            attempts           integer NOT NULL DEFAULT 0,
            next_attempt_at    timestamptz DEFAULT now(),
            claim              uuid,
            url                text NOT NULL,
            last_attempt_at    timestamptz,
            last_status_code   integer,
            last_error         text,
            last_response_body text,
            created_at         timestamptz NOT NULL DEFAULT now(),
            updated_at         timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at)
            WHERE status = 'pending';
        CREATE INDEX webhook_deliveries_ended ON webhook_deliveries (updated_at)
            WHERE status <> 'pending';
        CREATE INDEX webhook_deliveries_by_webhook
            ON webhook_deliveries (webhook_id, created_at DESC, id DESC);

        CREATE TABLE webhook_attempts (
            delivery_id  uuid NOT NULL REFERENCES webhook_deliveries(id) ON DELETE CASCADE,
            attempt      integer NOT NULL,
            at           timestamptz NOT NULL DEFAULT now(),
            url          text NOT NULL,
            status_code  integer,
            error        text,
            duration_ms  double precision NOT NULL,
            PRIMARY KEY (delivery_id, attempt)
        );

        CREATE TABLE bank_aliases (
            alias       text PRIMARY KEY,
            bank_id     text NOT NULL REFERENCES memory_banks(id) ON DELETE CASCADE,
            is_primary  boolean NOT NULL DEFAULT false,
            created_by  text,
            created_at  timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX bank_aliases_bank ON bank_aliases (bank_id, created_at);
        CREATE UNIQUE INDEX bank_aliases_one_primary ON bank_aliases (bank_id)
            WHERE is_primary;

        CREATE FUNCTION rcll_alias_not_a_bank() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_advisory_xact_lock(hashtextextended(NEW.alias, 25));
            IF EXISTS (SELECT 1 FROM memory_banks WHERE id = NEW.alias) THEN
                RAISE EXCEPTION 'bank alias % names an existing bank', NEW.alias
                    USING ERRCODE = 'unique_violation', CONSTRAINT = 'bank_alias_id_conflict';
            END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER bank_aliases_not_a_bank BEFORE INSERT OR UPDATE OF alias
            ON bank_aliases FOR EACH ROW EXECUTE FUNCTION rcll_alias_not_a_bank();

        CREATE FUNCTION rcll_bank_not_an_alias() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF EXISTS (SELECT 1 FROM memory_banks WHERE id = NEW.id) THEN
                RETURN NEW;  -- ON CONFLICT: nothing is inserted (and it is not an alias)
            END IF;
            PERFORM pg_advisory_xact_lock(hashtextextended(NEW.id, 25));
            IF EXISTS (SELECT 1 FROM bank_aliases WHERE alias = NEW.id) THEN
                RAISE EXCEPTION 'bank id % is an alias of another bank', NEW.id
                    USING ERRCODE = 'unique_violation', CONSTRAINT = 'bank_alias_id_conflict';
            END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER memory_banks_not_an_alias BEFORE INSERT ON memory_banks
            FOR EACH ROW EXECUTE FUNCTION rcll_bank_not_an_alias();
    """)


def downgrade() -> None:
    op.execute("""
        DROP TRIGGER IF EXISTS memory_banks_not_an_alias ON memory_banks;
        DROP FUNCTION IF EXISTS rcll_bank_not_an_alias();
        DROP TABLE IF EXISTS bank_aliases;
        DROP FUNCTION IF EXISTS rcll_alias_not_a_bank();
        DROP TABLE IF EXISTS webhook_attempts;
        DROP TABLE IF EXISTS webhook_deliveries;
        DROP TABLE IF EXISTS webhooks;
    """)
