"""Lexical channel: character n-grams for unsegmented scripts; a bank-leading full-text index.

1. ``to_tsvector('english')`` has no segmenter for scripts written without spaces: in the
   C-locale database every non-ASCII character is a letter, so a Chinese sentence (with its
   punctuation and any glued English word) became one lexeme. ``tsv`` now holds
   * the English lexemes of the text with those runs (and typographic punctuation and
     emoji, which the C-locale parser also glued to words) blanked out, and
   * for every run of Han, kana, Hangul, Thai, Lao, Khmer or Myanmar characters its character
     unigrams and bigrams (``rcll_cjk_grams``), the segmentation-free indexing of CJK used
     by Lucene's ``CJKBigramFilter`` / Elasticsearch's ``cjk`` analyzer (Kwok 1997,
     "Comparing representations in Chinese information retrieval", SIGIR: bigrams retrieve
     as well as dictionary words). Unigrams are kept so one-character words (猫, 车) are
     findable; a query uses bigrams (a run of one character: its unigram).
   Both are plain SQL (immutable functions), so the generated column, existing rows and the
   query side share one definition; no extension beyond the standard contrib set.
2. ``memory_units_tsv`` was one GIN index over all banks, filtered after: a 500-unit bank
   paid for every other bank's postings. The index is now ``(bank_id, tsv)`` (btree_gin),
   so a bank's full-text lookups read that bank's postings only.
3. ``tsv_len``: each unit's lexeme count (BM25's document length), stored so neither the
   bank statistics nor the scoring recompute ``length(tsv)``; ``memory_units_bank_live``
   covers a bank's live units in ``sample_key`` order with the columns recall filters by
   and ``tsv_len``, so the bank's unit count, average length and a uniform sample are read
   from the index. ``sample_key`` is a 64-bit hash of the unit id, uniform whatever the id
   scheme (from migration 0007 unit ids are time-ordered uuidv7: the smallest ids would be
   the oldest units, not a sample).

Revision ID: 0006
Revises: 0005
"""

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

# Scripts written without spaces between words (plus Hangul, whose words carry particles):
# Thai, Lao, Myanmar, Khmer, Hangul Jamo, CJK radicals..Bopomofo, Hangul compatibility
# Jamo..CJK Unified Ideographs (incl. kana, ext. A), Hangul syllables, CJK compatibility
# ideographs, half-width kana, CJK ext. B–F.
SCRIPT_RUN = (r"[\u0E00-\u0EFF\u1000-\u109F\u1780-\u17FF\u1100-\u11FF\u2E80-\u2FDF"
              r"\u3040-\u31FF\u3400-\u4DBF\u4E00-\u9FFF\uA960-\uA97F\uAC00-\uD7FF"
              r"\uF900-\uFAFF\uFF66-\uFF9F\U00020000-\U0002FA1F]+")
# Blanked before the English parser: the runs above, CJK punctuation and full-width forms,
# and the typographic punctuation and symbols of other text — no-break space, Latin-1
# punctuation (not the letters ª µ º), general punctuation (dashes, curly quotes, ellipsis,
# zero-width joiner), arrows..dingbats, variation selectors, emoji. The C-locale parser
# takes every non-ASCII character for a letter and would glue them to neighbouring words
# ("thanks—see", "great🎉" were one lexeme each).
NON_ENGLISH = (SCRIPT_RUN[:-2] + r"\u3000-\u303F\uFE30-\uFE4F\uFF00-\uFF65\uFFA0-\uFFEF"
               r"\u00A0-\u00A9\u00AB-\u00B4\u00B6-\u00B9\u00BB-\u00BF\u00D7\u00F7"
               r"\u2000-\u206F\u2190-\u2BFF\uFE00-\uFE0F\U0001F000-\U0001FAFF]+")

FUNCTIONS = f"""
CREATE EXTENSION IF NOT EXISTS btree_gin;

-- Unigrams (when $2) and bigrams of every unsegmented-script run of $1, with positions.
CREATE OR REPLACE FUNCTION rcll_cjk_grams(t text, unigrams boolean) RETURNS tsvector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
  SELECT coalesce(string_agg('''' || g || ''':' || ps, ' '), '')::tsvector
  FROM (SELECT g, string_agg(p::text, ',' ORDER BY p) AS ps
        FROM (SELECT k.g, least(row_number() OVER (ORDER BY r.o, i.i, k.n), 16383) AS p
              FROM regexp_matches(t, '{SCRIPT_RUN}', 'g') WITH ORDINALITY AS r(m, o)
              CROSS JOIN LATERAL generate_series(1, char_length(r.m[1])) AS i(i)
              CROSS JOIN LATERAL (VALUES (1, substr(r.m[1], i.i, 1)),
                                         (2, substr(r.m[1], i.i, 2))) AS k(n, g)
              WHERE char_length(k.g) = k.n
                AND (k.n = 2 OR unigrams OR char_length(r.m[1]) = 1)) x
        GROUP BY g) y
$fn$;

-- The lexical channel's document vector: English lexemes + unsegmented-script n-grams.
CREATE OR REPLACE FUNCTION rcll_lex_tsvector(t text) RETURNS tsvector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
  SELECT to_tsvector('english'::regconfig, regexp_replace(t, '{NON_ENGLISH}', ' ', 'g'))
         || rcll_cjk_grams(t, true)
$fn$;

-- The query's terms: English lexemes + bigrams (a lone character: its unigram).
CREATE OR REPLACE FUNCTION rcll_lex_query_tsvector(t text) RETURNS tsvector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
  SELECT to_tsvector('english'::regconfig, regexp_replace(t, '{NON_ENGLISH}', ' ', 'g'))
         || rcll_cjk_grams(t, false)
$fn$;
"""


def upgrade() -> None:
    op.execute(FUNCTIONS)
    op.execute(
        """
        DROP INDEX IF EXISTS memory_units_tsv;
        -- one statement, one table rewrite
        ALTER TABLE memory_units
            ALTER COLUMN tsv SET EXPRESSION AS (rcll_lex_tsvector(text)),
            ADD COLUMN tsv_len integer GENERATED ALWAYS AS (length(rcll_lex_tsvector(text))) STORED,
            ADD COLUMN sample_key bigint GENERATED ALWAYS AS (hashtextextended(id::text, 0)) STORED;
        CREATE INDEX memory_units_bank_tsv ON memory_units USING gin (bank_id, tsv);
        CREATE INDEX memory_units_bank_live ON memory_units (bank_id, sample_key)
            INCLUDE (layer, room, hall, tsv_len)
            WHERE superseded_by_id IS NULL AND invalidated_reason IS NULL;
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP INDEX IF EXISTS memory_units_bank_tsv, memory_units_bank_live;
        ALTER TABLE memory_units DROP COLUMN tsv_len, DROP COLUMN sample_key;
        ALTER TABLE memory_units ALTER COLUMN tsv
            SET EXPRESSION AS (to_tsvector('english'::regconfig, text));
        CREATE INDEX memory_units_tsv ON memory_units USING gin (tsv);
        DROP FUNCTION IF EXISTS rcll_lex_query_tsvector(text), rcll_lex_tsvector(text),
            rcll_cjk_grams(text, boolean);
        """
    )
