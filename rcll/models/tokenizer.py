"""Token counting for the recall budget with a real tokenizer (the embedder's WordPiece).

The tokenizer file ships with the embedder's weights, so counting works offline. If it is
missing, counting falls back to ``ceil(chars / 4)`` and says so in ``TokenCounter.exact``.
"""

from __future__ import annotations

import math
from pathlib import Path

from rcll.models.embedder import resolve_model_path


class TokenCounter:
    """``count(text) -> int`` and ``count_many(texts) -> list[int]`` (no special tokens)."""

    def __init__(self, model_name: str):
        self.exact = False
        self._tok = None
        path = Path(resolve_model_path(model_name)) / "tokenizer.json"
        if path.exists():
            from tokenizers import Tokenizer

            tok = Tokenizer.from_file(str(path))
            tok.no_truncation()
            tok.no_padding()
            self._tok = tok
            self.exact = True

    def count(self, text: str) -> int:
        return self.count_many([text])[0]

    def count_many(self, texts: list[str]) -> list[int]:
        if self._tok is None:
            return [math.ceil(len(t) / 4) for t in texts]
        return [len(e.ids) for e in self._tok.encode_batch(texts, add_special_tokens=False)]
