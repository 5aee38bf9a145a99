"""Entity resolution rules: when a new name is the same entity as a stored one (spec §4 step 4).

Pure functions, no I/O; :mod:`rcll.store.entities` fetches the candidates (exact normalized
name, aliases, pg_trgm similarity) and applies the verdicts. Deterministic and conservative,
because nothing is merged on a guess (spec §1 claim 6):

- **same** — the normalized names are equal, or equal once spaces are removed
  (``post gres`` / ``postgres``), or an alias of the entity; or two independent strong
  signals agree: trigram similarity ≥ :data:`CERTAIN_SIMILARITY` *and* at most one edit apart
  on names of at least :data:`MIN_FUZZY_LEN` characters (``kubernetes clusters`` /
  ``kubernetes cluster``).
- **distinct**, whatever the similarity — the guards:
  names whose numbers differ (``room 101`` / ``room 102``, ``inc 4471`` / ``inc 4472``);
  a short name (≤ :data:`SHORT_NAME` characters) that is not an exact match (``mel`` /
  ``mei``); a single weak signal with low similarity — one name contained in the other
  (``iran`` / ``tigran``) or a shared word only (``dana lee`` / ``lee park``).
- **propose** — close but not certain (similarity ≥ :data:`PROPOSE_SIMILARITY`, or one
  multi-word name containing the other as whole words: ``caroline`` / ``caroline smith``):
  a new entity is created and an entity-merge proposal records the pair for a person (or a
  configured LLM) to decide.

Thresholds: pg_trgm similarity is |shared trigrams| / |union of trigrams| (PostgreSQL
pg_trgm documentation); 0.5 for proposals is above pg_trgm's default 0.3 match threshold, to
keep proposal lists short; 0.85 with ≤ 1 edit for certainty admits plural/typo variants
of long names only. They are choices, checked by the guard cases in
``tests/entities/test_resolution_guards.py``, not fitted figures.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SHORT_NAME = 4
MIN_FUZZY_LEN = 8
CERTAIN_SIMILARITY = 0.85
PROPOSE_SIMILARITY = 0.5
_NUMBER = re.compile(r"\d+[a-z]*")


@dataclass(frozen=True)
class Verdict:
    """``action`` is ``same``, ``propose`` or ``distinct``; ``reason`` says which rule."""

    action: str
    reason: str


def numbers(name: str) -> tuple[str, ...]:
    """The numbers in a name with any letter suffix, in order, without leading zeros
    (``vol 007`` → ``("7",)``, ``room 101a`` → ``("101a",)``)."""
    return tuple(n.lstrip("0") or "0" for n in _NUMBER.findall(name))


def trigrams(name: str) -> set[str]:
    """pg_trgm's trigrams of a name: each word (alphanumeric run) lower-cased and padded with
    two spaces before and one after, every 3-character window. Mirrors ``show_trgm``."""
    out: set[str] = set()
    for word in re.findall(r"[^\W_]+", name.lower()):
        padded = f"  {word} "
        out.update(padded[i:i + 3] for i in range(len(padded) - 2))
    return out


def similarity(a: str, b: str) -> float:
    """pg_trgm ``similarity(a, b)``: shared trigrams over the union, 0–1."""
    ta, tb = trigrams(a), trigrams(b)
    return len(ta & tb) / len(ta | tb) if ta and tb else 0.0


def edit_distance(a: str, b: str, cap: int = 3) -> int:
    """Levenshtein distance of ``a`` and ``b``, stopping early at ``cap`` (returns ``cap``)."""
    if abs(len(a) - len(b)) >= cap:
        return cap
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        if min(cur) >= cap:
            return cap
        prev = cur
    return min(prev[-1], cap)


def decide(new: str, known: str, sim: float | None = None, aliases: tuple[str, ...] = ()) -> Verdict:
    """Whether the normalized name ``new`` is the stored entity named ``known`` (with
    ``aliases``); ``sim`` is their trigram similarity (computed here when ``None``).
    Raises nothing."""
    if new == known or new in aliases:
        return Verdict("same", "exact" if new == known else "alias")
    if new.replace(" ", "") == known.replace(" ", ""):
        return Verdict("same", "spacing")
    if numbers(new) != numbers(known):
        return Verdict("distinct", "numbers differ")
    if min(len(new), len(known)) <= SHORT_NAME:
        return Verdict("distinct", "short name, not exact")
    sim = similarity(new, known) if sim is None else sim
    if (sim >= CERTAIN_SIMILARITY and min(len(new), len(known)) >= MIN_FUZZY_LEN
            and edit_distance(new, known) <= 1):
        return Verdict("same", f"similarity {sim:.2f} and one edit")
    words_new, words_known = new.split(), known.split()
    contained = (set(words_new) < set(words_known) or set(words_known) < set(words_new))
    if sim >= PROPOSE_SIMILARITY:
        return Verdict("propose", f"similarity {sim:.2f}")
    if contained and words_new[0] == words_known[0]:
        return Verdict("propose", "one name starts the other")
    return Verdict("distinct", "one weak signal at most")
