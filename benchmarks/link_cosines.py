"""Cosine distribution of all-MiniLM-L6-v2 over LoCoMo turns: how the semantic-link floor
(``RCLL_SEMANTIC_LINK_MIN_COSINE``) and the dedup floor (0.80) were chosen.

For each conversation (one bank per conversation, one unit per turn, as the eval ingests it)
it embeds every turn and prints percentiles of (a) the cosine of all pairs, (b) each turn's
k-th nearest neighbour (k = 1..5), and the share of turns whose top-5 neighbours all pass a
floor. Run: ``HF_HUB_OFFLINE=1 python benchmarks/link_cosines.py [N_CONVERSATIONS]``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from rcll.eval.datasets import load_locomo
from rcll.models.embedder import SentenceTransformerEmbedder

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo"  # beside the checkout


def main(n_conv: int = 3) -> None:
    ds = load_locomo(str(LOCOMO) if len(sys.argv) < 3 else sys.argv[2])
    emb = SentenceTransformerEmbedder("all-MiniLM-L6-v2", batch_size=64)
    allpairs, knn = [], []
    for bank, items in list(ds.banks.items())[:n_conv]:
        t = time.perf_counter()
        v = emb.embed([it["content"] for it in items]).astype(np.float32)
        sims = v @ v.T
        np.fill_diagonal(sims, -2)
        iu = np.triu_indices(len(v), 1)
        allpairs.append(sims[iu])
        knn.append(-np.sort(-sims, axis=1)[:, :5])
        print(f"{bank}: {len(v)} turns embedded in {time.perf_counter() - t:.1f}s")
    pairs, top = np.concatenate(allpairs), np.concatenate(knn)
    pct = [50, 90, 99, 99.9]
    print("all pairs      " + "  ".join(f"p{p}={np.percentile(pairs, p):.3f}" for p in pct))
    for k in range(5):
        print(f"{k + 1}-th neighbour " + "  ".join(
            f"p{p}={np.percentile(top[:, k], p):.3f}" for p in (10, 25, 50, 75, 90)))
    for floor in (0.4, 0.45, 0.5, 0.55, 0.6, 0.7, 0.8):
        print(f"floor {floor:.2f}: pairs above {np.mean(pairs >= floor):.4f}; links/turn "
              f"{np.mean(np.sum(top >= floor, axis=1)):.2f}; turns with none "
              f"{np.mean(top[:, 0] < floor):.3f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
