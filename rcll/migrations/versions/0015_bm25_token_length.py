"""BM25 document length: a unit's token count, not its number of distinct lexemes.

``tsv_len`` (migration 0006) was ``length(tsvector)``, the number of *distinct* lexemes.
Okapi BM25's document length ``dl`` counts the document's tokens, in the same unit as its
term frequencies (Robertson & Zaragoza 2009, "The Probabilistic Relevance Framework: BM25
and Beyond": dl is the document's length, normalised by the collection's average, avgdl). The
two agree on short chat turns (LoCoMo: 14.3 lexemes, 14.8 tokens on average) but not on long
texts that repeat their words, which distinct-lexeme length under-penalises: LongMemEval_S's
chunks of long assistant turns.

``tsv_len`` is now ``rcll_tsv_token_count(rcll_lex_tsvector(text))``: the sum over the
lexemes of the unit's vector of their positions, i.e. the same tf the scoring reads
(``coalesce(array_length(positions, 1), 1)``), summed — so dl = Σ tf holds exactly. A lexeme
without positions (a stripped vector) counts 1, as in the scoring. The English parser's
stop words are not tokens of the vector, so they count neither in tf nor in dl; a lexeme
keeps at most 256 positions (PostgreSQL's limit), far above a unit's size (≤ 254 word
pieces). ``memory_units_bank_live`` keeps covering ``tsv_len`` (PostgreSQL rebuilds it with
the table), so the bank statistics still read N and avgdl from the index.

``ALTER COLUMN … SET EXPRESSION`` (PostgreSQL 17+) rewrites the table once, under an ACCESS
EXCLUSIVE lock, recomputing the vector of every unit.

Revision ID: 0015
Revises: 0014
"""

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        -- Tokens of a tsvector: positions per lexeme, summed (a lexeme without positions: 1).
        CREATE OR REPLACE FUNCTION rcll_tsv_token_count(v tsvector) RETURNS integer
        LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
          SELECT coalesce(sum(coalesce(array_length(t.positions, 1), 1)), 0)::integer
          FROM unnest(v) AS t
        $fn$;
        ALTER TABLE memory_units ALTER COLUMN tsv_len
            SET EXPRESSION AS (rcll_tsv_token_count(rcll_lex_tsvector(text)));
        """
    )


def downgrade() -> None:
    op.execute(
        """
        ALTER TABLE memory_units ALTER COLUMN tsv_len
            SET EXPRESSION AS (length(rcll_lex_tsvector(text)));
        DROP FUNCTION IF EXISTS rcll_tsv_token_count(tsvector);
        """
    )
