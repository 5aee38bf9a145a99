"""The LLM client through the real ``litellm.completion``, with the scripted stand-in
(custom provider ``rcll-replay``) at the litellm boundary: retries, errors, usage, cost."""

import json

import pytest
from pydantic import BaseModel

from rcll.llm.client import LLMClient, LLMConfig, LLMReplyInvalid, LLMUnavailable
from rcll.llm.prompts import extract_facts
from rcll.llm.replay import echo_reply

VALID = {"facts": [{"text": "Alice moved to Lisbon in 2021.", "kind": "event",
                    "entities": ["Alice", "Lisbon"]}]}


class Tiny(BaseModel):
    a: int


def client_for(tmp_path, scripts, **kw) -> tuple[LLMClient, list[float]]:
    path = tmp_path / "replay.json"
    path.write_text(json.dumps({"scripts": scripts, "default": "echo"}))
    slept: list[float] = []
    cfg = LLMConfig(provider="litellm", model="rcll-replay/unit", replay_path=path,
                    max_retries=kw.pop("max_retries", 2), backoff_s=0.5, timeout_s=5,
                    input_cost_per_token=1e-6, output_cost_per_token=2e-6, **kw)
    return LLMClient(cfg, sleep=slept.append), slept


def ask(client, marker):
    msgs = extract_facts.build_messages(f"Alice: hello {marker}")
    return client.complete_json(msgs, extract_facts.ExtractionReply)


def test_valid_reply_parsed_with_usage_and_cost(tmp_path):
    client, slept = client_for(tmp_path, [{"match": "M-OK", "replies": [{"json": VALID}]}])
    res = ask(client, "M-OK")
    assert [f.text for f in res.parsed.facts] == ["Alice moved to Lisbon in 2021."]
    assert res.parsed.facts[0].entities == ["Alice", "Lisbon"]
    u = res.usage
    assert (u.calls, u.retries) == (1, 0) and slept == []
    assert u.prompt_tokens > 100 and u.completion_tokens > 5
    assert u.cost_usd == pytest.approx(u.prompt_tokens * 1e-6 + u.completion_tokens * 2e-6)


@pytest.mark.parametrize("first", [{"content": "{not json"}, {"error": "timeout"},
                                   {"error": "rate_limit"}, {"content": ""},
                                   {"json": {"facts": [{"kind": "fact"}]}}],
                         ids=["invalid-json", "timeout", "rate-limit", "empty", "schema"])
def test_one_bad_reply_then_valid_is_retried(tmp_path, first):
    client, slept = client_for(tmp_path, [{"match": "M-RETRY", "replies": [first, {"json": VALID}]}])
    res = ask(client, "M-RETRY")
    assert len(res.parsed.facts) == 1
    assert (res.usage.calls, res.usage.retries) == (2, 1)
    assert slept == [0.5]  # backoff_s before the first retry


def test_reply_that_stays_invalid_raises_with_the_raw_reply(tmp_path):
    client, slept = client_for(tmp_path, [{"match": "M-BAD", "replies": [{"content": "{oops"}]}])
    with pytest.raises(LLMReplyInvalid) as info:
        ask(client, "M-BAD")
    assert info.value.raw_reply == "{oops"
    assert info.value.usage.calls == 3 and info.value.usage.retries == 2
    assert slept == [0.5, 1.0]  # exponential backoff


def test_provider_down_after_retries_is_unavailable(tmp_path):
    client, _ = client_for(tmp_path, [{"match": "M-DOWN", "replies": [{"error": "unavailable"}]}],
                           max_retries=1)
    with pytest.raises(LLMUnavailable, match="unavailable after 2 attempts"):
        ask(client, "M-DOWN")


def test_fenced_json_is_accepted(tmp_path):
    fenced = "```json\n" + json.dumps({"a": 3}) + "\n```"
    client, _ = client_for(tmp_path, [{"match": "M-FENCE", "replies": [{"content": fenced}]}])
    res = client.complete_json([{"role": "user", "content": "M-FENCE"}], Tiny)
    assert res.parsed.a == 3


def test_echo_builds_one_fact_per_sentence_with_speaker_and_names():
    prompt = "<chunk>\nCaroline: I went to Paris with Melanie. We stayed because it rained!\n</chunk>"
    reply = json.loads(echo_reply("ExtractionReply", prompt))
    texts = [f["text"] for f in reply["facts"]]
    assert texts == ["Caroline said: I went to Paris with Melanie.",
                     "Caroline said: We stayed because it rained!"]
    assert reply["facts"][0]["entities"] == ["Caroline", "Paris", "Melanie"]
    assert reply["facts"][1]["caused_by"] == [0]


def test_health_without_a_call(tmp_path):
    client, _ = client_for(tmp_path, [])
    assert client.health() == {"provider": "litellm", "model": "rcll-replay/unit", "ok": True}
    missing = LLMClient(LLMConfig(provider="offline", model="rcll-offline/x",
                                  model_path=tmp_path / "none.gguf"))
    h = missing.health()
    assert h["ok"] is False and "not found" in h["error"]


def test_offline_without_its_model_file_is_unavailable(tmp_path):
    client = LLMClient(LLMConfig(provider="offline", model="rcll-offline/none",
                                 model_path=tmp_path / "none.gguf", max_retries=0))
    with pytest.raises(LLMUnavailable, match="GGUF model file not found"):
        client.complete_json([{"role": "user", "content": "hi"}], Tiny)
