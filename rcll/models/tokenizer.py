"""Token counting for the recall budget with a real tokenizer (the embedder's WordPiece).

The tokenizer file ships with the embedder's weights, so counting works offline. If it is
missing, counting falls back to ``ceil(chars / 4)`` and says so in ``TokenCounter.exact``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from rcll.models.embedder import resolve_model_path


class TokenCounter:
    """``count(text) -> int`` and ``count_many(texts) -> list[int]`` (no special tokens).

    ``max_input_tokens`` is how many counted tokens the embedder reads before it truncates
    (its window minus the special tokens it adds), or ``None`` when unknown.
    """

    def __init__(self, model_name: str):
        self.exact = False
        self._tok = None
        model_dir = Path(resolve_model_path(model_name))
        path = model_dir / "tokenizer.json"
        if path.exists():
            from tokenizers import Tokenizer

            tok = Tokenizer.from_file(str(path))
            tok.no_truncation()
            tok.no_padding()
            self._tok = tok
            self.exact = True
        window = model_window(model_dir)
        specials = self._tok.post_processor.num_special_tokens_to_add(False) \
            if self._tok is not None and self._tok.post_processor is not None else 2
        self.max_input_tokens = window - specials if window else None

    def count(self, text: str) -> int:
        return self.count_many([text])[0]

    def count_many(self, texts: list[str]) -> list[int]:
        if self._tok is None:
            return [math.ceil(len(t) / 4) for t in texts]
        return [len(e.ids) for e in self._tok.encode_batch(texts, add_special_tokens=False)]


def model_window(model_dir: Path) -> int | None:
    """The embedder's input window in tokens (special tokens included), read from the model's
    own files without loading it: ``max_seq_length`` of ``sentence_bert_config.json`` (what
    sentence-transformers truncates to; 256 for all-MiniLM-L6-v2), else
    ``model_max_length`` of ``tokenizer_config.json``, else ``max_position_embeddings`` of
    ``config.json``. ``None`` when none is readable."""
    for name, key in (("sentence_bert_config.json", "max_seq_length"),
                      ("tokenizer_config.json", "model_max_length"),
                      ("config.json", "max_position_embeddings")):
        try:
            value = json.loads((model_dir / name).read_text()).get(key)
        except (OSError, ValueError):
            continue
        if isinstance(value, int) and 0 < value < 1_000_000:
            return value
    return None
