"""Hebbian co-recall weights (spec §5 "after the response"): units returned together by one
recall strengthen a pairwise weight ("cells that fire together wire together", Hebb 1949),
in Redis, per bank. The weights are decayed and pruned by a beat task
(:func:`decay_all`, scheduled by ``workers``).

Keys: ``{prefix}:{<bank>}:heb:{unit}`` a sorted set partner id → weight (symmetric: both
directions are written), ``{prefix}:{<bank>}:hebk`` the set of units that have one.

Constants (no measurement behind them yet; they bound memory and make one recall's
contribution independent of its length):

- :data:`MAX_UNITS_PER_RECALL` = 10: only the 10 best-ranked units of a recall take part
  (a 50-unit answer would make 2,450 directed pairs, most of them incidental);
- each unit of a recall of n participants gets +1/(n − 1) toward each of the others, so
  a unit's total gain per recall is 1 whatever n;
- :data:`MAX_PARTNERS` = 32 partners per unit, the strongest kept;
- :data:`HALF_LIFE_S` = 7 days: every run of the beat task multiplies every weight by
  0.5^(interval / half-life); :data:`PRUNE_BELOW` = 0.05 (a single co-recall in a recall
  of 10, 1/9 ≈ 0.11, is pruned after about a week without reinforcement).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

import redis

from rcll.banks.ids import key_segment

log = logging.getLogger(__name__)

MAX_UNITS_PER_RECALL = 10
MAX_PARTNERS = 32
HALF_LIFE_S = 7 * 24 * 3600.0
PRUNE_BELOW = 0.05


def _key(prefix: str, bank_id: str, name: str) -> str:
    return f"{prefix}:{{{key_segment(bank_id)}}}:{name}"  # as rcll.cascade.hot.HotTier.key


def _s(b: bytes | str) -> str:
    return b.decode() if isinstance(b, bytes) else b


# One recall's co-recall in one server-side call (atomic, as MULTI/EXEC was): KEYS = the n
# units' ``heb:`` keys, then ``hebk`` and the ``banks`` set; ARGV = the increment, the
# partners kept, the bank id, then the n unit ids (in KEYS' order).
_CO_RECALL = """
local n = #KEYS - 2
for i = 1, n do
  for j = 1, n do
    if i ~= j then redis.call('ZINCRBY', KEYS[i], ARGV[1], ARGV[3 + j]) end
  end
  redis.call('ZREMRANGEBYRANK', KEYS[i], 0, -(tonumber(ARGV[2]) + 1))
end
redis.call('SADD', KEYS[n + 1], unpack(ARGV, 4, 3 + n))
redis.call('SADD', KEYS[n + 2], ARGV[3])
return n * (n - 1)
"""
_script = None  # redis.commands.core.Script of _CO_RECALL (called with each caller's client)


def co_recall(r: redis.Redis, prefix: str, bank_id: str, unit_ids: list[str]) -> int:
    """Strengthen the weights between the first :data:`MAX_UNITS_PER_RECALL` of
    ``unit_ids`` (returned together, best first): +1/(n − 1) per ordered pair, each unit's
    partners cut to the :data:`MAX_PARTNERS` strongest. One Lua call (:data:`_CO_RECALL`)
    instead of n² commands: what a recall's after-response work costs the API's CPU is
    mostly the Redis client's per-command packing and parsing. Returns the pairs touched."""
    ids = list(dict.fromkeys(str(u) for u in unit_ids))[:MAX_UNITS_PER_RECALL]
    n = len(ids)
    if n < 2:
        return 0
    global _script
    if _script is None:
        _script = r.register_script(_CO_RECALL)
    keys = [_key(prefix, bank_id, f"heb:{u}") for u in ids]
    keys += [_key(prefix, bank_id, "hebk"), f"{prefix}:banks"]
    return int(_script(keys=keys, args=[repr(1.0 / (n - 1)), MAX_PARTNERS, bank_id, *ids],
                       client=r))


def partners(r: redis.Redis, prefix: str, bank_id: str, unit_id: str,
             limit: int = MAX_PARTNERS) -> list[tuple[str, float]]:
    """``unit_id``'s co-recall partners, strongest first: ``[(unit id, weight)]``."""
    rows = r.zrevrange(_key(prefix, bank_id, f"heb:{unit_id}"), 0, limit - 1, withscores=True)
    return [(_s(u), float(w)) for u, w in rows]


def forget(r: redis.Redis, prefix: str, bank_id: str, unit_ids: Iterable[str]) -> None:
    """Remove ``unit_ids``' weights in both directions (an invalidated unit)."""
    ids = [str(u) for u in unit_ids]
    if not ids:
        return
    pipe = r.pipeline(transaction=False)
    for u in ids:
        pipe.zrange(_key(prefix, bank_id, f"heb:{u}"), 0, -1)
    partner_lists = pipe.execute()
    pipe = r.pipeline(transaction=True)
    for u, ps in zip(ids, partner_lists, strict=True):
        for p in ps:
            pipe.zrem(_key(prefix, bank_id, f"heb:{_s(p)}"), u)
        pipe.delete(_key(prefix, bank_id, f"heb:{u}"))
    pipe.srem(_key(prefix, bank_id, "hebk"), *ids)
    pipe.execute()


def drop_bank(r: redis.Redis, prefix: str, bank_id: str) -> None:
    """Delete every co-recall weight of ``bank_id``."""
    hk = _key(prefix, bank_id, "hebk")
    units = [_s(u) for u in r.smembers(hk)]
    keys = [_key(prefix, bank_id, f"heb:{u}") for u in units] + [hk]
    for i in range(0, len(keys), 512):
        r.delete(*keys[i:i + 512])


def decay_bank(r: redis.Redis, prefix: str, bank_id: str, factor: float,
               prune_below: float = PRUNE_BELOW) -> dict:
    """Multiply every weight of ``bank_id`` by ``factor`` (0 < factor ≤ 1), drop weights
    below ``prune_below`` and units left without partners. Returns
    ``{"units": scanned, "pruned_units": emptied}``."""
    hk = _key(prefix, bank_id, "hebk")
    units = [_s(u) for u in r.sscan_iter(hk, count=500)]
    emptied: list[str] = []
    for i in range(0, len(units), 200):
        batch = units[i:i + 200]
        pipe = r.pipeline(transaction=False)
        for u in batch:
            key = _key(prefix, bank_id, f"heb:{u}")
            pipe.zunionstore(key, {key: factor})
            pipe.zremrangebyscore(key, "-inf", f"({prune_below}")
            pipe.zcard(key)
        res = pipe.execute()
        emptied += [u for u, card in zip(batch, res[2::3], strict=True) if card == 0]
    if emptied:
        r.srem(hk, *emptied)
    return {"units": len(units), "pruned_units": len(emptied)}


def decay_all(r: redis.Redis, prefix: str, interval_s: float,
              half_life_s: float = HALF_LIFE_S, prune_below: float = PRUNE_BELOW,
              now: float | None = None) -> dict:
    """The beat task's work: decay every bank's weights by 0.5^(elapsed / ``half_life_s``)
    and prune below ``prune_below``. ``elapsed`` is the time since the previous run (kept
    in ``{prefix}:heb_decayed_at``, so a skipped or late run decays by the true time);
    ``interval_s`` on the first run. Raises :class:`redis.RedisError` when Redis is down.
    Returns totals over banks and the factor applied."""
    now = time.time() if now is None else now
    last = r.getset(f"{prefix}:heb_decayed_at", repr(now))
    elapsed = now - float(last) if last is not None else interval_s
    factor = 0.5 ** (max(elapsed, 0.0) / half_life_s)
    total = {"banks": 0, "units": 0, "pruned_units": 0, "factor": factor}
    for bank in r.smembers(f"{prefix}:banks"):
        out = decay_bank(r, prefix, _s(bank), factor, prune_below)
        total["banks"] += 1
        total["units"] += out["units"]
        total["pruned_units"] += out["pruned_units"]
    return total
