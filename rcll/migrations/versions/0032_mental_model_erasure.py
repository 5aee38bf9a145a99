"""Mental models forget what their units forgot: a history row records the units its refresh
saw, and a ``forget`` action records an erasure.

When a unit's text is erased — ``forget`` (a tombstone), a document delete, a bank clear —
every mental model whose content was written from it (of any bank: a refresh also sees
tunnelled units) loses that content, in the same transaction
(:func:`rcll.store.mental_models.erase_seen`): the model's ``content`` and
``reflect_response``, and the contents kept in its history. Which models: those whose
current ``seen_unit_ids`` or any history row's ``seen_unit_ids`` (new here; ``NULL`` on
rows written before it) holds an erased unit; GIN indexes on both arrays find them. The
erasure is itself a history row, action ``forget``.

Revision ID: 0032
Revises: 0031
"""

from alembic import op

revision = "0032"
down_revision = "0031"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        ALTER TABLE mental_model_history ADD COLUMN seen_unit_ids uuid[];
        ALTER TABLE mental_model_history DROP CONSTRAINT mental_model_history_action_check;
        ALTER TABLE mental_model_history ADD CONSTRAINT mental_model_history_action_check
            CHECK (action IN ('refresh', 'clear', 'forget'));
        CREATE INDEX mental_models_seen ON mental_models USING gin (seen_unit_ids);
        CREATE INDEX mental_model_history_seen ON mental_model_history
            USING gin (seen_unit_ids);
    """)


def downgrade() -> None:
    op.execute("""
        DROP INDEX IF EXISTS mental_models_seen;
        DROP INDEX IF EXISTS mental_model_history_seen;
        DELETE FROM mental_model_history WHERE action = 'forget';
        ALTER TABLE mental_model_history DROP CONSTRAINT mental_model_history_action_check;
        ALTER TABLE mental_model_history ADD CONSTRAINT mental_model_history_action_check
            CHECK (action IN ('refresh', 'clear'));
        ALTER TABLE mental_model_history DROP COLUMN seen_unit_ids;
    """)
