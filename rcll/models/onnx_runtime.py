"""The sentence embedder and the cross-encoder on onnxruntime: the bundled (or any local)
weights exported to ONNX on this machine, cached in the state folder, in fp32 or dynamically
quantised int8.

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

The cross-encoder (:class:`OnnxCrossEncoder`) is the sequence-classification model
sentence-transformers' ``CrossEncoder`` builds, exported with its ``logits`` under
``<model>-ce-<key>/``; its activation, window and untrained-head check are recorded at
export, and scores equal ``CrossEncoder.predict``'s in fp32.

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
import threading
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


KINDS = ("embedder", "cross-encoder")


def export_dir(state_dir: Path, model_name: str, kind: str = "embedder") -> Path:
    """``<state_dir>/onnx/<model slug>-<export_key>`` (``-ce-`` before the key for a
    cross-encoder): where the exports of ``model_name`` as ``kind`` live. Raises
    ``FileNotFoundError`` when the model resolves to no local folder with weights (a hub id
    not in the local cache: there is nothing to export from)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
    model_dir = Path(resolve_model_path(model_name))
    if not model_dir.is_dir():
        raise FileNotFoundError(f"{model_name}: no local model folder to export from")
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model_name.strip("/").split("/")[-1])[:60]
    mid = "-ce" if kind == "cross-encoder" else ""
    return Path(state_dir) / "onnx" / f"{slug}{mid}-{export_key(model_dir)}"


def _atomic_target(dest: Path) -> Path:
    fd, tmp = tempfile.mkstemp(prefix=dest.name + ".", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    return Path(tmp)


def _trace(model, output: str, dest: Path) -> None:
    """Export ``model`` (a transformers model taking ``input_ids``, ``attention_mask``,
    ``token_type_ids``; ``output`` the attribute of its output to keep) into ``dest``,
    batch and sequence axes dynamic. Needs torch."""
    import warnings

    import torch

    class _Wrapped(torch.nn.Module):  # keyword arguments: transformers' positional order moved
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            return getattr(self.inner(input_ids=input_ids, attention_mask=attention_mask,
                                      token_type_ids=token_type_ids), output)

    ids = torch.ones(2, 8, dtype=torch.long)
    tmp = _atomic_target(dest)
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                _Wrapped(model.eval()), (ids, ids, torch.zeros_like(ids)), str(tmp),
                input_names=list(_INPUTS), output_names=[output],
                dynamic_axes={k: {0: "batch", 1: "sequence"} for k in (*_INPUTS, output)},
                opset_version=17, dynamo=False)
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)


def _export_fp32(model_dir: Path, dest: Path) -> dict:
    """The transformer of ``model_dir`` (``last_hidden_state`` out) into ``dest``. Needs
    torch and transformers. Returns ``{}`` (nothing to remember beside the file)."""
    from transformers import AutoModel

    _trace(AutoModel.from_pretrained(str(model_dir), attn_implementation="eager"),
           "last_hidden_state", dest)
    return {}


def _export_cross_encoder(model_dir: Path, dest: Path) -> dict:
    """The cross-encoder sentence-transformers builds from ``model_dir`` (its
    sequence-classification model, ``logits`` out) into ``dest``, and what scoring needs
    beside it: ``{"activation": "sigmoid" | "identity", "max_length", "untrained"}``
    (``untrained``: :func:`rcll.models.reranker.head_problems` — a freshly initialised head
    is exported as it was drawn, and flagged). Raises ``ValueError`` for an activation other
    than sigmoid or identity."""
    from sentence_transformers import CrossEncoder

    from rcll.models.reranker import head_problems

    ce = CrossEncoder(str(model_dir), device="cpu")
    hf = ce[0].model
    name = type(ce.activation_fn).__name__.lower()
    if name not in ("sigmoid", "identity"):
        raise ValueError(f"cross-encoder activation {type(ce.activation_fn).__name__} "
                         "is not supported on onnx")
    hf.config._attn_implementation = "eager"
    _trace(hf, "logits", dest)
    cap = min(int(ce.tokenizer.model_max_length),
              int(getattr(hf.config, "max_position_embeddings", 512) or 512))
    return {"activation": name, "max_length": cap,
            "untrained": head_problems(str(model_dir), hf.config)}


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
                  lock_timeout_s: float = 600, kind: str = "embedder") -> Path:
    """The ONNX file of ``model_name`` as ``kind`` (``embedder`` | ``cross-encoder``) at
    ``precision`` (``fp32`` | ``int8``), exported now when the cache has none; its folder's
    ``export.json`` records the model, the files and (cross-encoder) how to score
    (:func:`export_info`). Concurrent callers (threads or processes) serialise on a file
    lock in the export folder; the second finds the first's files and exports nothing.
    Raises ``ValueError`` for an unknown precision or kind, ``FileNotFoundError`` for a
    model with no local weights, ``filelock.Timeout`` after ``lock_timeout_s``, and what the
    exporter raises for a model it cannot trace."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, not {precision!r}")
    from filelock import FileLock

    folder = export_dir(state_dir, model_name, kind)
    dest = folder / f"model.{precision}.onnx"
    if dest.exists() and (folder / "export.json").exists():
        return dest
    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder / ".export.lock"), timeout=lock_timeout_s):
        if dest.exists() and (folder / "export.json").exists():  # exported meanwhile
            return dest
        model_dir = Path(resolve_model_path(model_name))
        fp32 = folder / "model.fp32.onnx"
        meta_path = folder / "export.json"
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
        if not fp32.exists() or not meta:
            log.info("exporting %s to ONNX in %s", model_name, folder)
            export = _export_cross_encoder if kind == "cross-encoder" else _export_fp32
            meta = {"model": model_name, "kind": kind, "source": str(model_dir),
                    "export_version": EXPORT_VERSION, **export(model_dir, fp32)}
        if precision == "int8" and not dest.exists():
            log.info("quantising %s to int8", model_name)
            _quantize_int8(fp32, dest)
        meta["files"] = sorted(p.name for p in folder.glob("model.*.onnx"))
        tmp = _atomic_target(meta_path)
        tmp.write_text(json.dumps(meta, indent=1))
        os.replace(tmp, meta_path)
    return dest


def export_info(path: Path) -> dict:
    """The ``export.json`` beside an exported file (``model``, ``kind``, ``files``; for a
    cross-encoder ``activation``, ``max_length``, ``untrained``)."""
    return json.loads((Path(path).parent / "export.json").read_text())


def load_tokenizer(model_dir: Path, max_length: int, pad: bool = True):
    """The model's ``tokenizer.json`` (``tokenizers``) truncating to ``max_length`` tokens
    (special ones included) and, with ``pad``, padding to a batch's longest text: the token
    ids sentence-transformers feeds the model. ``tok.pad_id`` is the padding id. Raises
    ``FileNotFoundError`` without the file."""
    from tokenizers import Tokenizer

    path = model_dir / "tokenizer.json"
    if not path.exists():
        raise FileNotFoundError(f"no tokenizer.json in {model_dir}")
    tok = Tokenizer.from_file(str(path))
    tok.enable_truncation(max_length=max_length)
    pad_id = tok.token_to_id("[PAD]")
    pad_id, pad_token = (pad_id, "[PAD]") if pad_id is not None else (0, "<pad>")
    if pad:
        tok.enable_padding(pad_id=pad_id, pad_token=pad_token)
    else:
        tok.no_padding()
    return tok, pad_id


def padded(encodings, pad_id: int) -> dict[str, np.ndarray]:
    """``{"input_ids", "attention_mask", "token_type_ids"}`` int64 arrays of unpadded
    ``encodings``, right-padded (``pad_id``, mask 0, type 0) to the longest."""
    width = max(len(e.ids) for e in encodings)
    ids = np.full((len(encodings), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(encodings), width), dtype=np.int64)
    types = np.zeros((len(encodings), width), dtype=np.int64)
    for row, e in enumerate(encodings):
        n = len(e.ids)
        ids[row, :n] = e.ids
        mask[row, :n] = 1
        types[row, :n] = e.type_ids
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


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

    ``cores`` (a :class:`rcll.models.cores.CoreLeases`, in a worker's pool processes): a
    call's passes also take the cores no other pool process holds, and run that many more
    passes at once, each on its own thread and ``threads`` intra-op threads of the same
    session (onnxruntime runs concurrent ``run`` calls of one session; a pass on one thread
    computes on its caller's thread): small passes split across threads less well than
    passes run side by side (decision 0025). Vectors are the one-thread session's. Raises at
    construction what :func:`ensure_export` raises."""

    runtime = "onnx"

    def __init__(self, model_name: str, state_dir: Path, precision: str = "fp32",
                 threads: int = 1, batch_size: int = 64, batch_tokens: int = 0,
                 cores=None):
        self.model_name = model_name
        self.precision = precision
        self.stamp = embedder_stamp(model_name, "onnx", precision)
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens  # > 0: rcll.models.batching.token_batches
        model_dir = Path(resolve_model_path(model_name))
        self.max_length = model_window(model_dir) or 512
        self.path = ensure_export(model_name, Path(state_dir), precision)
        self._tok, self._pad_id = load_tokenizer(model_dir, self.max_length, pad=False)
        self._session = session(self.path, threads)
        self._threads = max(1, threads)
        self._cores = cores if threads > 0 else None  # 0: onnxruntime's own one per core
        # tokens a call may borrow: the cores beyond its own pass's threads
        self._spare = max(0, (cores.cores if cores else 1) - self._threads)
        self.wide_passes = 0  # passes that ran on borrowed cores
        self._inputs = {i.name for i in self._session.get_inputs()}
        self.dim = int(self._run(self._tok.encode_batch(["dimension probe"])).shape[1])

    def embed(self, texts: list[str],
              token_counts: list[int | None] | None = None) -> np.ndarray:
        """Unit-norm vectors of ``texts`` (float32 (n, dim), input order); ``token_counts``
        (the :class:`~rcll.models.embedder.Embedder` interface) is not needed: the runtime
        tokenizes every text to run it, and batches by those counts. Texts are
        tokenized once, sorted longest first and cut into batches of ``batch_size`` texts
        and, with ``batch_tokens`` > 0, that many padded tokens
        (:func:`rcll.models.batching.token_batches`): like texts share a batch, as
        sentence-transformers' length sort does, so little is padded."""
        with metrics.embed_call(len(texts)):
            if not texts:
                return np.empty((0, self.dim), dtype=np.float32)
            enc = self._tok.encode_batch(texts)
            out = np.empty((len(texts), self.dim), dtype=np.float32)
            batches = token_batches([len(e.ids) for e in enc], self.batch_tokens,
                                    self.batch_size)
            i = 0
            while i < len(batches):
                want = min(self._spare, (len(batches) - i - 1) * self._threads)
                if self._cores is None or want <= 0:
                    out[batches[i]] = self._run([enc[j] for j in batches[i]])
                    i += 1
                    continue
                with self._cores.spare(want) as extra:  # one group of passes at a time
                    group = batches[i:i + 1 + extra // self._threads]
                    for idx, vecs in zip(group, self._run_at_once(
                            [[enc[j] for j in idx] for idx in group]), strict=True):
                        out[idx] = vecs
                self.wide_passes += len(group) - 1
                i += len(group)
            return out

    def _run(self, encodings) -> np.ndarray:
        """One forward pass of ``encodings`` on this thread: unit-norm (n, dim) float32."""
        feed = padded(encodings, self._pad_id)
        inputs = {k: v for k, v in feed.items() if k in self._inputs}
        hidden = self._session.run(None, inputs)[0]
        return mean_pool_normalise(hidden, feed["attention_mask"])

    def _run_at_once(self, groups: list) -> list[np.ndarray]:
        """One pass per element of ``groups``, all at once: the first on this thread, each
        other on a thread of its own (started here, so a forked pool process never inherits
        a pool of threads). Returns the vectors in ``groups`` order; re-raises a pass's
        error after every pass has ended."""
        results: list = [None] * len(groups)
        errors: list[BaseException] = []

        def work(k: int) -> None:
            try:
                results[k] = self._run(groups[k])
            except BaseException as exc:  # noqa: BLE001 - re-raised below, in the caller
                errors.append(exc)

        helpers = [threading.Thread(target=work, args=(k,), name=f"rcll-embed-pass-{k}",
                                    daemon=True) for k in range(1, len(groups))]
        for t in helpers:
            t.start()
        work(0)
        for t in helpers:
            t.join()
        if errors:
            raise errors[0]
        return results

    def token_lengths(self, texts: list[str],
                      token_counts: list[int | None] | None = None) -> list[int]:
        """Tokens the model reads of each text (special tokens included, capped at its
        window): what one text adds to a batch's padded size."""
        return [len(e.ids) for e in self._tok.encode_batch(texts)]


class OnnxCrossEncoder:
    """A sentence-transformers cross-encoder on onnxruntime, the interface of
    :class:`rcll.models.reranker.CrossEncoderReranker`: ``score(query, texts, batch_size)``
    → one float per text, the model's first logit after its default activation (what
    ``CrossEncoder.predict`` returns); ``untrained`` the head parameters the checkpoint
    lacked (recorded at export). Pairs are tokenized by the model's ``tokenizer.json``
    (``longest_first`` truncation to ``max_length``, default the model's window). No
    process-wide lock: ``InferenceSession.run`` is thread-safe and releases the GIL.
    Raises at construction what :func:`ensure_export` raises."""

    runtime = "onnx"

    def __init__(self, model_name: str, state_dir: Path, precision: str = "fp32",
                 threads: int = 1, max_length: int | None = None):
        self.model_name = model_name
        self.precision = precision
        self.path = ensure_export(model_name, Path(state_dir), precision, kind="cross-encoder")
        info = export_info(self.path)
        self.untrained = list(info.get("untrained") or [])
        self.activation = info["activation"]
        self.max_length = int(max_length or info["max_length"])
        self._tok, self._pad_id = load_tokenizer(Path(resolve_model_path(model_name)),
                                                 self.max_length, pad=False)
        self._session = session(self.path, threads)
        self._inputs = {i.name for i in self._session.get_inputs()}

    def score(self, query: str, texts, batch_size: int = 16) -> list[float]:
        """Scores of ``(query, text)`` for each of ``texts``, in order (``[]`` for none);
        pairs are batched longest first, as ``CrossEncoder.predict`` sorts them."""
        texts = list(texts)
        if not texts:
            return []
        enc = self._tok.encode_batch([(query, t) for t in texts])
        out = np.empty(len(texts), dtype=np.float64)
        for idx in token_batches([len(e.ids) for e in enc], 0, max(1, batch_size)):
            feed = padded([enc[i] for i in idx], self._pad_id)
            logits = self._session.run(None, {k: v for k, v in feed.items()
                                              if k in self._inputs})[0]
            out[idx] = logits.reshape(len(idx), -1)[:, 0]
        if self.activation == "sigmoid":
            out = 1.0 / (1.0 + np.exp(-out))
        return [float(x) for x in out]
