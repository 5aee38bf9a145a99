"""What makes a unit the same unit, and a document version the same document: one home.

Who may see a memory (its ``audience`` and ``purposes``, :mod:`rcll.access.visibility`) is
part of its identity, and so is a chunk's place among equal chunks of its document:

- **Document lineage.** A document is identified by ``(bank, document id, audience,
  purposes)`` (:func:`lineage_key`); its versions replace one another only within that key.
  Two members who retain the same document id — or, without a document id, the same text,
  whose id is then :func:`content_document_id` — with different audiences or purposes get
  two documents, and neither write can hide, rewrite or reveal the other's units. A reader
  sees the lineages the visibility rule lets it see; a delete removes exactly those. A
  document unit whose audience or purposes a lifecycle verb changes moves to the lineage of
  its new visibility (:func:`rcll.store.units.move_to_lineage`).
- **Chunk identity.** Within a document version a chunk is identified by its text and by
  its occurrence among equal texts (:func:`chunk_keys`): the first ``NOTICE`` paragraph and
  the second are two chunks, so a document with repeated sections reads back whole and in
  order, and an unchanged chunk keeps its unit from one version to the next.
- **Duplicates.** Two units are candidates for one another (dedup proposals, merges) only
  when exactly the same callers may see them (:func:`same_visibility_sql`).

Purposes are a set: a lineage stores them sorted (:func:`canonical_purposes`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence


def sha256(text: str) -> str:
    """Hex SHA-256 of ``text`` encoded as UTF-8."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def canonical_purposes(purposes: Sequence[str]) -> list[str]:
    """``purposes`` as the set a lineage key holds: duplicates dropped, sorted."""
    return sorted(set(purposes))


def content_document_id(content: str) -> str:
    """The document id of an item retained without one: ``sha256:`` and the first 32 hex
    digits of its content's hash (audience and purposes complete the lineage key)."""
    return f"sha256:{sha256(content)[:32]}"


def lineage_key(bank_id: str, document_id: str, audience: str,
                purposes: Sequence[str]) -> tuple[str, str, str, tuple[str, ...]]:
    """``(bank, document id, audience, sorted purposes)``: the unique key of a ``documents``
    row (migration 0019)."""
    return bank_id, document_id, audience, tuple(canonical_purposes(purposes))


def chunk_keys(texts: Sequence[str]) -> list[str]:
    """The identity of each chunk of one document version, in order: the SHA-256 of its
    text for the first occurrence of that text, and of ``text + NUL + n`` for its ``n``-th
    repeat (n ≥ 1). Distinct within a version; stable when other chunks change."""
    seen: dict[str, int] = {}
    out = []
    for text in texts:
        n = seen.get(text, 0)
        seen[text] = n + 1
        out.append(sha256(text) if n == 0 else sha256(f"{text}\x00{n}"))
    return out


def same_visibility_sql(a: str, b: str) -> str:
    """SQL: rows ``a`` and ``b`` (memory units) are visible to exactly the same callers —
    same audience, same set of purposes."""
    return (f"{a}.audience = {b}.audience AND {a}.purposes @> {b}.purposes "
            f"AND {a}.purposes <@ {b}.purposes")
