"""Lexical index without a pending list: a small bank's recall no longer reads other banks' new units.

A GIN index with ``fastupdate`` on (PostgreSQL's default) puts new entries in one unsorted
pending list (up to ``gin_pending_list_limit``, 4 MB) until vacuum or an overflowing insert
merges them, and every scan reads the whole list. ``memory_units_bank_tsv`` is led by
``bank_id`` so a bank reads only its own postings (0006) — but the pending list holds every
bank's recent units, so a small bank's lexical channel slowed with every other bank's
writes (benchmarks/scale.py at 1M units, docs/decisions/0009-vector-index-per-bank.md). With
``fastupdate = off`` each insert updates the index directly, PostgreSQL's advice
when "consistent response time is more important than update speed" (docs, "GIN Fast
Update Technique"). Turning it off does not flush the existing list: vacuum does that.

Revision ID: 0008
Revises: 0007
"""

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER INDEX memory_units_bank_tsv SET (fastupdate = off)")
    op.execute("SELECT gin_clean_pending_list('memory_units_bank_tsv'::regclass)")


def downgrade() -> None:
    op.execute("ALTER INDEX memory_units_bank_tsv RESET (fastupdate)")
