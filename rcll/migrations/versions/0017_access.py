"""Multi-agent access (spec §7, §6, §3): members, API keys, bank grants, the audit log,
tunnels between banks, unit revision history and the forget tombstone.

- ``members``: agents or people. ``id`` is a slug; it is what ``memory_units.audience``
  holds for a unit only that member may see (``'bank'`` is reserved: every member).
- ``api_keys``: ``key_hash`` only (the key is shown once at creation); ``prefix`` is the
  public part used to find the row; ``revoked_at``/``last_used_at``.
- ``bank_grants``: member × bank × role (read < write < admin) × purposes the member may
  recall for. No foreign key to ``memory_banks``: a grant may precede the bank's first
  retain (banks are created on first retain).
- ``audit_log``: written by write-side actions only, never by recall.
- ``tunnels``: unit ↔ unit across two different banks, bidirectional by default.
- ``memory_unit_revisions``: the text and fields of each earlier revision of a unit
  (``correct`` keeps history, spec §1.6).
- ``memory_units.forgotten_at``: the tombstone of ``forget``.

Revision ID: 0017
Revises: 0016
"""

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE members (
            id                text PRIMARY KEY
                              CHECK (id ~ '^[a-z0-9][a-z0-9_.-]{0,63}$' AND id <> 'bank'),
            name              text NOT NULL,
            kind              text NOT NULL DEFAULT 'agent' CHECK (kind IN ('agent', 'person')),
            is_admin          boolean NOT NULL DEFAULT false,
            default_purposes  text[] NOT NULL DEFAULT ARRAY['assist'],
            created_at        timestamptz NOT NULL DEFAULT now(),
            disabled_at       timestamptz
        );

        CREATE TABLE api_keys (
            id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
            member_id     text NOT NULL REFERENCES members(id) ON DELETE CASCADE,
            prefix        text NOT NULL UNIQUE,
            key_hash      text NOT NULL,
            label         text,
            created_at    timestamptz NOT NULL DEFAULT now(),
            last_used_at  timestamptz,
            revoked_at    timestamptz
        );
        CREATE INDEX api_keys_member ON api_keys (member_id);

        CREATE TABLE bank_grants (
            member_id   text NOT NULL REFERENCES members(id) ON DELETE CASCADE,
            bank_id     text NOT NULL,
            role        text NOT NULL CHECK (role IN ('read', 'write', 'admin')),
            purposes    text[] NOT NULL CHECK (cardinality(purposes) > 0),
            created_at  timestamptz NOT NULL DEFAULT now(),
            updated_at  timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (member_id, bank_id)
        );
        CREATE INDEX bank_grants_bank ON bank_grants (bank_id);

        CREATE TABLE audit_log (
            id        bigserial PRIMARY KEY,
            at        timestamptz NOT NULL DEFAULT now(),
            actor     text,
            action    text NOT NULL,
            bank_id   text,
            unit_id   uuid,
            details   jsonb NOT NULL DEFAULT '{}'::jsonb
        );
        CREATE INDEX audit_log_bank_at ON audit_log (bank_id, at DESC);
        CREATE INDEX audit_log_unit ON audit_log (unit_id) WHERE unit_id IS NOT NULL;

        CREATE TABLE tunnels (
            id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
            source_unit_id  uuid NOT NULL REFERENCES memory_units(id) ON DELETE CASCADE,
            target_unit_id  uuid NOT NULL REFERENCES memory_units(id) ON DELETE CASCADE,
            source_bank_id  text NOT NULL REFERENCES memory_banks(id) ON DELETE CASCADE,
            target_bank_id  text NOT NULL REFERENCES memory_banks(id) ON DELETE CASCADE,
            relationship    text NOT NULL DEFAULT 'related',
            bidirectional   boolean NOT NULL DEFAULT true,
            created_by      text,
            created_at      timestamptz NOT NULL DEFAULT now(),
            CHECK (source_bank_id <> target_bank_id),
            UNIQUE (source_unit_id, target_unit_id, relationship)
        );
        CREATE INDEX tunnels_source_bank ON tunnels (source_bank_id, source_unit_id);
        CREATE INDEX tunnels_target_bank ON tunnels (target_bank_id, target_unit_id);
        CREATE INDEX tunnels_target_unit ON tunnels (target_unit_id);

        CREATE TABLE memory_unit_revisions (
            unit_id     uuid NOT NULL REFERENCES memory_units(id) ON DELETE CASCADE,
            revision    integer NOT NULL,
            text        text NOT NULL,
            fields      jsonb NOT NULL DEFAULT '{}'::jsonb,
            changed_by  text,
            changed_at  timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (unit_id, revision)
        );

        ALTER TABLE memory_units ADD COLUMN forgotten_at timestamptz;
        ALTER TABLE memory_units ADD CONSTRAINT memory_units_purposes_nonempty
            CHECK (cardinality(purposes) > 0) NOT VALID;
        """
    )


def downgrade() -> None:
    op.execute(
        """
        ALTER TABLE memory_units DROP CONSTRAINT IF EXISTS memory_units_purposes_nonempty;
        ALTER TABLE memory_units DROP COLUMN IF EXISTS forgotten_at;
        DROP TABLE IF EXISTS memory_unit_revisions, tunnels, audit_log, bank_grants, api_keys,
            members CASCADE;
        """
    )
