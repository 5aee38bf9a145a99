"""Text rules with no dependency beyond the standard library, so the file converter's
sandboxed children (:mod:`rcll.files.sandbox`, bounded in memory) import them without
loading pydantic."""

from __future__ import annotations

import unicodedata


def is_blank(value: str) -> bool:
    """True when ``value`` holds nothing visible: only white space (``str.isspace``) and
    invisible format or control characters (Unicode categories Cf and Cc — zero-width
    spaces and joiners, the byte-order mark, word joiners), which ``str.strip`` keeps."""
    return all(ch.isspace() or unicodedata.category(ch) in ("Cf", "Cc") for ch in value)
