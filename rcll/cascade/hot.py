"""Tier 1 — hot: per bank, in Redis, the currently active units with their ACT-R activation
(spec §5, issue 8). A lookup scores them without PostgreSQL.

Layout per bank (``{prefix}:{<bank_id>}:…``, the bank id in braces; values binary-safe):

==============  ========================================================================
``z``           sorted set unit id → base-level activation B when last updated; the
                membership of the tier. Over ``capacity``, the lowest B *now* is evicted
                (every member's B is recomputed at eviction time, so an old score does not
                protect a unit that has not been used since).
``v``           hash unit id → its vector, float16 little-endian bytes (unit-norm, dim)
``m``           hash unit id → JSON ``[layer, room, hall, token_count, audience, purposes]``
                (the scope fields; a lookup serves a unit only to a caller whose scope
                admits its audience and purposes — an entry written before they were
                stored admits only an unrestricted scope)
``t:{unit}``    list of the unit's ``history`` most recent use times (epoch s, newest first)
``n`` / ``f``   hash unit id → use count / first use time (promotion time before any use)
``c:{unit}``    list of the unit's ``cues`` most recent retrieving query vectors (float16)
``epoch``       random id of this incarnation of the bank's tier (a dropped bank gets a new
                one, so no process keeps a cache of the old one)
``seq``/``chg`` change counter / sorted set unit id → seq of its last change (added,
                removed, cue added); ``floor``: changes below it were trimmed from ``chg``
``dead``        sorted set unit id → time it was invalidated: a promotion whose PostgreSQL
                read began before that is refused (kept :data:`TOMBSTONE_S`)
``dropped``     time of :meth:`HotTier.drop_bank`, kept :data:`TOMBSTONE_S`, same use
==============  ========================================================================

plus the Hebbian keys of :mod:`rcll.cascade.hebbian` and the set ``{prefix}:banks``.

A lookup is one Redis round trip for the changes since the process's cached copy (a
transaction reading ``epoch``, ``seq``, ``floor`` and the new ``chg`` entries), one more
when something changed (the changed units' vectors, scope fields and cues), a numpy
matrix product, and one round trip for the use history of the few hits (activation).

Ranking of hits: ``similarity + ACTIVATION_WEIGHT · σ(B)`` (σ the logistic function), so
activation only reorders hits whose similarities lie within ``ACTIVATION_WEIGHT`` of each
other (near-ties within the embedder's noise), toward the more frequently and recently
used; ``similarity`` alone decides what passes the threshold.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import redis

from rcll.access.visibility import audience_mask
from rcll.banks.ids import key_segment
from rcll.cascade.activation import base_level
from rcll.cascade.hits import TierHit  # noqa: F401  (re-exported: tier 1 returns it)

if TYPE_CHECKING:
    from rcll.search.scope import CallerScope

log = logging.getLogger(__name__)

ACTIVATION_WEIGHT = 0.001
"""Weight of σ(B) in the rank of a hit: at most 0.001 of cosine, i.e. activation breaks
near-ties only (module docstring) — less than one :data:`CUE_RANK_STEP`, so it never
reorders the units a re-asked question got back."""
CUE_RANK_STEP = 0.002
"""A cue is stored scaled by ``1 − CUE_RANK_STEP · rank`` (rank 0 = the best result of the
recall that left it, capped at :data:`CUE_RANK_CAP`): re-asking that question scores its
units 1.0, 0.998, 0.996, … — the order recall gave them, which ties at 1.0 would lose.
0.002 is four float16 steps below 1.0 (spacing 0.00049), so the order survives storage."""
CUE_RANK_CAP = 25


def is_complete_reask(hits: list[TierHit], top: int) -> bool:
    """False when ``hits`` look like a re-asked question whose cached answer lost part of
    itself: the best hit is a cue hit within ``top`` rank steps of 1.0 (a re-ask: rank r of
    the earlier answer scores 1 − r · :data:`CUE_RANK_STEP`) but the ranks its cue hits
    imply have a gap below ``top`` (0 … the highest seen must all be there) — a unit of that
    answer was evicted or its cue crowded out. Tier 1 then falls through and the cold
    tier answers (and re-promotes). True otherwise, including for paraphrases (no hit at
    ~1.0), which the threshold alone decides."""
    floor = 1 - CUE_RANK_STEP * (top - 0.5)
    if not hits or hits[0].via != "cue" or hits[0].similarity <= floor:
        return True
    ranks = {round((1 - h.similarity) / CUE_RANK_STEP) for h in hits
             if h.via == "cue" and h.similarity > floor}
    # contiguous from rank 0 (an answer shorter than ``top`` is whole too)
    return ranks >= set(range(min(top, max(ranks) + 1)))


def cue_weight(rank: int) -> float:
    """The scale of a cue left by a result at 0-based ``rank`` (:data:`CUE_RANK_STEP`)."""
    return 1.0 - CUE_RANK_STEP * min(rank, CUE_RANK_CAP)


def _cosines(raws: list[bytes], q: np.ndarray) -> np.ndarray:
    """The cosine of each stored vector in ``raws`` (:func:`_f16` bytes, all of ``q``'s
    dimension) to ``q`` (float32 (dim,), unit norm), as :func:`_cosine` gives one: float64
    (len(raws),)."""
    m = np.frombuffer(b"".join(raws), dtype="<f2").reshape(len(raws), -1).astype(np.float32)
    norms = np.linalg.norm(m, axis=1)
    dots = m @ q
    return np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0).astype(np.float64)


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    return float(a @ b) / (na * nb) if na and nb else 0.0
CUE_DUPLICATE_COSINE = 0.995
"""A retrieving query this close to a cue the unit already holds is not stored again (a
re-asked question would otherwise fill every cue slot with itself)."""
TOMBSTONE_S = 60.0
"""How long an invalidation (or a bank drop) is remembered to refuse late promotions: a
promotion is refused when its PostgreSQL read began before the invalidation, and that read
is milliseconds old when it is promoted; callers that do not say when they read are refused
for this whole time. Assumes the hosts' clocks agree to well under this."""
MAX_CACHED_BANKS = 64
"""Banks whose vectors one process keeps in memory (least recently looked up dropped; at
most capacity × dim × 4 bytes × (1 + cues) each, 7.1 MB at 512 × 384 × 9)."""
CHANGE_LOG_KEEP = 4096
"""Changes kept in ``chg`` beyond the newest; a process whose cache is older reloads."""

# Atomically: bump the bank's change counter and stamp the given units with it (inside the
# caller's MULTI or script, so data and stamp land together and a reader's snapshot sees
# both or neither). Trims the change log now and then. One Lua function, used by _BUMP and
# by the scripts below that change units.
_BUMP_FN = f"""
local function bump(seq_key, chg_key, floor_key, ids)
  local s = redis.call('INCR', seq_key)
  for i = 1, #ids do redis.call('ZADD', chg_key, s, ids[i]) end
  local floor = tonumber(redis.call('GET', floor_key) or '0')
  if s - floor > {2 * CHANGE_LOG_KEEP} then
    redis.call('ZREMRANGEBYSCORE', chg_key, '-inf', '(' .. (s - {CHANGE_LOG_KEEP}))
    redis.call('SET', floor_key, s - {CHANGE_LOG_KEEP})
  end
  return s
end
"""
_BUMP = _BUMP_FN + "return bump(KEYS[1], KEYS[2], KEYS[3], ARGV)\n"

# The cues of the tier-1 members among n unit ids, in one call (HotTier.record_use reads
# them to find near-repeats of the query): KEYS = ``z``, then the n units' ``c:`` keys;
# ARGV = the n unit ids. Returns, per id in order, 0 when it is not a member, else its
# cue list (newest first).
_MEMBER_CUES = """
local out = {}
for i = 1, #ARGV do
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    out[i] = redis.call('LRANGE', KEYS[i + 1], 0, -1)
  else
    out[i] = 0
  end
end
return out
"""

# One recall's uses of m tier-1 members in one call (atomic, as MULTI/EXEC was):
# KEYS = ``n``, ``f``, ``seq``, ``chg``, ``floor``, then per member its ``t:`` and ``c:``
# keys; ARGV = now, history kept, cues kept, m, then per member: its id, the new cue (''
# for none), d, and the d held cues the new one replaces. Per member: a use at now (history
# trimmed, count + 1, first use set if unset) and its cue written; units whose cues changed
# get one change-log stamp. Returns per member ``{count, first use, recent use times}`` —
# its history after the write, from which the caller computes B.
_RECORD_USE = _BUMP_FN + """
local now, hist, ncues, m = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local a, cued, out = 5, {}, {}
for j = 1, m do
  local u, cue, d = ARGV[a], ARGV[a + 1], tonumber(ARGV[a + 2])
  local tk, ck = KEYS[4 + 2 * j], KEYS[5 + 2 * j]
  redis.call('LPUSH', tk, now)
  redis.call('LTRIM', tk, 0, hist - 1)
  local n = redis.call('HINCRBY', KEYS[1], u, 1)
  redis.call('HSETNX', KEYS[2], u, now)
  if cue ~= '' then
    for i = 1, d do redis.call('LREM', ck, 0, ARGV[a + 2 + i]) end
    redis.call('LPUSH', ck, cue)
    redis.call('LTRIM', ck, 0, ncues - 1)
    cued[#cued + 1] = u
  end
  a = a + 3 + d
  out[j] = {n, redis.call('HGET', KEYS[2], u), redis.call('LRANGE', tk, 0, -1)}
end
if #cued > 0 then bump(KEYS[3], KEYS[4], KEYS[5], cued) end
return out
"""

# What a process caches of n units, in one call: KEYS = ``v``, ``m``, then the n units'
# ``c:`` keys; ARGV = the n unit ids. Returns per id ``{vector or false, scope JSON or
# false, cue list}``.
_LOAD = """
local out = {}
for i = 1, #ARGV do
  out[i] = {redis.call('HGET', KEYS[1], ARGV[i]), redis.call('HGET', KEYS[2], ARGV[i]),
            redis.call('LRANGE', KEYS[i + 2], 0, -1)}
end
return out
"""


@dataclass(frozen=True)
class HotUnit:
    """A unit as tier 1 holds it: everything a lookup needs without PostgreSQL.

    ``vector``: float32 unit-norm, shape (dim,) (stored as float16). ``layer`` 0–3;
    ``room``/``hall`` as in ``memory_units``; ``token_count`` (may be 0 when unknown);
    ``audience`` (``'bank'`` or a member id) and ``purposes`` as in ``memory_units`` (the
    permission fields a lookup filters by; ``None``: unknown, served to unrestricted
    scopes only).
    """

    unit_id: str
    vector: np.ndarray
    layer: int
    room: str | None
    hall: str | None
    token_count: int
    audience: str | None = "bank"
    purposes: tuple[str, ...] | None = ("assist", "operate", "audit", "personal")




def _grow(arr: np.ndarray, n: int, fill=0) -> np.ndarray:
    """``arr`` with room for at least ``n`` rows (capacity doubles), new rows ``fill``."""
    if len(arr) >= n:
        return arr
    new = np.full((max(n, 2 * len(arr), 16), *arr.shape[1:]), fill, dtype=arr.dtype)
    new[: len(arr)] = arr
    return new


class _BankCache:
    """This process's copy of one bank's tier 1, in slots updated in place: a change to a
    few units (a new cue, a promotion, an eviction) costs a few row writes, not a rebuild.
    ``ids[slot]`` is ``None`` for a free slot; cue rows live in one matrix with their owner
    slot (−1: a free row), so a lookup is two matrix-vector products. Guarded by ``lock``."""

    def __init__(self, epoch: bytes | None = None):
        self.epoch = epoch
        self.seq = -1
        self.lock = threading.Lock()
        self.dim = 0
        self.ids: list[str | None] = []
        self.slot_of: dict[str, int] = {}
        self.free: list[int] = []
        self.vectors = np.zeros((0, 0), np.float32)
        self.alive = np.zeros(0, bool)
        self.layers = np.zeros(0, np.int16)
        self.rooms = np.zeros(0, object)
        self.halls = np.zeros(0, object)
        self.audiences = np.zeros(0, object)  # None: unknown (unrestricted scopes only)
        self.purpose_bits = np.zeros(0, np.int64)  # bit i: purpose purpose_bit[name] == i
        self.purpose_bit: dict[str, int] = {}
        self.cue_rows = np.zeros((0, 0), np.float32)
        self.cue_owner = np.zeros(0, np.intp)
        self.cue_used = 0  # rows [0, cue_used) hold cues or holes
        self.cue_free: list[int] = []
        self.cues_of: dict[int, list[int]] = {}

    def _init_dim(self, dim: int) -> None:
        if self.dim == 0:
            self.dim = dim
            self.vectors = np.zeros((0, dim), np.float32)
            self.cue_rows = np.zeros((0, dim), np.float32)

    def bits(self, purposes) -> int:
        """The bitmask of ``purposes`` in this cache (a name gets the next free bit when
        first seen; at most 63 names). ``None`` (unknown) is 0: no purpose filter admits
        the unit."""
        if purposes is None:
            return 0
        out = 0
        for name in purposes:
            bit = self.purpose_bit.get(name)
            if bit is None:
                if len(self.purpose_bit) >= 63:
                    continue  # more purposes than bits: that name never matches here
                bit = self.purpose_bit[name] = len(self.purpose_bit)
            out |= 1 << bit
        return out

    def put(self, uid: str, vec: np.ndarray, layer: int, room, hall, cues: list[np.ndarray],
            audience: str | None = None, purposes=None) -> None:
        self._init_dim(vec.shape[0])
        slot = self.slot_of.get(uid)
        if slot is None:
            slot = self.free.pop() if self.free else len(self.ids)
            if slot == len(self.ids):
                self.ids.append(None)
                n = len(self.ids)
                self.vectors = _grow(self.vectors, n)
                self.alive = _grow(self.alive, n, False)
                self.layers = _grow(self.layers, n)
                self.rooms = _grow(self.rooms, n, None)
                self.halls = _grow(self.halls, n, None)
                self.audiences = _grow(self.audiences, n, None)
                self.purpose_bits = _grow(self.purpose_bits, n)
            self.ids[slot] = uid
            self.slot_of[uid] = slot
        self.vectors[slot] = vec
        self.alive[slot] = True
        self.layers[slot], self.rooms[slot], self.halls[slot] = layer, room, hall
        self.audiences[slot], self.purpose_bits[slot] = audience, self.bits(purposes)
        self._set_cues(slot, cues)

    def remove(self, uid: str) -> None:
        slot = self.slot_of.pop(uid, None)
        if slot is None:
            return
        self.ids[slot] = None
        self.alive[slot] = False
        self._set_cues(slot, [])
        self.free.append(slot)

    def _set_cues(self, slot: int, cues: list[np.ndarray]) -> None:
        for row in self.cues_of.pop(slot, []):
            self.cue_owner[row] = -1
            self.cue_free.append(row)
        rows = []
        for c in cues:
            if self.cue_free:
                row = self.cue_free.pop()
            else:
                row = self.cue_used
                self.cue_used += 1
                self.cue_rows = _grow(self.cue_rows, self.cue_used)
                self.cue_owner = _grow(self.cue_owner, self.cue_used, -1)
            self.cue_rows[row] = c
            self.cue_owner[row] = slot
            rows.append(row)
        if rows:
            self.cues_of[slot] = rows


def _f16(vec: np.ndarray, scale: float = 1.0) -> bytes:
    """``vec`` normalised, times ``scale`` (a cue's rank weight), as float16 bytes."""
    v = np.asarray(vec, dtype=np.float32).reshape(-1)
    n = float(np.linalg.norm(v))
    if n > 0:
        v = v / n
    return (v * np.float32(scale)).astype("<f2").tobytes()


def _from_f16(raw: bytes) -> np.ndarray:
    return np.frombuffer(raw, dtype="<f2").astype(np.float32)


def _s(b: bytes | str) -> str:
    return b.decode() if isinstance(b, bytes) else b


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(min(x, 50.0), -50.0)))


class HotTier:
    """Tier 1 over one Redis database (see the module docstring for the layout).

    ``capacity``: most units per bank (lowest activation evicted). ``history``: use times
    kept exactly per unit (k of Petrov's approximation). ``decay``: ACT-R d. ``cues``:
    retrieving query vectors remembered per unit. Thread-safe; one instance per process
    (it caches each bank's vectors, refreshed from Redis's change log on every lookup).
    Every method raises :class:`redis.RedisError` when Redis is unreachable.
    """

    def __init__(self, redis_client: redis.Redis, *, capacity: int = 512, history: int = 8,
                 decay: float = 0.5, cues: int = 8, prefix: str = "rcll:hot"):
        if capacity < 1 or history < 1 or cues < 0:
            raise ValueError("capacity and history must be >= 1, cues >= 0")
        self.r = redis_client
        self.capacity, self.history, self.decay, self.cues = capacity, history, decay, cues
        self.prefix = prefix
        self._bump = self.r.register_script(_BUMP)
        self._member_cues = self.r.register_script(_MEMBER_CUES)
        self._record_use = self.r.register_script(_RECORD_USE)
        self._load_script = self.r.register_script(_LOAD)
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, _BankCache] = OrderedDict()
        # rcll.replica.ReplicaRouter when a read replica is configured: the invalidation
        # points (rcll.cascade.invalidation) fence it after each commit
        self.replica = None

    # --- keys -------------------------------------------------------------------------------
    def key(self, bank_id: str, name: str) -> str:
        """The Redis key ``name`` of ``bank_id``: ``{prefix}:{<segment>}:{name}`` — the bank
        id percent-encoded (:func:`rcll.banks.ids.key_segment`: no brace, space or glob
        character; unchanged for ids of ``[A-Za-z0-9_.:-]``) in braces, so bank ``a`` and
        bank ``a:b`` — or ``a}`` — never share a key or a key pattern."""
        return f"{self.prefix}:{{{key_segment(bank_id)}}}:{name}"

    @property
    def banks_key(self) -> str:
        """Set of bank ids that have (or had) hot or Hebbian data."""
        return f"{self.prefix}:banks"

    def _bump_in(self, pipe, bank_id: str, unit_ids: list[str]) -> None:
        self._bump(keys=[self.key(bank_id, "seq"), self.key(bank_id, "chg"),
                         self.key(bank_id, "floor")], args=unit_ids, client=pipe)

    # --- lookup -----------------------------------------------------------------------------
    def lookup(self, scope: CallerScope, query_vector: np.ndarray, *, threshold: float,
               limit: int, now: float | None = None) -> list[TierHit]:
        """Hot units of ``scope.bank_id`` whose similarity to ``query_vector`` (float32
        (dim,), normalised here) is ≥ ``threshold``, filtered by the scope (layer ≤
        ``layer_cap``, ``room``, ``hall``), best first (module docstring), at most
        ``limit``; and by the scope's permissions: the unit's audience is ``'bank'`` or the
        caller (unless ``all_audiences``) and its purposes hold the scope's ``purpose`` (when
        set) — filtered before anything is scored, so a hidden unit is never a hit, a count
        or an activation read. Similarity is max(cosine(query, unit), cosine(query, any of its cues)),
        ``via`` telling which. A scope with ``include_superseded`` is never served by tier 1
        (it holds live units only): ``[]``. Raises :class:`redis.RedisError` when Redis is
        down (the caller falls through to the next tier)."""
        if scope.include_superseded or limit <= 0:
            return []
        now = time.time() if now is None else now
        q = np.asarray(query_vector, dtype=np.float32).reshape(-1)
        norm = float(np.linalg.norm(q))
        if norm == 0:
            return []
        q = q / norm
        cache = self._sync(scope.bank_id)
        if cache is None:
            return []
        with cache.lock:  # the arrays change in place: score under the bank's lock
            n = len(cache.ids)
            if not cache.slot_of or q.shape[0] != cache.dim:
                return []
            mask = cache.alive[:n] & (cache.layers[:n] <= scope.layer_cap)
            if scope.room:
                mask &= cache.rooms[:n] == scope.room
            if scope.hall:
                mask &= cache.halls[:n] == scope.hall
            if scope.rule.member is not None:  # the rule's audience half, vectorized
                mask &= audience_mask(cache.audiences[:n], scope.rule.member)
            if scope.purpose is not None:
                bit = cache.purpose_bit.get(scope.purpose)
                if bit is None:
                    mask &= False
                else:
                    mask &= (cache.purpose_bits[:n] & (1 << bit)) != 0
            sims = cache.vectors[:n] @ q
            cue_best = np.full(n, -np.inf, dtype=np.float32)
            m = cache.cue_used
            if m:
                owner = cache.cue_owner[:m]
                live = owner >= 0
                np.maximum.at(cue_best, owner[live], (cache.cue_rows[:m] @ q)[live])
            best = np.clip(np.maximum(sims, cue_best), -1.0, 1.0)  # float16 storage rounding
            idx = np.nonzero(mask & (best >= threshold))[0]
            idx = idx[np.argsort(-best[idx], kind="stable")][: 4 * limit + limit]
            found = [(cache.ids[i], float(best[i]), "cue" if cue_best[i] > sims[i] else "unit")
                     for i in idx]
        if not found:
            return []
        # activation can move a hit by < ACTIVATION_WEIGHT: score every hit that close to
        # the limit-th one (at most 4 × limit), the rest keep their cosine order
        cut = found[min(limit, len(found)) - 1][1] - ACTIVATION_WEIGHT
        contenders = [f for f in found[: 4 * limit] if f[1] >= cut]
        acts = self._activations(scope.bank_id, [f[0] for f in contenders], now)

        def rank(f: tuple[str, float, str]) -> float:
            b = acts.get(f[0])
            return -(f[1] + ACTIVATION_WEIGHT * (_sigmoid(b) if b is not None else 0.0))

        ranked = sorted(contenders, key=rank)
        rest = [f for f in found if f[1] < cut][: max(0, limit - len(ranked))]
        return [TierHit(uid, sim, acts.get(uid), via) for uid, sim, via in [*ranked, *rest][:limit]]

    def _sync(self, bank_id: str) -> _BankCache | None:
        """Bring this process's copy of ``bank_id``'s tier up to date (the changes since
        the copy's ``seq``, or everything when the copy is too old or of another epoch);
        ``None`` when the bank has no tier 1."""
        k = lambda n: self.key(bank_id, n)  # noqa: E731
        with self._lock:
            cache = self._cache.get(bank_id)
            if cache is None:
                cache = self._cache[bank_id] = _BankCache()
                while len(self._cache) > MAX_CACHED_BANKS:
                    self._cache.popitem(last=False)
            self._cache.move_to_end(bank_id)
        with cache.lock:
            pipe = self.r.pipeline(transaction=True)
            pipe.get(k("epoch")).get(k("seq")).get(k("floor"))
            pipe.zrangebyscore(k("chg"), f"({cache.seq}", "+inf", withscores=True)
            epoch, seq, floor, changed = pipe.execute()
            if epoch is None:
                fresh = None
            elif epoch != cache.epoch or int(floor or 0) > cache.seq:
                fresh = _BankCache(epoch)
                with fresh.lock:
                    self._load(bank_id, fresh, [_s(u) for u in self.r.zrange(k("z"), 0, -1)])
                    fresh.seq = int(seq or 0)
            else:
                self._load(bank_id, cache, [_s(u) for u, _ in changed])
                cache.seq = int(seq or 0)
                return cache
        with self._lock:
            if fresh is None:
                self._cache.pop(bank_id, None)
            else:
                self._cache[bank_id] = fresh
        return fresh

    def _load(self, bank_id: str, cache: _BankCache, ids: list[str]) -> None:
        """Read ``ids``' vectors, scope fields and cues into ``cache`` (its lock held);
        ids no longer in Redis are removed."""
        if not ids:
            return
        rows = self._load_script(
            keys=[self.key(bank_id, "v"), self.key(bank_id, "m"),
                  *[self.key(bank_id, f"c:{u}") for u in ids]], args=ids)
        for u, (v, m, c) in zip(ids, rows, strict=True):
            if v is None or m is None:
                cache.remove(u)
                continue
            meta = json.loads(m)
            layer, room, hall = meta[0], meta[1], meta[2]
            # [4], [5]: audience, purposes (absent in entries written before them: unknown)
            audience = meta[4] if len(meta) > 5 else None
            purposes = tuple(meta[5]) if len(meta) > 5 and meta[5] is not None else None
            cache.put(u, _from_f16(v), int(layer), room, hall, [_from_f16(x) for x in c],
                      audience, purposes)

    # --- activation -------------------------------------------------------------------------
    def _histories(self, bank_id: str, ids: list[str]) -> list[tuple[list[float], int, float] | None]:
        if not ids:
            return []
        pipe = self.r.pipeline(transaction=False)
        pipe.hmget(self.key(bank_id, "n"), ids).hmget(self.key(bank_id, "f"), ids)
        for u in ids:
            pipe.lrange(self.key(bank_id, f"t:{u}"), 0, -1)
        counts, firsts, *recents = pipe.execute()
        out = []
        for n, f, t in zip(counts, firsts, recents, strict=True):
            if f is None:
                out.append(None)
                continue
            out.append(([float(x) for x in t], int(n or 0), float(f)))
        return out

    def _b(self, hist: tuple[list[float], int, float] | None, now: float) -> float | None:
        if hist is None:
            return None
        recent, count, first = hist
        if count <= 0 or not recent:  # promoted, never used since: the promotion counts once
            return base_level(now, [first], 1, first, self.decay)
        return base_level(now, recent, max(count, len(recent)), min(first, *recent), self.decay)

    def _activations(self, bank_id: str, ids: list[str], now: float) -> dict[str, float | None]:
        return {u: self._b(h, now) for u, h in zip(ids, self._histories(bank_id, ids), strict=True)}

    def activation(self, bank_id: str, unit_id: str, now: float | None = None) -> float | None:
        """ACT-R base-level activation B of ``unit_id`` at ``now`` (default: the current
        time), ``None`` if it is not in tier 1. A unit promoted and not used since counts
        its promotion as its one use."""
        if self.r.zscore(self.key(bank_id, "z"), unit_id) is None:
            return None
        return self._b(self._histories(bank_id, [unit_id])[0], time.time() if now is None else now)

    def size(self, bank_id: str) -> int:
        """Units of ``bank_id`` in tier 1."""
        return int(self.r.zcard(self.key(bank_id, "z")))

    def missing(self, bank_id: str, unit_ids: list[str]) -> list[str]:
        """Those of ``unit_ids`` not in tier 1 of ``bank_id`` (one round trip)."""
        if not unit_ids:
            return []
        present = self.r.zmscore(self.key(bank_id, "z"), unit_ids)
        return [u for u, p in zip(unit_ids, present, strict=True) if p is None]

    def members(self, bank_id: str) -> list[str]:
        """Unit ids of ``bank_id`` in tier 1, lowest activation (as last stored) first."""
        return [_s(u) for u in self.r.zrange(self.key(bank_id, "z"), 0, -1)]

    # --- writes (after the response) --------------------------------------------------------
    def promote(self, bank_id: str, units: list[HotUnit], *, now: float | None = None,
                read_at: float | None = None) -> None:
        """Put ``units`` (live units of ``bank_id``, read from PostgreSQL by the caller)
        into tier 1; units already there are left as they are. Over ``capacity``, the
        units of lowest activation now are evicted.

        ``read_at``: when the caller's PostgreSQL read began (epoch s). A unit invalidated
        at or after it — or any unit of a bank dropped at or after it — is refused: the data
        may predate the invalidating commit. Without ``read_at``, a unit invalidated (or a
        bank dropped) in the last :data:`TOMBSTONE_S` seconds is refused."""
        if not units:
            return
        now = time.time() if now is None else now
        fence = read_at if read_at is not None else time.time() - TOMBSTONE_S
        units = list({u.unit_id: u for u in units}.values())
        ids = [u.unit_id for u in units]
        k = lambda n: self.key(bank_id, n)  # noqa: E731
        pipe = self.r.pipeline(transaction=False)
        pipe.get(k("dropped")).zmscore(k("dead"), ids).zmscore(k("z"), ids)
        dropped, dead, present = pipe.execute()
        if dropped is not None and float(dropped) >= fence:
            return
        new = [u for u, d, p in zip(units, dead, present, strict=True)
               if p is None and (d is None or d < fence)]
        if not new:
            return
        pipe = self.r.pipeline(transaction=True)
        pipe.setnx(k("epoch"), uuid.uuid4().hex).sadd(self.banks_key, bank_id)
        pipe.hset(k("v"), mapping={u.unit_id: _f16(u.vector) for u in new})
        pipe.hset(k("m"), mapping={u.unit_id: json.dumps(
            [int(u.layer), u.room, u.hall, int(u.token_count or 0), u.audience,
             list(u.purposes) if u.purposes is not None else None]) for u in new})
        for u in new:
            pipe.hsetnx(k("f"), u.unit_id, repr(now))
            pipe.hsetnx(k("n"), u.unit_id, 0)
        pipe.zadd(k("z"), {u.unit_id: 0.0 for u in new})  # B of one use now (see activation)
        pipe.zremrangebyscore(k("dead"), "-inf", time.time() - TOMBSTONE_S)
        self._bump_in(pipe, bank_id, [u.unit_id for u in new])
        pipe.execute()
        if self.size(bank_id) > self.capacity:
            self._evict(bank_id, now)

    def _evict(self, bank_id: str, now: float) -> list[str]:
        """Recompute every member's B at ``now``, store it, remove the lowest beyond
        ``capacity``; the evicted ids."""
        ids = self.members(bank_id)
        if len(ids) <= self.capacity:
            return []
        acts = self._activations(bank_id, ids, now)
        scores = {u: (b if b is not None else -1e9) for u, b in acts.items()}
        self.r.zadd(self.key(bank_id, "z"), scores, xx=True)
        victims = sorted(ids, key=lambda u: (scores[u], u))[: len(ids) - self.capacity]
        self._remove(bank_id, victims)
        return victims

    def _remove(self, bank_id: str, ids: list[str], pipe=None) -> None:
        k = lambda n: self.key(bank_id, n)  # noqa: E731
        own = pipe is None
        pipe = self.r.pipeline(transaction=True) if own else pipe
        pipe.zrem(k("z"), *ids)
        for name in ("v", "m", "n", "f"):
            pipe.hdel(k(name), *ids)
        pipe.delete(*[k(f"t:{u}") for u in ids], *[k(f"c:{u}") for u in ids])
        self._bump_in(pipe, bank_id, ids)
        if own:
            pipe.execute()

    def record_use(self, bank_id: str, unit_ids: list[str], *,
                   query_vector: np.ndarray | None = None, now: float | None = None) -> None:
        """One retrieval that returned ``unit_ids`` (best first): for each of them in tier
        1, a use at ``now`` (history, count) and the query as a cue (replacing a cue it
        nearly repeats, :data:`CUE_DUPLICATE_COSINE`, so the cue carries this answer's
        rank), then its stored B is refreshed; Hebbian co-recall between all of
        ``unit_ids`` (:func:`rcll.cascade.hebbian.co_recall`), members of tier 1 or not.

        Four Redis calls whatever the number of units: membership and the members' cues
        (:data:`_MEMBER_CUES`), the uses and cues written with one change-log stamp
        (:data:`_RECORD_USE`, atomic), the refreshed B (``ZADD XX``), co-recall. What
        this work costs the API's CPU is mostly the Redis client's per-command packing
        and parsing, so the commands per unit run server-side."""
        from rcll.cascade import hebbian

        if not unit_ids:
            return
        now = time.time() if now is None else now
        ids = list(dict.fromkeys(unit_ids))
        k = lambda n: self.key(bank_id, n)  # noqa: E731
        rank_of = {u: rank for rank, u in enumerate(ids)}
        want_cue = query_vector is not None and self.cues > 0
        if want_cue:  # membership and the members' cues in one call
            held_by = self._member_cues(keys=[k("z"), *[k(f"c:{u}") for u in ids]], args=ids)
            members = [u for u, cl in zip(ids, held_by, strict=True) if cl != 0]
            cue_lists = [cl for cl in held_by if cl != 0]
        else:
            present = self.r.zmscore(k("z"), ids)
            members = [u for u, p in zip(ids, present, strict=True) if p is not None]
        if members:
            self._uses(bank_id, members, cue_lists if want_cue else None, rank_of,
                       query_vector, now)
        hebbian.co_recall(self.r, self.prefix, bank_id, ids)

    def _uses(self, bank_id: str, members: list[str], cue_lists: list[list[bytes]] | None,
              rank_of: dict[str, int], query_vector: np.ndarray | None, now: float) -> None:
        """:meth:`record_use`'s writes for the tier-1 ``members`` (``cue_lists``: each
        one's held cues, ``None``: no cue is written) in one :data:`_RECORD_USE` call, then
        their refreshed B."""
        k = lambda n: self.key(bank_id, n)  # noqa: E731
        want_cue = cue_lists is not None
        keys = [k("n"), k("f"), k("seq"), k("chg"), k("floor")]
        args: list = [repr(now), self.history, self.cues, len(members)]
        if want_cue:
            q = np.asarray(query_vector, dtype=np.float32).reshape(-1)
            q = q / (float(np.linalg.norm(q)) or 1.0)
            held = [c for cl in cue_lists for c in cl]
            # every held cue's cosine to the query in one product (a cue is stored scaled
            # by its rank's weight: the cosine divides that out)
            close = iter(_cosines(held, q) >= CUE_DUPLICATE_COSINE) if held else iter(())
        for j, u in enumerate(members):
            keys += [k(f"t:{u}"), k(f"c:{u}")]
            if not want_cue:
                args += [u, b"", 0]
                continue
            # a near-repeat of a cue the unit holds replaces it (the rank it carries is
            # this answer's), so a unit never holds one question twice
            dups = [c for c in cue_lists[j] if next(close)]
            new = _f16(q, cue_weight(rank_of[u]))
            if dups == [new]:  # the same cue, at the same rank: nothing to write
                args += [u, b"", 0]
            else:
                args += [u, new, len(dups), *dups]
        histories = self._record_use(keys=keys, args=args)
        fresh = {}
        for u, (count, first, recent) in zip(members, histories, strict=True):
            b = self._b(([float(x) for x in recent], int(count or 0), float(first)), now)
            if b is not None:
                fresh[u] = b
        if fresh:
            self.r.zadd(k("z"), fresh, xx=True)  # xx: a unit evicted meanwhile stays out

    def forget_cues(self, bank_id: str) -> int:
        """Drop every cue of ``bank_id``'s hot units (new units were written: answers
        cached for earlier questions may miss them). Returns how many units had their cues
        dropped."""
        ids = self.members(bank_id)
        if not ids:
            return 0
        pipe = self.r.pipeline(transaction=True)
        pipe.delete(*[self.key(bank_id, f"c:{u}") for u in ids])
        self._bump_in(pipe, bank_id, ids)
        pipe.execute()
        return len(ids)

    def invalidate(self, bank_id: str, unit_ids: Iterable[str]) -> int:
        """Remove ``unit_ids`` from tier 1 of ``bank_id`` at once (superseded, invalidated,
        forgotten, re-scoped or deleted in PostgreSQL), with their cues, history and
        Hebbian weights, and refuse their promotion for :data:`TOMBSTONE_S`. Returns how
        many were in tier 1."""
        from rcll.cascade import hebbian

        ids = list(dict.fromkeys(str(u) for u in unit_ids))
        if not ids:
            return 0
        present = self.r.zmscore(self.key(bank_id, "z"), ids)
        now = time.time()
        pipe = self.r.pipeline(transaction=True)
        pipe.zadd(self.key(bank_id, "dead"), dict.fromkeys(ids, now))
        self._remove(bank_id, ids, pipe)
        pipe.execute()
        hebbian.forget(self.r, self.prefix, bank_id, ids)
        return sum(p is not None for p in present)

    def drop_bank(self, bank_id: str) -> None:
        """Remove everything tier 1 and the co-recall weights hold for ``bank_id`` (a
        deleted bank); promotions into it are refused for :data:`TOMBSTONE_S`."""
        from rcll.cascade import hebbian

        # every key of the bank (SCAN, so keys a racing update re-created for a unit just
        # evicted go too); the glob characters of the bank id escaped
        pattern = self.key(bank_id, "").translate({ord(c): "\\" + c for c in "*?[]\\"}) + "*"
        keys = [k for k in self.r.scan_iter(match=pattern, count=1000)]
        pipe = self.r.pipeline(transaction=True)
        pipe.set(self.key(bank_id, "dropped"), repr(time.time()), ex=int(TOMBSTONE_S))
        keys = [k for k in keys if _s(k) != self.key(bank_id, "dropped")]
        for i in range(0, len(keys), 512):
            pipe.delete(*keys[i:i + 512])
        pipe.execute()
        hebbian.drop_bank(self.r, self.prefix, bank_id)
        self.r.srem(self.banks_key, bank_id)
        with self._lock:
            self._cache.pop(bank_id, None)  # other processes see the epoch gone
