"""Cross-encoder reranker (sentence-transformers ``CrossEncoder``), loaded once and checked.

A cross-encoder scores (query, text) pairs jointly; recall uses it to reorder the top N of the
fused ranking (spec §5, tier 3 step 4). ``RCLL_RERANKER_MODEL`` names it: a hub id (read
from the local Hugging Face cache; the service runs with ``HF_HUB_OFFLINE=1``), a local
path, or ``all-MiniLM-L6-v2`` (the bundled embedder weights — a stand-in with the real
architecture and cost but an untrained scoring head).

A model whose scoring head is missing from its checkpoint (weights of a plain encoder, so
transformers initialises ``classifier.*`` at random) or has the wrong shape scores noise:
it is detected from transformers' own loading info (``output_loading_info=True`` of
``AutoModelForSequenceClassification.from_pretrained``: missing and mismatched parameter
keys), reported, and not used — unless ``RCLL_RERANKER_ALLOW_UNTRAINED=1``, which exists for
latency benchmarks only (the scores of such a model mean nothing).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path

from rcll.models.embedder import resolve_model_path

log = logging.getLogger(__name__)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


class UntrainedHead(Exception):
    """The checkpoint lacks (or mis-shapes) parameters the classification model needs; the
    message lists them."""


def head_problems(path: str, config) -> list[str]:
    """Parameter names of the sequence-classification model built from ``path`` with
    ``config`` that the checkpoint does not provide (missing, or present with another shape
    — ``"name (shape a -> b)"``), from transformers' loading info. Buffers are ignored.
    ``[]`` means every parameter came from the checkpoint. Raises what ``from_pretrained``
    raises (unknown path, unreadable weights)."""
    from transformers import AutoModelForSequenceClassification

    model, info = AutoModelForSequenceClassification.from_pretrained(
        path, config=config, output_loading_info=True)
    params = {name for name, _ in model.named_parameters()}
    out = sorted(k for k in info.get("missing_keys", ()) if k in params)
    for item in info.get("mismatched_keys", ()):
        name, *shapes = item if isinstance(item, (tuple, list)) else (item,)
        out.append(f"{name} ({' -> '.join(str(tuple(s)) for s in shapes)})" if shapes else name)
    del model
    return out


class CrossEncoderReranker:
    """A loaded cross-encoder on the CPU. ``score(query, texts, batch_size)`` → one float per
    text (the model's raw output after its default activation: for an ms-marco model a
    logit, higher = more relevant). ``untrained`` lists the head parameters the checkpoint
    lacked (empty for a trained model). One forward pass at a time per process (torch uses
    every core)."""

    runtime = "torch"

    def __init__(self, model_name: str, max_length: int | None = None):
        from sentence_transformers import CrossEncoder

        self.model_name = model_name
        path = resolve_model_path(model_name)
        self._model = CrossEncoder(path, device="cpu", max_length=max_length)
        hf = self._model[0].model  # the underlying AutoModelForSequenceClassification
        self.untrained = head_problems(path, hf.config)
        self._lock = threading.Lock()

    def score(self, query: str, texts: Sequence[str], batch_size: int = 16) -> list[float]:
        """Scores of ``(query, text)`` for each of ``texts``, in order. Raises what the model
        raises (the rerank step degrades on it)."""
        if not texts:
            return []
        with self._lock:
            scores = self._model.predict([(query, t) for t in texts], batch_size=batch_size,
                                         show_progress_bar=False, convert_to_numpy=True)
        return [float(s) for s in scores.reshape(len(texts), -1)[:, 0]]


class RerankerHandle:
    """The process's reranker: configured by name (``None``: off), loaded once — on first
    ``get()`` or by ``load()`` at start-up — under a lock, thread-safe.

    ``get()`` returns the :class:`CrossEncoderReranker` (``runtime`` ``torch``) or
    :class:`rcll.models.onnx_runtime.OnnxCrossEncoder` (``onnx``: exported at first use
    under ``state_dir``, at ``precision``, ``onnx_threads`` per pass; an export that fails
    falls back to torch — nothing is stored from scores) when it is usable, else ``None``:
    not configured, failed to load (unknown path, no cached hub copy), or an untrained head
    without ``allow_untrained``. ``status()`` says which.
    """

    def __init__(self, model_name: str | None, allow_untrained: bool = False,
                 max_length: int | None = None, runtime: str = "torch",
                 precision: str = "fp32", onnx_threads: int = 1,
                 state_dir: Path | str = ".rcll"):
        self.runtime, self.precision, self.onnx_threads = runtime, precision, onnx_threads
        self.state_dir = Path(state_dir)
        self.model_name = model_name or None
        self.allow_untrained = allow_untrained
        self.max_length = max_length
        self._model: CrossEncoderReranker | None = None
        self._usable = False
        self.reason: str | None = None if self.model_name else "no reranker configured (RCLL_RERANKER_MODEL)"
        self._tried = self.model_name is None
        self._lock = threading.Lock()

    @property
    def configured(self) -> bool:
        return self.model_name is not None

    def load(self) -> None:
        """Load and check the model now (idempotent; never raises)."""
        if self._tried:
            return
        with self._lock:
            if self._tried:
                return
            try:
                model = self._build()
                self._model = model
                if model.untrained:
                    head = ", ".join(model.untrained[:6])
                    if self.allow_untrained:
                        self._usable = True
                        self.reason = (f"untrained scoring head ({head}) used because "
                                       "RCLL_RERANKER_ALLOW_UNTRAINED is set: timing only, "
                                       "its scores mean nothing")
                        log.warning("reranker %s: %s", self.model_name, self.reason)
                    else:
                        self.reason = (f"untrained scoring head: {head} newly initialised "
                                       "(weights without a trained cross-encoder head)")
                        log.error("reranker %s not used: %s", self.model_name, self.reason)
                else:
                    self._usable = True
            except Exception as exc:
                self.reason = f"{type(exc).__name__}: {exc}"[:500]
                log.error("reranker %s unavailable: %s", self.model_name, self.reason)
            self._tried = True

    def _build(self):
        if self.runtime == "onnx":
            from rcll.models.onnx_runtime import OnnxCrossEncoder

            try:
                return OnnxCrossEncoder(self.model_name, self.state_dir, self.precision,
                                        self.onnx_threads, self.max_length)
            except Exception as exc:
                log.warning("reranker %s: no ONNX export (%s: %s); using torch",
                            self.model_name, type(exc).__name__, exc)
        return CrossEncoderReranker(self.model_name, self.max_length)

    def get(self) -> CrossEncoderReranker | None:
        """The usable reranker or ``None`` (loads on first call)."""
        self.load()
        return self._model if self._usable else None

    def status(self) -> dict:
        """``{"configured", "loaded", "usable", "model", "runtime", "reason"}`` for
        ``/readyz``; ``runtime`` what the loaded model runs on (``None`` before it loads);
        ``loaded`` is False until a load was attempted and succeeded; ``reason`` says why
        the model is not used (or that an untrained head is allowed for timing)."""
        return {"configured": self.configured, "loaded": self._model is not None,
                "usable": self._usable, "model": self.model_name,
                "runtime": getattr(self._model, "runtime", None), "reason": self.reason}
