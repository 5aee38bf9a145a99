"""Reflect: answer a question from what recall found, through the one LLM client (litellm),
under the bank's directives in scope (:meth:`rcll.directives.service.DirectiveService.for_reflect`),
highest priority first.

Recall never calls this module (spec §1.1: recall calls no language model); the HTTP route
``POST /v1/default/banks/{bank_id}/reflect`` runs recall first and hands its results here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from uuid import uuid4

from rcll.errors import Rejected, Unavailable
from rcll.llm.prompts import reflect_answer
from rcll.llm.request_log import CallInfo

MAX_MEMORIES = 50  # units given to the model, in recall's order


@dataclass
class ReflectAnswer:
    """``text``: the answer; ``based_on``: the recall results the model said it used (each a
    result dict as recall rendered it); ``usage``: ``{prompt_tokens, completion_tokens,
    cost_usd, calls, retries}``; ``model`` and ``prompt_version``; ``directives``: the ones
    the prompt carried (rows, in the prompt's order); ``trace_id``: the run's id in the LLM
    request log."""

    text: str
    based_on: list[dict] = field(default_factory=list)
    directives: list[dict] = field(default_factory=list)
    trace_id: str = ""
    usage: dict = field(default_factory=dict)
    model: str = ""
    prompt_version: str = reflect_answer.VERSION


def reflect(llm, query: str, results: list[dict], *, context: str | None = None,
            mission: str | None = None, max_tokens: int | None = None,
            directives: list[dict] | None = None, bank_id: str | None = None) -> ReflectAnswer:
    """Ask ``llm`` (:class:`rcll.llm.client.LLMClient`) to answer ``query`` from ``results``
    (recall's result dicts, best first; at most :data:`MAX_MEMORIES` are sent), obeying
    ``directives`` (rows with ``name`` and ``content``, highest priority first). The call is
    logged for ``bank_id`` as operation and step ``reflect``, one run id per reflect.

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
    rules = list(directives or [])
    messages = reflect_answer.build_messages(query, memories, context=context, mission=mission,
                                             directives=[(d["name"], d["content"])
                                                         for d in rules])
    trace_id = str(uuid4())
    try:
        out = llm.complete_json(messages, reflect_answer.ReflectReply, max_tokens=max_tokens,
                                call=CallInfo(bank_id=bank_id, operation="reflect",
                                              scope="reflect", trace_id=trace_id))
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
                         model=llm.model, directives=rules, trace_id=trace_id)
