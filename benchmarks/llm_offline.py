"""The ``offline`` provider on real LoCoMo turns: facts per turn and seconds per turn.

Runs the extraction prompt (:mod:`rcll.llm.prompts.extract_facts`) through the same client
the extract stage uses (``litellm.completion`` → custom provider ``rcll-offline`` →
llama-cpp-python) on the first ``--turns`` turns of a conversation, and prints per turn the
facts, then: turns, valid replies, facts/turn, s/turn, tokens, retries, model file.

    python benchmarks/llm_offline.py --model-path /path/to/model.gguf [--turns 10]

Needs the ``offline`` extra (llama-cpp-python).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCOMO = ROOT.parent / "shared" / "data" / "locomo"  # beside the checkout
sys.path.insert(0, str(ROOT))

from rcll.eval.datasets import load_locomo  # noqa: E402
from rcll.llm.client import LLMClient, LLMConfig, LLMError  # noqa: E402
from rcll.llm.prompts import extract_facts  # noqa: E402
from rcll.retain.extraction import grounded_time  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-path", required=True)
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--conversation", default="conv-30")
    ap.add_argument("--data", default=str(LOCOMO))
    ap.add_argument("--max-retries", type=int, default=1)
    ap.add_argument("--max-tokens", type=int, default=768)
    args = ap.parse_args()
    path = Path(args.model_path)
    client = LLMClient(LLMConfig(provider="offline", model=f"rcll-offline/{path.stem}",
                                 model_path=path, max_retries=args.max_retries, backoff_s=0,
                                 max_tokens=args.max_tokens, timeout_s=300))
    items = load_locomo(args.data).banks[f"eval-locomo-{args.conversation}"][:args.turns]
    t_load = time.monotonic()
    try:  # loads the model once; a tiny model may not even answer this validly
        client.complete_json([{"role": "user", "content": "Return {\"facts\": []}."}],
                             extract_facts.ExtractionReply)
    except LLMError as exc:
        print(f"warm-up reply invalid: {str(exc)[:120]}")
    load_s = time.monotonic() - t_load
    n_facts = valid = dated = 0
    prompt_toks = completion_toks = retries = 0
    t0 = time.monotonic()
    for item in items:
        from datetime import datetime

        when = datetime.fromisoformat(item["timestamp"]) if item.get("timestamp") else None
        msgs = extract_facts.build_messages(item["content"], context=item.get("context"),
                                            mentioned_at=when)
        try:
            res = client.complete_json(msgs, extract_facts.ExtractionReply)
        except LLMError as exc:
            print(f"- {item['content'][:80]!r}\n    FAILED {type(exc).__name__}: {str(exc)[:150]}")
            retries += exc.usage.retries
            continue
        valid += 1
        retries += res.usage.retries
        prompt_toks += res.usage.prompt_tokens
        completion_toks += res.usage.completion_tokens
        n_facts += len(res.parsed.facts)
        print(f"- {item['content'][:80]!r}")
        for f in res.parsed.facts:
            start = grounded_time(f.occurred_start, item["content"], when)
            dated += start is not None
            print(f"    [{f.kind}] {f.text[:100]} {f.entities[:4]} "
                  f"{'@' + start.date().isoformat() if start else ''}")
    dt = time.monotonic() - t0
    print(f"\nmodel {path.name} ({path.stat().st_size / 1e6:.0f} MB), load {load_s:.1f} s")
    print(f"turns {len(items)}, valid replies {valid}, facts {n_facts} "
          f"= {n_facts / len(items):.2f} facts/turn, grounded dates {dated}, "
          f"{dt / len(items):.2f} s/turn, tokens {prompt_toks} in / {completion_toks} out, "
          f"retries {retries}")


if __name__ == "__main__":
    main()
