"""Chunk context: a unit's ``heading`` (its document's title and heading path) reaches the
lexical channel, not the returned text.

A long document is stored as several chunks and only the first holds the title; a chunk
from the middle of an abstract or a section loses the words that say what it is about.
``memory_units.heading`` (NULL for conversation turns, notes, facts and every one-chunk
item — :func:`rcll.retain.chunking.chunk_headings`) holds them; ``tsv`` and ``tsv_len`` are
now computed over heading + text, so BM25 sees the heading's words as the unit's own
(a NULL heading gives the vector of migration 0015 exactly: chat units are unchanged). The
dense channel reads it as the prefix of the embedding input
(:func:`rcll.models.embedder.embed_input`). ``text`` — what recall returns — is unchanged.

``ALTER COLUMN … SET EXPRESSION`` rewrites the table once (as 0015).

Revision ID: 0023
Revises: 0022
"""

from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

LEX_INPUT = "coalesce(heading || E'\\n\\n', '') || text"


def upgrade() -> None:
    op.execute(
        f"""
        ALTER TABLE memory_units ADD COLUMN heading text;
        ALTER TABLE memory_units ALTER COLUMN tsv
            SET EXPRESSION AS (rcll_lex_tsvector({LEX_INPUT}));
        ALTER TABLE memory_units ALTER COLUMN tsv_len
            SET EXPRESSION AS (rcll_tsv_token_count(rcll_lex_tsvector({LEX_INPUT})));
        """
    )


def downgrade() -> None:
    op.execute(
        """
        ALTER TABLE memory_units ALTER COLUMN tsv SET EXPRESSION AS (rcll_lex_tsvector(text));
        ALTER TABLE memory_units ALTER COLUMN tsv_len
            SET EXPRESSION AS (rcll_tsv_token_count(rcll_lex_tsvector(text)));
        ALTER TABLE memory_units DROP COLUMN heading;
        """
    )
