"""Recipes as data: which channels run, how they are fused, and the steps after fusion.

A recipe is a name, the channels it asks (with their RRF weights and the fallback channels
that answer when none of them can run), and an ordered list of steps over the fused ranking
— context scoring, rerank, trust adjustments, expansion, post-processing — each a name from
:data:`rcll.search.steps.STEPS` with its parameters. A new recipe is one entry here; a new
step is one function and one registry entry. The response names the recipe that ran.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True)
class Step:
    """One step after fusion: ``name`` in :data:`rcll.search.steps.STEPS`, its keyword
    ``params``."""

    name: str
    params: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def of(cls, name: str, **params: Any) -> Step:
        return cls(name, MappingProxyType(dict(params)))


@dataclass(frozen=True)
class Recipe:
    """A named read path. ``weights`` scale each channel's RRF contribution (default 1.0);
    ``fallback`` channels answer when none of ``channels`` could run (a part is down);
    ``steps`` run in order on the fused ranking; ``params`` are keyword arguments per
    channel (``{"lexical": {"context": 0.5}}``)."""

    name: str
    channels: tuple[str, ...]
    weights: dict[str, float] = field(default_factory=dict)
    fallback: tuple[str, ...] = ()
    steps: tuple[Step, ...] = ()
    params: dict[str, dict] = field(default_factory=dict)

    def describe(self) -> dict:
        """The recipe as JSON: ``{"name", "channels", "weights", "steps": [{name, params}]}``."""
        return {"name": self.name, "channels": list(self.channels),
                "weights": {**{c: self.weights.get(c, 1.0) for c in self.channels},
                            **{k: w for k, w in self.weights.items() if k not in self.channels}},
                "params": {c: dict(p) for c, p in self.params.items()},
                "steps": [{"name": s.name, "params": dict(s.params)} for s in self.steps]}


# The lexical channel's neighbour context lends words to units too short to carry their
# topic: chat turns. LoCoMo (turns average 14.8 tokens, 14.3 distinct lexemes) gains,
# LongMemEval_S (chunks of long chat messages, 61.6 tokens / 44.6 lexemes on average) loses;
# the context applies in banks whose units average at most this many tokens, BM25's avgdl
# (benchmarks/recall_ablation.py, docs/concepts/recall.md). Set on lexemes, the gate separates the
# two datasets' banks the same way on tokens (LoCoMo banks 12.9–17.0, LongMemEval ≥ 56).
CONTEXT_MAX_AVGDL = 24.0

# Post-processing every recipe ends with (spec §5): Memory Worth filter, the bank's L0 units
# always included (placed first), then duplicates within the result collapsed — after l0, so
# an L0 unit absorbs its near-duplicates instead of being collapsed and added back.
POST = (Step.of("worth"), Step.of("l0"), Step.of("collapse_duplicates", cosine=0.88))

# The speaker prior (rcll.search.speaker): a question naming one speaker (LoCoMo) or asked in
# the first person of a chat's user (LongMemEval) lifts that speaker's turns by 1 + 0.25.
# Chosen on LoCoMo (benchmarks/bm25_length.py, 1,536 q, cold, turn nDCG@5 / recall@10:
# 0.520 / 0.746 without, 0.560 / 0.761 at 0.25, 0.560 / 0.759 at 0.5), confirmed on
# LongMemEval_S dev (docs/decisions/0002-recipe-full-session-coverage-dense-floor.md).
SPEAKER = Step.of("speaker", boost=0.25)

# Session-then-turn scoring (rcll.search.context: each unit lifted by β × the best fused score
# of its episode) with β = 0.25, first after fusion. Chosen on LoCoMo (1,536 q, full recipe
# with coverage, turn nDCG@5 / recall@10 / session recall_all@5): without 0.582 / 0.764 /
# 0.809, β 0.1 0.586 / 0.768 / 0.809, 0.25 0.590 / 0.774 / 0.811, 0.5 0.591 / 0.776 / 0.808
# (0.25: the turn metrics' plateau, the best session figure). Confirmed on LongMemEval_S
# dev: 0.667 / 0.832 / 0.883 → 0.668 / 0.849 / 0.883. Over the top 100 units (the pool the
# later steps see): the same figures on both datasets as over the top 300, 1 ms less.
# Measured and left out: adding the episode's query-term coverage (``terms``, the
# context step's doc) lifted LoCoMo (every 2nd question: 0.588 / 0.773 / 0.818 → at 0.1
# 0.591 / 0.783 / 0.820, 0.2 0.593 / 0.788 / 0.823, 0.3 0.594 / 0.784 / 0.822, 0.5 0.590)
# but not LongMemEval_S dev (0.668 / 0.849 / 0.883 → 0.2: 0.661 / 0.838 / 0.883).
# Measured and left out too: episode-level channel evidence (``episodes``, each episode
# ranked by the mean of its 3 best channel scores and fused as one more RRF list). LoCoMo,
# 1,536 q, dense at 0.3 / 0.5 / 1.0: 0.587 / 0.586 / 0.584 nDCG@5 against 0.589 (recall@10
# 0.773–0.774 against 0.774): chosen on LoCoMo it is off. LongMemEval_S dev would take it
# (dense 1.0: 0.695 / 0.871 / session recall_all@5 0.917) — choosing it there would be
# fitting the confirmation set (docs/decisions/0002-recipe-full-session-coverage-dense-floor.md).
SESSION = Step.of("context", session=0.25, pool=100)

# Query-term coverage (rcll.search.coverage: xQuAD over the query's lexical terms) with
# λ = 0.2, on the fused order before post-processing. Chosen on LoCoMo (1,536 q, full recipe,
# unfloored dense, turn nDCG@5 / recall@10): λ 0 0.566 / 0.762, 0.1 0.577 / 0.763,
# 0.2 0.582 / 0.764, 0.3 0.583 / 0.763 (0.4 without the floor change: 0.573, falling); λ = 0.2,
# the middle of the plateau. Confirmed on LongMemEval_S dev: nDCG@5 0.655 → 0.667, recall@10
# 0.832 unchanged (docs/decisions/0002-recipe-full-session-coverage-dense-floor.md).
COVERAGE = Step.of("coverage", weight=0.2)

# The dense channel's cosine floor in the cold-tier recipes: 0 (only units pointing away
# from the query dropped) instead of the deployment's RCLL_DENSE_FLOOR (0.30, spec §5's
# default). MiniLM's cosines between a short question and a 250-token chat chunk are mostly
# below 0.3 — on LongMemEval_S the floor left the dense channel 1–22 candidates — and RRF
# already weighs the channel 0.3. Chosen on LoCoMo (full recipe, nDCG@5 / recall@10: floor
# 0.3 0.561 / 0.760, 0.2 0.565 / 0.762, 0 0.566 / 0.762, none 0.566 / 0.762); confirmed on
# LongMemEval_S dev (0.651 / 0.835 / session recall_all@5 0.883 → 0.655 / 0.832 / 0.900).
DENSE = {"floor": 0.0}

# Hybrid weighs the dense channel 0.3 against lexical 1.0 in RRF (k = 60). Measured with
# benchmarks/fusion_sweep.py, turn level, recall@10 / nDCG@5:
#   LoCoMo (1,536 q):       BM25 0.601 / 0.439, MiniLM 0.439 / 0.266,
#                           RRF w=1.0 0.615 / 0.408, w=0.5 0.629 / 0.425, w=0.3 0.634 / 0.437
#   LongMemEval_S dev (60): BM25 0.776 / 0.547, MiniLM 0.702 / 0.459,
#                           RRF w=1.0 0.821 / 0.539, w=0.5 0.804 / 0.554, w=0.3 0.804 / 0.562
# Equal weights let the weaker dense list push lexical hits out of the top five.
RECIPES: dict[str, Recipe] = {
    "hybrid": Recipe("hybrid", ("dense", "lexical"), {"dense": 0.3, "lexical": 1.0},
                     steps=POST),
    "dense": Recipe("dense", ("dense",), fallback=("lexical",), steps=POST),
    "lexical": Recipe("lexical", ("lexical",), steps=POST),
    # cold: what measured better on both datasets (benchmarks/recall_ablation.py,
    # docs/decisions/0002-recipe-full-session-coverage-dense-floor.md): hybrid's weights with the
    # dense channel unfloored (DENSE), the lexical channel with neighbour context in banks of
    # short units, the temporal channel,
    # then session-then-turn scoring (SESSION), the speaker prior, rerank (when a model is
    # configured), trust, expansion, query-term coverage (COVERAGE) and post-processing.
    "cold": Recipe("cold", ("dense", "lexical", "temporal"),
                   {"dense": 0.3, "lexical": 1.0, "temporal": 0.3},
                   steps=(SESSION, SPEAKER, Step.of("rerank"), Step.of("trust"),
                          Step.of("expand"), COVERAGE, *POST),
                   params={"dense": DENSE,
                           "lexical": {"context": 0.5, "context_max_avgdl": CONTEXT_MAX_AVGDL}}),
    # full: cold plus the graph channel — all four channels of spec §5 — the default: it
    # measures at least as well as cold on both datasets
    # (docs/decisions/0002-recipe-full-session-coverage-dense-floor.md).
    "full": Recipe("full", ("dense", "lexical", "graph", "temporal"),
                   {"dense": 0.3, "lexical": 1.0, "graph": 0.1, "temporal": 0.3},
                   steps=(SESSION, SPEAKER, Step.of("rerank"), Step.of("trust"),
                          Step.of("expand"), COVERAGE, *POST),
                   params={"dense": DENSE,
                           "lexical": {"context": 0.5, "context_max_avgdl": CONTEXT_MAX_AVGDL}}),
}

DEFAULT_RECIPE = "full"

# -- documents (issue 22) ------------------------------------------------------------------
# Every value below was chosen on CISI (benchmarks/cisi.py → benchmarks/results/cisi.json,
# the grids of one part changed at a time in benchmarks/results/cisi_variants.json, run with
# ``--variants benchmarks.cisi:VARIANTS`` at dense 1.0; 1,460 abstracts, 76 judged queries,
# nDCG@10 / recall@100 / MRR@10 of documents ranked by their first unit); the held-out
# collection checks them separately.
#
# The lexical channel as plain BM25 over documents: every query term kept (df_cutoff above
# 1: no common-term pruning — a long query about "information retrieval" loses its topic
# words in a bank where they are in 15 % of the units) and weighed by its frequency in the
# query (query_tf). Lexical channel alone: 0.283 with the chat settings (recipe lexical,
# df_cutoff 0.15, distinct terms), 0.399 with both (document_lexical; rank-bm25 over whole
# documents 0.362); each alone, measured on the channel's own ranking: 0.334 without
# pruning, 0.361 with query_tf but pruning. In the document recipe (dense 1.0): chat
# settings 0.419, without query_tf 0.434, both 0.450.
LEXICAL_DOCUMENTS = {"query_tf": True, "df_cutoff": 1.01}
# A document scored by its best chunk in each channel, the document rankings fused (MaxP).
# Sum of the top 2 / 3 chunks: 0.365 / 0.363 (long documents win on their length);
# without the step (units fused, documents by first unit) 0.450 — CISI's abstracts are
# mostly one chunk (1,596 units for 1,460 documents), so MaxP and first appearance agree
# there; the step keeps a document's chunks together and says how documents were ranked.
DOCUMENT_AGGREGATION = Step.of("documents", aggregation="maxp")
# Dense weight in the document recipe (lexical 1.0): 0.3 0.445 / 0.492, 0.5 0.448 / 0.502,
# 0.7 0.449 / 0.511, 1.0 0.450 / 0.517, 1.5 0.453 / 0.527 (nDCG@10 / recall@100; MRR@10
# falls 0.714 → 0.661 over the same range). Over documents MiniLM is the stronger channel
# (0.428 alone against lexical 0.402), the reverse of chat, where hybrid weighs it 0.3.
# The chat-tuned steps measured on top and left out: session step 0.450 (no change),
# coverage 0.451, all of full's steps 0.451, temporal + graph channels 0.449; the dense
# floor 0.3 instead of 0: 0.450 (no change).
DOCUMENT_WEIGHTS = {"dense": 1.5, "lexical": 1.0}
RECIPES["document"] = Recipe(
    "document", ("dense", "lexical"), DOCUMENT_WEIGHTS,
    steps=(DOCUMENT_AGGREGATION, *POST),
    params={"dense": DENSE, "lexical": LEXICAL_DOCUMENTS})
# Chunk context (migration 0023, rcll.retain.chunking.chunk_headings): a chunk after the
# first carrying its document's title into the lexical vector and the embedding input.
# Measured on CISI (cisi.json, the same bank with the 136 continuation chunks' headings set
# and cleared, re-embedded): document 0.450 with it against 0.453 without, document_dense
# 0.422 / 0.428, document_lexical 0.397 / 0.399 (nDCG@10) — a loss on every channel, so the
# write path leaves it off (headings NULL: vectors and tsv as before migration 0023). Its
# storage and both inputs stay, for collections whose chunks lose their topic without it.
CHUNK_CONTEXT = False

# Each channel of the document recipe alone (with the aggregation): what is compared with
# its plain counterpart (rank-bm25, MiniLM cosine over whole documents) in cisi.json.
RECIPES["document_lexical"] = Recipe("document_lexical", ("lexical",),
                                     steps=(DOCUMENT_AGGREGATION, *POST),
                                     params={"lexical": LEXICAL_DOCUMENTS})
RECIPES["document_dense"] = Recipe("document_dense", ("dense",), fallback=("lexical",),
                                   steps=(DOCUMENT_AGGREGATION, *POST),
                                   params={"dense": DENSE, "lexical": LEXICAL_DOCUMENTS})

# The recipe a recall naming none gets, by the bank's kind (rcll.search.documents.bank_kind:
# document chunks vs conversation turns in a sample of its units); None: the deployment's
# default (RCLL_RECALL_RECIPE), which chat banks keep.
RECIPE_BY_KIND: dict[str, str | None] = {"documents": "document", "conversation": None}
