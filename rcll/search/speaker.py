"""Speaker prior: a query about a person favours the turns that person said.

Conversation units start with their speaker's label (``"Caroline: …"``, ``"user: …"``; the
chunker keeps it on every part of a split turn). A question names whom it is about —
"When did Caroline go to the support group?" — or, asked by the user of a chat assistant,
speaks in the first person — "What degree did I graduate with?". The words that say so carry
no lexical evidence (a speaker's name is in half a conversation's turns, so the lexical
channel drops it as common; "I" is a stop word), yet the turns that answer are mostly that
speaker's own (measured on LoCoMo: docs/decisions/0002-recipe-full-session-coverage-dense-floor.md).

The step multiplies the fused score of the pool's units spoken by a *target* speaker by
``1 + boost`` and re-sorts the pool. Targets: the pool's speakers named in the query (whole
word, any case), plus the ``first_person`` labels when the query says I/me/my/mine/myself
and the ``second_person`` labels when it says you/your/yours/yourself — the roles of a chat
transcript, where the one asking is the user. Nothing happens when there is no target or the
targets are every speaker of the pool (a question about both people of a conversation).
"""

from __future__ import annotations

import re

from rcll.search.state import RecallState

# A unit's speaker: a name of one to three words of letters ("Caroline", "Dr. Ana Lima",
# "user"), at most 40 characters, then ": ".
SPEAKER = re.compile(r"\s*([^\W\d_]+(?:[ .'-]+[^\W\d_]+){0,2}\.?):\s")
FIRST_PERSON = re.compile(r"\b(?:i|me|my|mine|myself)\b", re.IGNORECASE)
SECOND_PERSON = re.compile(r"\b(?:you|your|yours|yourself)\b", re.IGNORECASE)


def unit_speaker(text: str) -> str | None:
    """The speaker label a unit's text starts with, lower-cased (``"caroline"``), else None."""
    m = SPEAKER.match(text or "")
    return m.group(1).strip().lower() if m and len(m.group(1)) <= 40 else None


def query_targets(query: str, speakers: set[str], first_person=("user",),
                  second_person=("assistant",)) -> set[str]:
    """The speakers of ``speakers`` (lower-cased labels) that ``query`` is about: those it
    names as a whole word, plus ``first_person`` labels for I/me/my and ``second_person``
    labels for you/your, each only if among ``speakers``."""
    targets = {s for s in speakers
               if re.search(r"(?<!\w)" + re.escape(s) + r"(?!\w)", query, re.IGNORECASE)}
    if FIRST_PERSON.search(query):
        targets |= {s for s in first_person if s in speakers}
    if SECOND_PERSON.search(query):
        targets |= {s for s in second_person if s in speakers}
    return targets


def speaker_step(state: RecallState, boost: float = 0.25, first_person=("user",),
                 second_person=("assistant",)) -> None:
    """Multiply by ``1 + boost`` the fused score of the pool's units (``state.pool_size()``
    first) whose speaker is a target of the query (:func:`query_targets`), and re-sort the
    pool; the rest stays after it. Stage score ``speaker`` per boosted unit;
    ``counts["speaker_targets"]``: the targets (sorted), ``counts["speaker_boosted"]``: how
    many units were boosted. ``boost`` is chosen on LoCoMo (benchmarks/bm25_length.py)."""
    n = state.pool_size()
    pool = state.ranked[:n]
    rows = state.hydrate([uid for uid, _ in pool])
    who = {uid: unit_speaker(rows[uid]["text"]) if uid in rows else None for uid, _ in pool}
    speakers = {s for s in who.values() if s}
    targets = query_targets(state.request.query, speakers, first_person, second_person)
    state.counts["speaker_targets"] = sorted(targets)
    state.counts["speaker_boosted"] = 0
    if boost <= 0 or not targets or targets >= speakers:
        return
    state.counts["speaker_boosted"] = state.boost_pool(
        {uid for uid, _ in pool if who[uid] in targets}, boost, "speaker")
