"""ready_questions: only banks whose retain jobs have all ended are scored."""

from rcll.eval.datasets import EvalQuestion
from rcll.eval.runner import ready_questions


def _q(bank: str) -> EvalQuestion:
    return EvalQuestion(qid=bank, bank_id=bank, query="q", category="c",
                        gold_turns=frozenset(), gold_sessions=frozenset())


def test_only_banks_with_all_jobs_ended(services):
    # inside a transaction rolled back at the end: the suite's worker never sees these jobs
    with services.pool.connection() as conn, conn.transaction(force_rollback=True):
        for bank, states in {"rq-done": ["succeeded", "partial"],
                             "rq-busy": ["succeeded", "running"],
                             "rq-queued": ["queued"]}.items():
            conn.execute("INSERT INTO memory_banks (id, name) VALUES (%s, %s) "
                         "ON CONFLICT DO NOTHING", (bank, bank))
            for st in states:
                conn.execute("INSERT INTO jobs (bank_id, kind, payload, counts, state) "
                             "VALUES (%s, 'retain', '[]', '{}', %s)", (bank, st))
        got = ready_questions(conn, [_q(b) for b in ("rq-done", "rq-busy", "rq-queued",
                                                      "rq-none")])
    assert [q.bank_id for q in got] == ["rq-done"]
