"""Who may see a document is part of its identity: a documents row per lineage.

``documents`` gains ``audience`` and ``purposes`` (sorted), and its unique key becomes
``(bank_id, document_id, audience, purposes)`` instead of ``(bank_id, document_id)``
(:mod:`rcll.identity`). Before, two members retaining the same document id — or the same
text without one, whose id is a hash of the content — shared one row, and the later write
rewrote or invalidated the earlier member's units, metadata and tags whatever their
audience.

The upgrade fills both columns from each document's newest live unit (any unit when none is
live; every audience and purpose when it has none). A document whose units already had mixed
audiences keeps one row; its units keep their own audience and purposes, which readers
still check unit by unit.

Revision ID: 0019
Revises: 0018
"""

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        ALTER TABLE documents
            ADD COLUMN audience text NOT NULL DEFAULT 'bank',
            ADD COLUMN purposes text[] NOT NULL
                DEFAULT ARRAY['assist', 'audit', 'operate', 'personal'];

        UPDATE documents d SET (audience, purposes) = (
            SELECT u.audience, ARRAY(SELECT DISTINCT p FROM unnest(u.purposes) AS p ORDER BY p)
            FROM memory_units u WHERE u.document_id = d.id
            ORDER BY (u.invalidated_reason IS NULL AND u.superseded_by_id IS NULL) DESC,
                     u.created_at DESC, u.id DESC
            LIMIT 1)
        WHERE EXISTS (SELECT 1 FROM memory_units u WHERE u.document_id = d.id);

        ALTER TABLE documents DROP CONSTRAINT documents_bank_id_document_id_key;
        CREATE UNIQUE INDEX documents_lineage_key
            ON documents (bank_id, document_id, audience, purposes);
    """)


def downgrade() -> None:
    # fails (unique violation) while two lineages share a document id: delete one first
    op.execute("""
        DROP INDEX documents_lineage_key;
        ALTER TABLE documents ADD CONSTRAINT documents_bank_id_document_id_key
            UNIQUE (bank_id, document_id);
        ALTER TABLE documents DROP COLUMN audience, DROP COLUMN purposes;
    """)
