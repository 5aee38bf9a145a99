"""Reflect: answer a question from what recall found, through the one LLM client (litellm).

Recall never calls this module (spec §1.1: recall calls no language model); the HTTP route
``POST /v1/default/banks/{bank_id}/reflect`` runs recall first and hands its results here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rcll.errors import Rejected, Unavailable
from rcll.llm.prompts import reflect_answer

MAX_MEMORIES = 50  # units given to the model, in recall's order


@dataclass
class ReflectAnswer:
    """``text``: the answer; ``based_on``: the recall results the model said it used (each a
    result dict as recall rendered it); ``usage``: ``{prompt_tokens, completion_tokens,
    cost_usd, calls, retries}``; ``model`` and ``prompt_version``."""

    text: str
    based_on: list[dict] = field(default_factory=list)
    usage: dict = field(default_factory=dict)
    model: str = ""
    prompt_version: str = reflect_answer.VERSION


def reflect(llm, query: str, results: list[dict], *, context: str | None = None,
            mission: str | None = None, max_tokens: int | None = None) -> ReflectAnswer:
    """Ask ``llm`` (:class:`rcll.llm.client.LLMClient`) to answer ``query`` from ``results``
    (recall's result dicts, best first; at most :data:`MAX_MEMORIES` are sent).

    Raises 400 ``llm_not_configured`` when ``llm`` is ``None`` (chunk mode), 503
    ``llm_unavailable`` when the provider fails after its retries, 502
    ``llm_reply_invalid`` when its reply never matched the schema."""
    from rcll.llm.client import LLMError, LLMReplyInvalid, LLMUnavailable

    if llm is None:
        raise Rejected(400, "llm_not_configured",
                       "reflect needs a language model and none is configured "
                       "(RCLL_LLM_PROVIDER=none); use recall, or configure RCLL_LLM_PROVIDER "
                       "and RCLL_LLM_MODEL", {"setting": "RCLL_LLM_PROVIDER"})
    shown = results[:MAX_MEMORIES]
    memories = [((r.get("occurred_start") or r.get("mentioned_at") or "")[:10], r["text"])
                for r in shown]
    messages = reflect_answer.build_messages(query, memories, context=context, mission=mission)
    try:
        out = llm.complete_json(messages, reflect_answer.ReflectReply, max_tokens=max_tokens)
    except LLMReplyInvalid as exc:
        raise Rejected(502, "llm_reply_invalid", "the language model's reply was not a valid "
                       "answer after retries", {"raw_reply": exc.raw_reply[:2000]})
    except LLMUnavailable as exc:
        raise Unavailable(f"the language model is unavailable: {exc}")
    except LLMError as exc:
        raise Rejected(502, "llm_error", f"the language model refused the call: {exc}")
    reply = out.parsed
    used = [shown[i - 1] for i in dict.fromkeys(reply.used) if 1 <= i <= len(shown)]
    return ReflectAnswer(text=reply.answer, based_on=used, usage=out.usage.as_dict(),
                         model=llm.model)
