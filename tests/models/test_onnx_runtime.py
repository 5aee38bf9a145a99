"""The embedder on onnxruntime (rcll.models.onnx_runtime): the bundled weights exported here,
fp32 vectors equal to torch's, int8 under its own stamp, the export cache and its lock, and
recall through the API with the ONNX embedder — and what a bank embedded by another stamp
gives (no dense hits until its vectors are made again, as for any other model change)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rcll.config import Settings
from rcll.models.embedder import EmbedderHandle, SentenceTransformerEmbedder, embedder_stamp
from rcll.models.onnx_runtime import OnnxEmbedder, ensure_export, export_dir

ROOT = Path(__file__).resolve().parents[2]
MODEL = "all-MiniLM-L6-v2"
LONG = " ".join(f"word{i} of a very long passage about the harbour" for i in range(120))
TEXTS = [
    "Caroline went to the LGBTQ support group on 7 May 2023.",
    "What did Melanie paint last year?",
    "",  # empty: [CLS][SEP] only
    "   ",
    "\n\t\n",
    "?",
    "Ünïcödé café naïve — 東京 🙂 ﬁ",
    "ALL CAPS SHOUTING AND numbers 1234567890 3.14159",
    "def f(x):\n    return x ** 2  # code",
    LONG,  # far over the 256-token window: truncated the same way
    LONG + " and a different tail that lies beyond the window",
    "short",
] + [f"turn {i}: we talked about the trip to Lisbon and the {i} photos" for i in range(30)]


@pytest.fixture(scope="module")
def state(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("onnx-state")


@pytest.fixture(scope="module")
def torch_emb():
    return SentenceTransformerEmbedder(MODEL, batch_size=16)


@pytest.fixture(scope="module")
def fp32(state):
    return OnnxEmbedder(MODEL, state, "fp32", threads=1, batch_size=16)


@pytest.fixture(scope="module")
def int8(state):
    return OnnxEmbedder(MODEL, state, "int8", threads=1, batch_size=16)


def test_fp32_gives_the_torch_vectors_back(torch_emb, fp32):
    ref = torch_emb.embed(TEXTS)
    got = fp32.embed(TEXTS)
    assert got.shape == ref.shape == (len(TEXTS), 384) and got.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    cos = (got * ref).sum(axis=1)
    assert cos.min() >= 0.999, dict(zip(TEXTS, cos.round(5), strict=True))
    # the same tokens: long texts cut at the model's 256-token window, specials counted
    assert fp32.max_length == 256
    assert fp32.token_lengths(TEXTS) == torch_emb.token_lengths(TEXTS)
    assert fp32.token_lengths([LONG])[0] == 256
    # one text alone = the same text in a padded batch (padding is masked out)
    solo = fp32.embed([TEXTS[0]])[0]
    assert float(solo @ got[0]) >= 0.99999
    # the two long texts differ only past the window: the model reads the same tokens
    assert float(got[9] @ got[10]) >= 0.99999
    assert fp32.stamp == MODEL == embedder_stamp(MODEL, "onnx", "fp32")


def test_fp32_token_batching_keeps_order(fp32):
    batched = OnnxEmbedder(MODEL, fp32.path.parents[2], "fp32", batch_size=4, batch_tokens=300)
    np.testing.assert_allclose(batched.embed(TEXTS), fp32.embed(TEXTS), atol=1e-5)
    assert fp32.embed([]).shape == (0, 384)


def test_int8_has_its_own_stamp_and_close_vectors(torch_emb, int8):
    assert int8.stamp == f"{MODEL}#int8" == embedder_stamp(MODEL, "onnx", "int8")
    assert Settings(embed_runtime="onnx", embed_precision="int8").embedder_stamp == int8.stamp
    assert Settings(embed_runtime="onnx", embed_precision="fp32").embedder_stamp == MODEL
    assert Settings(embed_runtime="torch", embed_precision="int8").embedder_stamp == MODEL
    assert int8.path.name == "model.int8.onnx"
    # int8 MatMul weights; the 30,522 x 384 token embedding table stays fp32 (47 MB)
    assert int8.path.stat().st_size < 0.7 * (int8.path.parent / "model.fp32.onnx").stat().st_size
    ref = torch_emb.embed(TEXTS)
    cos = (int8.embed(TEXTS) * ref).sum(axis=1)
    assert cos.max() < 0.9999  # other vectors: never stored under the torch stamp
    assert cos.mean() >= 0.97 and cos.min() >= 0.9


def test_export_cache_is_reused(state, fp32, int8):
    folder = export_dir(state, MODEL)
    files = {p.name: p.stat().st_mtime_ns for p in folder.glob("model.*.onnx")}
    assert set(files) == {"model.fp32.onnx", "model.int8.onnx"}
    meta = json.loads((folder / "export.json").read_text())
    assert meta["model"] == MODEL and meta["files"] == sorted(files)
    for p in ("fp32", "int8"):
        assert ensure_export(MODEL, state, p) == folder / f"model.{p}.onnx"
    again = OnnxEmbedder(MODEL, state, "int8")
    assert again.path == int8.path
    assert {p.name: p.stat().st_mtime_ns for p in folder.glob("model.*.onnx")} == files
    assert not list(folder.glob("*.tmp"))
    with pytest.raises(ValueError):
        ensure_export(MODEL, state, "fp16")


CHILD = """
import logging, sys
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
from pathlib import Path
from rcll.models.onnx_runtime import ensure_export
print(ensure_export("all-MiniLM-L6-v2", Path(sys.argv[1]), "int8"))
"""


def test_two_processes_export_once(tmp_path):
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [e[-2000:] for _, e in outs]
    paths = {o.strip() for o, _ in outs}
    assert len(paths) == 1
    exports = sum(e.count("exporting all-MiniLM-L6-v2 to ONNX") for _, e in outs)
    quantised = sum(e.count("quantising all-MiniLM-L6-v2") for _, e in outs)
    assert exports == 1 and quantised == 1, [e[-2000:] for _, e in outs]
    folder = Path(paths.pop()).parent
    assert sorted(p.name for p in folder.iterdir()) == [
        ".export.lock", "export.json", "model.fp32.onnx", "model.int8.onnx"]
    emb = OnnxEmbedder(MODEL, tmp_path, "int8")  # the files load: none was half-written
    assert emb.embed(["hello"]).shape == (1, 384)


def test_handle_loads_onnx_and_reports_it(state):
    h = EmbedderHandle(MODEL, runtime="onnx", precision="int8", state_dir=state,
                       expected_dim=384, query_batch_wait_s=0.002)
    emb = h.get()
    assert emb is not None and emb.stamp == f"{MODEL}#int8" and emb.runtime == "onnx"
    st = h.status()
    assert st == {"model": MODEL, "stamp": f"{MODEL}#int8", "runtime": "onnx", "loaded": True,
                  "error": None}
    # an fp32 export that cannot be made falls back to torch (same vectors, same stamp) ...
    bad = state / "not-a-model-folder"
    bad.write_text("")
    h32 = EmbedderHandle(str(bad), runtime="onnx", precision="fp32", state_dir=state)
    assert h32.get() is None  # ... which cannot load such a model either: reported
    assert h32.error and h32.status()["loaded"] is False
    h8 = EmbedderHandle(str(bad), runtime="onnx", precision="int8", state_dir=state)
    assert h8.get() is None and "FileNotFoundError" in h8.error


def _recall(client, bank, query):
    r = client.post(f"/v1/default/banks/{bank}/memories/recall",
                    json={"query": query, "recipe": "dense", "tiers": ["cold"]})
    assert r.status_code == 200, r.get_json()
    return r.get_json()


def test_recall_through_the_api_on_onnx_int8(settings, services, client):
    from api.app import create_app
    from rcll.bootstrap import bootstrap
    from rcll.retain.pipeline import embed_missing

    svc = bootstrap(settings.model_copy(update={"embed_runtime": "onnx",
                                                "embed_precision": "int8"}))
    try:
        assert svc.settings.embedder_stamp == f"{MODEL}#int8"
        onnx_client = create_app(services=svc).test_client()
        bank = "onnx-int8-bank"
        items = [{"content": "The night train to Vienna leaves at ten."},
                 {"content": "Melanie painted a sunrise over the lake last summer."},
                 {"content": "Our quarterly budget review moved to Thursday."}]
        r = onnx_client.post(f"/v1/default/banks/{bank}/memories",
                             json={"items": items, "async": False})
        assert r.status_code == 200, r.get_json()
        out = _recall(onnx_client, bank, "which painting did she make at the lake")
        assert out["dense_available"] and "sunrise" in out["results"][0]["text"]
        with services.pool.connection() as conn:
            models = conn.execute("SELECT DISTINCT model FROM memory_embeddings "
                                  "WHERE bank_id = %s", (bank,)).fetchall()
        assert [m["model"] for m in models] == [f"{MODEL}#int8"]

        # a bank the torch embedder filled: the int8 service finds no vectors of its stamp
        # there (dense gives nothing, as after any model change) until they are made again
        torch_bank = "onnx-torch-bank"
        r = client.post(f"/v1/default/banks/{torch_bank}/memories",
                        json={"items": items, "async": False})
        assert r.status_code == 200, r.get_json()
        assert "sunrise" in _recall(client, torch_bank, "painting at the lake")["results"][0]["text"]
        assert _recall(onnx_client, torch_bank, "painting at the lake")["results"] == []
        assert embed_missing(svc.retain_context(), bank_id=torch_bank) == 3
        got = _recall(onnx_client, torch_bank, "painting at the lake")["results"]
        assert "sunrise" in got[0]["text"]
        with services.pool.connection() as conn:
            rows = conn.execute("SELECT model, count(*) AS n FROM memory_embeddings "
                                "WHERE bank_id = %s GROUP BY model ORDER BY model",
                                (torch_bank,)).fetchall()
        assert [(x["model"], x["n"]) for x in rows] == [(MODEL, 3), (f"{MODEL}#int8", 3)]
        # torch's vectors are untouched: the torch service still answers from its own
        assert "sunrise" in _recall(client, torch_bank, "painting at the lake")["results"][0]["text"]
    finally:
        svc.close()


# --- the cross-encoder ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def ce_checkpoint(tmp_path_factory) -> str:
    """A cross-encoder checkpoint with its head saved (the bundled weights plus the head
    sentence-transformers drew for them): torch and onnx then load the same parameters."""
    from sentence_transformers import CrossEncoder

    from rcll.models.embedder import resolve_model_path

    out = tmp_path_factory.mktemp("ce") / "checkpoint"
    CrossEncoder(resolve_model_path(MODEL), device="cpu").save_pretrained(str(out))
    return str(out)


def test_cross_encoder_on_onnx_scores_as_torch(ce_checkpoint, state):
    from rcll.models.onnx_runtime import OnnxCrossEncoder
    from rcll.models.reranker import CrossEncoderReranker

    query = "when does the night train leave"
    texts = TEXTS[:12]  # empty, unicode, and pairs longer than the 512-token window
    ref = CrossEncoderReranker(ce_checkpoint).score(query, texts, batch_size=4)
    onnx = OnnxCrossEncoder(ce_checkpoint, state, "fp32")
    assert onnx.untrained == [] and onnx.activation == "sigmoid" and onnx.max_length == 512
    got = onnx.score(query, texts, batch_size=5)
    assert len(got) == len(texts) and onnx.score(query, []) == []
    np.testing.assert_allclose(got, ref, atol=1e-5)
    q8 = OnnxCrossEncoder(ce_checkpoint, state, "int8").score(query, texts)
    np.testing.assert_allclose(q8, ref, atol=0.02)
    assert q8 != got


def test_reranker_handle_on_onnx(state):
    from rcll.models.reranker import RerankerHandle

    # the bundled weights have no trained head: flagged on onnx as on torch, not used ...
    h = RerankerHandle(MODEL, runtime="onnx", state_dir=state)
    assert h.get() is None
    st = h.status()
    assert st["loaded"] and not st["usable"] and st["runtime"] == "onnx"
    assert "classifier.weight" in st["reason"]
    # ... unless allowed for timing
    h = RerankerHandle(MODEL, allow_untrained=True, runtime="onnx", precision="int8",
                       state_dir=state)
    model = h.get()
    assert model is not None and model.path.name == "model.int8.onnx"
    assert len(model.score("q", ["a", "b", "c"])) == 3
