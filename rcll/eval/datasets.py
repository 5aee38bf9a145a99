"""Loaders that turn LoCoMo and LongMemEval into banks of retain items plus gold-labelled questions.

The protocol is ``../shared/data/README.md``: every turn becomes one retain item (one unit in
chunk mode) stamped with its session time; each question is asked of its own bank only.

Ids used for scoring are strings, scoped to the bank:

- LoCoMo: turn id = ``dia_id`` (``"D3:7"``), session id = ``str(session)`` (``"3"``), the same
  form as ``relevant_sessions`` (ints in the jsonl) after ``str``.
- LongMemEval: session id = ``"s<position in the haystack, 3 digits>"`` (``"s007"``), turn id =
  ``"<session id>/<turn index>"``. Upstream session ids are *not* sent to the service because
  they leak gold (answer sessions are named ``answer_<hash>_<n>``); ``EvalDataset.session_names``
  maps the opaque ids back for diagnosis. ``has_answer`` is never sent either.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

LOCOMO_CATEGORIES: dict[int, str] = {
    1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
LOCOMO_MEMORIES = "locomo10_memories.jsonl"
LOCOMO_QUERIES = "locomo10_queries.jsonl"
LME_DATE_FORMAT = "%Y/%m/%d (%a) %H:%M"


@dataclass(frozen=True)
class EvalQuestion:
    """One benchmark question: asked of ``bank_id``; gold ids are bank-scoped strings.

    ``gold_turns`` may be empty (not scorable at turn level); ``gold_sessions`` likewise.
    """

    qid: str
    bank_id: str
    query: str
    category: str
    gold_turns: frozenset[str]
    gold_sessions: frozenset[str]
    query_timestamp: str | None = None  # when the question is asked (LongMemEval's date)


@dataclass
class EvalDataset:
    """Banks to ingest and questions to ask.

    ``banks``: ``{bank_id: [retain item, ...]}`` in turn order, items shaped
    ``{"content", "timestamp", "context", "metadata", "document_id"}``.
    ``unit_ids(result)`` maps one recall result to ``(turn_id, session_id)`` or None when the
    unit cannot be traced to a turn (e.g. a summary without metadata).
    """

    name: str
    source: str
    banks: dict[str, list[dict]]
    questions: list[EvalQuestion]
    unit_ids: Callable[[Mapping], tuple[str, str] | None]
    session_names: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def n_items(self) -> int:
        return sum(len(items) for items in self.banks.values())


def _read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


# -- LoCoMo ------------------------------------------------------------------------------
def locomo_turn_text(turn: Mapping) -> str:
    """``"<speaker>: <text>"`` plus ``" [shares image: <caption>]"`` when a caption exists."""
    text = f"{turn['speaker']}: {turn['text']}"
    caption = turn.get("blip_caption")
    if caption:
        text += f" [shares image: {caption}]"
    return text


def _locomo_session_of_dia(dia_id: str) -> str | None:
    head = dia_id.split(":", 1)[0]
    return head[1:] if head.startswith("D") and head[1:].isdigit() else None


def locomo_unit_ids(result: Mapping) -> tuple[str, str] | None:
    """(dia_id, session) of a recall result, from its metadata or, failing that, its
    ``"<sample_id>/<dia_id>"`` document id."""
    meta = result.get("metadata") or {}
    dia_id = meta.get("dia_id")
    if not dia_id:
        doc = str(result.get("document_id") or "")
        dia_id = doc.rsplit("/", 1)[-1] if "/" in doc else None
    if not dia_id:
        return None
    session = meta.get("session")
    session = str(session) if session is not None else _locomo_session_of_dia(dia_id)
    return (str(dia_id), session) if session is not None else None


def load_locomo(data_dir: str | Path, bank_prefix: str = "eval-locomo-") -> EvalDataset:
    """LoCoMo from ``data_dir/locomo10_memories.jsonl`` and ``data_dir/locomo10_queries.jsonl``.

    One bank per conversation (``f"{bank_prefix}{sample_id}"``), one item per turn; only
    questions with ``use_for_retrieval_eval: true`` (1,536: categories 1–4 with valid
    evidence). Gold turns = ``relevant_dia_ids``, gold sessions = ``relevant_sessions``.
    Raises ``FileNotFoundError`` if a file is missing.
    """
    data_dir = Path(data_dir)
    banks: dict[str, list[dict]] = {}
    for turn in _read_jsonl(data_dir / LOCOMO_MEMORIES):
        sample_id, dia_id, session = turn["sample_id"], turn["dia_id"], turn["session"]
        banks.setdefault(f"{bank_prefix}{sample_id}", []).append(
            {
                "content": locomo_turn_text(turn),
                "timestamp": turn.get("timestamp"),
                "context": f"session {session} of {sample_id}, {turn.get('session_date_time')}",
                "metadata": {"sample_id": sample_id, "dia_id": dia_id, "session": session},
                "document_id": f"{sample_id}/{dia_id}",
            }
        )
    questions = [
        EvalQuestion(
            qid=str(q["query_id"]),
            bank_id=f"{bank_prefix}{q['sample_id']}",
            query=q["question"],
            category=LOCOMO_CATEGORIES.get(q["category"], str(q["category"])),
            gold_turns=frozenset(str(d) for d in q.get("relevant_dia_ids") or ()),
            gold_sessions=frozenset(str(s) for s in q.get("relevant_sessions") or ()),
        )
        for q in _read_jsonl(data_dir / LOCOMO_QUERIES)
        if q.get("use_for_retrieval_eval")
    ]
    return EvalDataset("locomo", str(data_dir), banks, questions, locomo_unit_ids)


# -- LongMemEval ---------------------------------------------------------------------------
def lme_timestamp(value: str) -> str:
    """``"2023/05/30 (Tue) 23:40"`` → ``"2023-05-30T23:40:00"`` (naive ISO 8601)."""
    return datetime.strptime(value.strip(), LME_DATE_FORMAT).isoformat()


def lme_unit_ids(result: Mapping) -> tuple[str, str] | None:
    """(``"<session>/<turn_index>"``, session) of a recall result, from metadata or, failing
    that, its ``"<question_id>/<session>/<turn_index>"`` document id."""
    meta = result.get("metadata") or {}
    session, index = meta.get("session_id"), meta.get("turn_index")
    if session is None or index is None:
        parts = str(result.get("document_id") or "").split("/")
        if len(parts) != 3:
            return None
        session, index = parts[1], parts[2]
    return f"{session}/{index}", str(session)


def load_longmemeval(data_file: str | Path, bank_prefix: str = "eval-lme-") -> EvalDataset:
    """LongMemEval (cleaned S format) from a ``.json`` or ``.json.gz`` list of questions.

    One bank per question (``f"{bank_prefix}{question_id}"``), one item per haystack turn with
    text ``f"{role}: {content}"`` and the session's date. Gold turns = turns with
    ``has_answer: true``; gold sessions = ``answer_session_ids``; category = ``question_type``.
    Raises ``ValueError`` on a malformed record (mismatched haystack lists, unknown date).
    """
    data_file = Path(data_file)
    opener = gzip.open if data_file.suffix == ".gz" else open
    with opener(data_file, "rt", encoding="utf-8") as fh:
        records = json.load(fh)

    banks: dict[str, list[dict]] = {}
    questions: list[EvalQuestion] = []
    session_names: dict[str, dict[str, str]] = {}
    for rec in records:
        qid = str(rec["question_id"])
        bank_id = f"{bank_prefix}{qid}"
        sessions, dates, names = (
            rec["haystack_sessions"], rec["haystack_dates"], rec["haystack_session_ids"])
        if not len(sessions) == len(dates) == len(names):
            raise ValueError(f"{qid}: haystack sessions, dates and ids differ in length")
        width = max(3, len(str(len(sessions))))
        opaque = {name: f"s{pos:0{width}d}" for pos, name in enumerate(names)}
        items: list[dict] = []
        gold_turns: set[str] = set()
        for name, date, turns in zip(names, dates, sessions, strict=True):
            sid, ts = opaque[name], lme_timestamp(date)
            for index, turn in enumerate(turns):
                if turn.get("has_answer") is True:
                    gold_turns.add(f"{sid}/{index}")
                items.append(
                    {
                        "content": f"{turn['role']}: {turn['content']}",
                        "timestamp": ts,
                        "context": f"conversation session {sid}, {date}",
                        "metadata": {"question_id": qid, "session_id": sid, "turn_index": index},
                        "document_id": f"{qid}/{sid}/{index}",
                    }
                )
        banks[bank_id] = items
        session_names[bank_id] = {sid: name for name, sid in opaque.items()}
        questions.append(
            EvalQuestion(
                qid=qid,
                bank_id=bank_id,
                query=rec["question"],
                category=str(rec["question_type"]),
                gold_turns=frozenset(gold_turns),
                gold_sessions=frozenset(
                    opaque[s] for s in rec.get("answer_session_ids") or () if s in opaque),
                query_timestamp=lme_timestamp(rec["question_date"])
                if rec.get("question_date") else None,
            )
        )
    return EvalDataset("longmemeval", str(data_file), banks, questions, lme_unit_ids,
                       session_names)
