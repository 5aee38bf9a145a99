"""The sentence embedder on onnxruntime: the bundled weights exported to ONNX on this machine,
cached in the state folder, in fp32 or dynamically quantised int8.

Nothing is downloaded: the export reads the same local weights sentence-transformers loads
(:func:`rcll.models.embedder.resolve_model_path`), traces the transformer with torch's ONNX
exporter and writes ``<state_dir>/onnx/<model>-<key>/model.fp32.onnx``; int8 is
``onnxruntime.quantization.quantize_dynamic`` of that file (int8 weights per output
channel, MatMul only: the token embedding table stays fp32) as ``model.int8.onnx``. ``key``
hashes the weights file (path, size, mtime), the export recipe version and the torch,
transformers and onnxruntime versions, so changed weights or tools export anew. A file lock
(``filelock``) makes two processes that start at once export once; each file is written
under a temporary name and renamed, so a reader never sees half a file.

At run time only ``tokenizers`` and ``onnxruntime`` are used (no torch): the model's own
``tokenizer.json`` with truncation to the model's ``max_seq_length`` (256 for
all-MiniLM-L6-v2, the limit sentence-transformers applies) and padding to the batch's
longest text, then mean pooling over the attention mask and L2 normalisation exactly as
sentence-transformers' ``Pooling`` and ``Normalize`` modules compute them. fp32 gives the
torch vectors back (cosine >= 0.999, ``tests/models/test_onnx_runtime.py``); int8 gives
other vectors, so it stores them under its own stamp
(:func:`rcll.models.embedder.embedder_stamp`).

``InferenceSession.run`` releases the GIL and is safe to call from several threads at once,
so this embedder takes no process-wide lock: concurrent recalls of one process embed in
parallel, each pass on ``threads`` intra-op threads (``RCLL_ONNX_THREADS``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
from pathlib import Path

import numpy as np

from rcll.models.batching import token_batches
from rcll.models.embedder import embedder_stamp, resolve_model_path
from rcll.models.tokenizer import model_window
from rcll.telemetry import metrics

log = logging.getLogger(__name__)

# Bump when the export or quantisation recipe changes: every cached export is made anew.
EXPORT_VERSION = "1"
PRECISIONS = ("fp32", "int8")
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def _weights_file(model_dir: Path) -> Path:
    for name in ("model.safetensors", "pytorch_model.bin"):
        if (model_dir / name).exists():
            return model_dir / name
    raise FileNotFoundError(f"no model.safetensors or pytorch_model.bin in {model_dir}")


def export_key(model_dir: Path) -> str:
    """A short hash of what the export depends on: the weights file (resolved path, size,
    mtime), :data:`EXPORT_VERSION`, and the torch, transformers and onnxruntime versions
    installed. Raises ``FileNotFoundError`` when the folder has no weights."""
    from importlib.metadata import PackageNotFoundError, version

    w = _weights_file(model_dir)
    st = w.stat()
    parts = [str(w.resolve()), str(st.st_size), str(st.st_mtime_ns), EXPORT_VERSION]
    for pkg in ("torch", "transformers", "onnxruntime"):
        try:
            parts.append(f"{pkg}={version(pkg)}")
        except PackageNotFoundError:
            parts.append(f"{pkg}=none")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:12]


def export_dir(state_dir: Path, model_name: str) -> Path:
    """``<state_dir>/onnx/<model slug>-<export_key>``: where the exports of ``model_name``
    live. Raises ``FileNotFoundError`` when the model resolves to no local folder with
    weights (a hub id not in the local cache: there is nothing to export from)."""
    model_dir = Path(resolve_model_path(model_name))
    if not model_dir.is_dir():
        raise FileNotFoundError(f"{model_name}: no local model folder to export from")
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model_name.strip("/").split("/")[-1])[:60]
    return Path(state_dir) / "onnx" / f"{slug}-{export_key(model_dir)}"


def _atomic_target(dest: Path) -> Path:
    fd, tmp = tempfile.mkstemp(prefix=dest.name + ".", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    return Path(tmp)


def _export_fp32(model_dir: Path, dest: Path) -> None:
    """Trace the transformer of ``model_dir`` (``last_hidden_state`` out, batch and sequence
    axes dynamic) into ``dest``. Needs torch and transformers."""
    import warnings

    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(model_dir), attn_implementation="eager").eval()

    class _Encoder(torch.nn.Module):  # keyword arguments: transformers' positional order moved
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    ids = torch.ones(2, 8, dtype=torch.long)
    tmp = _atomic_target(dest)
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                _Encoder(model), (ids, ids, torch.zeros_like(ids)), str(tmp),
                input_names=list(_INPUTS), output_names=["last_hidden_state"],
                dynamic_axes={k: {0: "batch", 1: "sequence"}
                              for k in (*_INPUTS, "last_hidden_state")},
                opset_version=17, dynamo=False)
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)


def _quantize_int8(src: Path, dest: Path) -> None:
    """Dynamic int8 quantisation of ``src`` into ``dest``: int8 weights per output channel
    on MatMul nodes, activations quantised at run time (uint8)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    tmp = _atomic_target(dest)
    try:
        quantize_dynamic(str(src), str(tmp), weight_type=QuantType.QInt8, per_channel=True,
                         op_types_to_quantize=["MatMul"])
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)


def ensure_export(model_name: str, state_dir: Path, precision: str = "fp32",
                  lock_timeout_s: float = 600) -> Path:
    """The ONNX file of ``model_name`` at ``precision`` (``fp32`` | ``int8``), exported now
    when the cache has none. Concurrent callers (threads or processes) serialise on a file
    lock in the export folder; the second finds the first's files and exports nothing.
    Raises ``ValueError`` for an unknown precision, ``FileNotFoundError`` for a model with
    no local weights, ``filelock.Timeout`` after ``lock_timeout_s``, and what the exporter
    raises for a model it cannot trace."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, not {precision!r}")
    from filelock import FileLock

    folder = export_dir(state_dir, model_name)
    dest = folder / f"model.{precision}.onnx"
    if dest.exists():
        return dest
    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder / ".export.lock"), timeout=lock_timeout_s):
        if dest.exists():  # another process exported while this one waited
            return dest
        model_dir = Path(resolve_model_path(model_name))
        fp32 = folder / "model.fp32.onnx"
        if not fp32.exists():
            log.info("exporting %s to ONNX in %s", model_name, folder)
            _export_fp32(model_dir, fp32)
        if precision == "int8":
            log.info("quantising %s to int8", model_name)
            _quantize_int8(fp32, dest)
        (folder / "export.json").write_text(json.dumps(
            {"model": model_name, "source": str(model_dir), "export_version": EXPORT_VERSION,
             "files": sorted(p.name for p in folder.glob("model.*.onnx"))}, indent=1))
    return dest


def load_tokenizer(model_dir: Path, max_length: int):
    """The model's ``tokenizer.json`` (``tokenizers``) truncating to ``max_length`` tokens
    (special ones included) and padding to a batch's longest text: the token ids
    sentence-transformers feeds the model. Raises ``FileNotFoundError`` without the file."""
    from tokenizers import Tokenizer

    path = model_dir / "tokenizer.json"
    if not path.exists():
        raise FileNotFoundError(f"no tokenizer.json in {model_dir}")
    tok = Tokenizer.from_file(str(path))
    tok.enable_truncation(max_length=max_length)
    pad_id = tok.token_to_id("[PAD]")
    tok.enable_padding(pad_id=pad_id if pad_id is not None else 0,
                       pad_token="[PAD]" if pad_id is not None else "<pad>")
    return tok


def session(path: Path, threads: int):
    """An onnxruntime CPU session of ``path`` with ``threads`` intra-op threads (0 = one per
    core, onnxruntime's default) and one inter-op thread, every graph optimisation on."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = max(0, threads)
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def mean_pool_normalise(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """sentence-transformers' mean pooling then L2 normalisation: ``hidden`` (n, tokens, dim)
    averaged over the tokens ``mask`` (n, tokens) marks (count clamped at 1e-9), each row
    divided by its norm (clamped at 1e-12). float32 (n, dim)."""
    m = mask[..., None].astype(np.float32)
    summed = (hidden.astype(np.float32) * m).sum(axis=1)
    pooled = summed / np.clip(m.sum(axis=1), 1e-9, None)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)


class OnnxEmbedder:
    """A sentence-transformers model (transformer, mean pooling, normalisation) on
    onnxruntime. ``embed(list[str]) -> float32 (n, dim)`` unit-norm rows, in input order;
    ``model_name`` the configured name, ``stamp`` what its vectors are stored under
    (``<model>`` for fp32, ``<model>#int8`` for int8), ``path`` the ONNX file it runs.
    Raises at construction what :func:`ensure_export` raises."""

    runtime = "onnx"

    def __init__(self, model_name: str, state_dir: Path, precision: str = "fp32",
                 threads: int = 1, batch_size: int = 64, batch_tokens: int = 0):
        self.model_name = model_name
        self.precision = precision
        self.stamp = embedder_stamp(model_name, "onnx", precision)
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens  # > 0: rcll.models.batching.token_batches
        model_dir = Path(resolve_model_path(model_name))
        self.max_length = model_window(model_dir) or 512
        self.path = ensure_export(model_name, Path(state_dir), precision)
        self._tok = load_tokenizer(model_dir, self.max_length)
        self._session = session(self.path, threads)
        self._inputs = {i.name for i in self._session.get_inputs()}
        self.dim = int(self._encode(["dimension probe"]).shape[1])

    def embed(self, texts: list[str]) -> np.ndarray:
        with metrics.embed_call(len(texts)):
            if not texts:
                return np.empty((0, self.dim), dtype=np.float32)
            out = np.empty((len(texts), self.dim), dtype=np.float32)
            if self.batch_tokens > 0 and len(texts) > 1:
                groups = token_batches(self.token_lengths(texts), self.batch_tokens,
                                       self.batch_size)
            else:
                groups = [list(range(i, min(i + self.batch_size, len(texts))))
                          for i in range(0, len(texts), self.batch_size)]
            for idx in groups:
                out[idx] = self._encode([texts[i] for i in idx])
            return out

    def _encode(self, texts: list[str]) -> np.ndarray:
        enc = self._tok.encode_batch(texts)
        ids = np.asarray([e.ids for e in enc], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in enc], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask,
                "token_type_ids": np.zeros_like(ids)}
        hidden = self._session.run(None, {k: v for k, v in feed.items() if k in self._inputs})[0]
        return mean_pool_normalise(hidden, mask)

    def token_lengths(self, texts: list[str]) -> list[int]:
        """Tokens the model reads of each text (special tokens included, capped at its
        window): what one text adds to a batch's padded size."""
        return [sum(e.attention_mask) for e in self._tok.encode_batch(texts)]
