"""The warm tier's LSH signature: random-hyperplane SimHash of an embedding's first 64 dims.

SimHash (Charikar 2002, "Similarity estimation techniques from rounding algorithms"): for a
hyperplane normal ``r`` drawn from N(0, I), ``P[sign(r·x) ≠ sign(r·y)] = θ(x, y) / π``, so
the Hamming distance between the ``BITS``-bit signatures of two vectors estimates the angle
between them with variance ``θ/π (1 − θ/π) / BITS``. The signature covers
``embedding[0:DIMS]`` (spec §5: "an LSH signature over the first 64 embedding dimensions").

PostgreSQL computes it (:func:`signature_function_sql`, installed by migration 0016), so the
write path needs no change and every existing row got its signature from the migration: a
``STORED`` generated column ``memory_embeddings.lsh bit(BITS)`` =
``rcll_lsh_signature(embedding)``, an ``IMMUTABLE`` PL/pgSQL function whose hyperplanes are
constants drawn once with a fixed seed (:func:`planes`). The query's signature comes from
the same function, so rows and queries always agree whatever numpy draws today.

``BITS = 512`` is the measured choice (``benchmarks/warm_tier.py``; the figures for 64 to
1,024 bits are in docs/decisions/0007-hot-and-warm-tier-lookups.md). A row costs ``BITS / 8``
more bytes in the table and in the shortlist's index.
"""

from __future__ import annotations

import numpy as np

BITS = 512
DIMS = 64
SEED = 0x52434C4C  # "RCLL"
FUNCTION = "rcll_lsh_signature"


def planes(bits: int = BITS, dims: int = DIMS, seed: int = SEED) -> np.ndarray:
    """``(bits, dims)`` float32 hyperplane normals, N(0, 1) entries from ``seed``, rounded to
    4 decimals (they are written into SQL as text)."""
    rng = np.random.default_rng(seed)
    return np.round(rng.standard_normal((bits, dims)), 4).astype(np.float32)


def signature_function_sql(name: str = FUNCTION, bits: int = BITS, dims: int = DIMS,
                           seed: int = SEED) -> str:
    """``CREATE OR REPLACE FUNCTION name(vector) RETURNS bit(bits)``: bit ``i`` is 1 when
    ``planes[i] · v[0:dims] > 0`` (pgvector's ``binary_quantize`` of the projections;
    ``<#>`` is the negative inner product). ``IMMUTABLE STRICT PARALLEL SAFE``.

    PL/pgSQL, not SQL, on purpose: a one-expression SQL function is inlined, and inlining
    re-parses its body — one vector literal per bit — every time a statement using it is
    planned or an INSERT prepares the generated column (its cost: benchmarks/warm_tier.py,
    docs/decisions/0007-hot-and-warm-tier-lookups.md). PL/pgSQL compiles
    the body once per session and keeps the expression's plan with the planes as constants.
    Raises PostgreSQL's dimension error for a vector shorter than ``dims``."""
    p = planes(bits, dims, seed)
    lits = ",\n      ".join(
        "-(s <#> '[{}]'::vector)".format(",".join(f"{x:.4f}" for x in row)) for row in p)
    return (f"CREATE OR REPLACE FUNCTION {name}(v vector) RETURNS bit({bits})\n"
            f"LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $fn$\n"
            f"DECLARE s vector := subvector(v, 1, {dims});\n"
            f"BEGIN\n"
            f"  RETURN binary_quantize(ARRAY[\n      {lits}\n    ]::real[]::vector)::bit({bits});\n"
            f"END\n$fn$")


def signature(vec, bits: int = BITS, dims: int = DIMS, seed: int = SEED) -> str:
    """The signature of ``vec`` (``(dim,)`` array or ``pgvector.Vector``) as PostgreSQL
    computes it, as a ``'0101…'`` text (for tests and benchmarks; float rounding may flip a
    bit whose projection is within ~1e-6 of 0)."""
    if hasattr(vec, "to_numpy"):  # pgvector.Vector, as psycopg returns it
        vec = vec.to_numpy()
    proj = planes(bits, dims, seed) @ np.asarray(vec, dtype=np.float32)[:dims]
    return "".join("1" if x > 0 else "0" for x in proj)
