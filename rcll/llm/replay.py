"""The scripted stand-in at the litellm boundary: custom provider ``rcll-replay``.

Used as ``RCLL_LLM_PROVIDER=litellm RCLL_LLM_MODEL=rcll-replay/<any name>
RCLL_LLM_REPLAY_PATH=<file>``; it runs wherever the client runs (a Celery worker process
configured by environment, a test, a demo), and the rest of the code only sees
``litellm.completion``. The file is JSON, re-read when it changes::

    {"scripts": [{"match": "<substring of the user messages>",
                  "replies": [{"content": "<raw reply text>"},
                              {"json": {...}},              # a reply of this JSON
                              {"error": "timeout" | "rate_limit" | "unavailable"},
                              {"content": "", "delay_s": 0.5}]}],
     "default": "echo",                                     # or "empty"
     "echo_delay_s": 0.0,
     "record": false}

The n-th call whose user messages contain ``match`` (first matching script wins) gets
``replies[n]``; past the end the last reply repeats. The call count per script is kept in
``<file>.state`` under an exclusive ``flock``, so it survives worker restarts and is shared
by every process. Errors are litellm's own classes (``litellm.Timeout``,
``litellm.RateLimitError``, ``litellm.ServiceUnavailableError``). Calls no script matches
get the default: ``echo`` builds a valid reply from the prompt (see :func:`echo_reply`),
``empty`` an empty reply. Usage is estimated as characters / 4 (no tokenizer at hand).
With ``"record": true`` every call appends one JSON line ``{"model", "messages",
"schema"}`` to ``<file>.calls.jsonl`` (under the same lock): what the model was sent, for
tests that check a prompt (:func:`recorded_calls`).
"""

from __future__ import annotations

import fcntl
import json
import re
import time
from pathlib import Path

import litellm
from litellm import CustomLLM
from litellm.types.utils import Usage

from rcll.llm.prompts import CHUNK_CLOSE, CHUNK_OPEN, UNITS_CLOSE, UNITS_OPEN

_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_NAME = re.compile(r"\b[A-Z][a-z]+(?:\s+[A-Z][a-z]+)*\b")
_STOP = {"I", "The", "A", "An", "It", "We", "You", "He", "She", "They", "This", "That", "My",
         "Our", "Yes", "No", "Oh", "Hey", "Hi", "Wow", "So", "And", "But", "What", "How",
         "Thanks", "Thank", "Yeah", "Sure", "Well", "Just", "Really", "Great", "Me", "Your"}
_CAUSAL = re.compile(r"\b(because|so that|therefore|that's why|thanks to)\b", re.I)


def _user_text(messages: list) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "user")


def _between(text: str, start: str, end: str) -> str | None:
    i = text.rfind(start)
    j = text.find(end, i + len(start)) if i >= 0 else -1
    return text[i + len(start):j].strip() if i >= 0 and j > i else None


def _names(sentence: str) -> list[str]:
    """Capitalised word runs, leading openers (``Hey``, ``The``…) dropped; a single word that
    starts the sentence is skipped (most are not names: ``Let``, ``Keep``)."""
    out: dict[str, None] = {}
    for m in _NAME.finditer(sentence):
        words = m.group(0).split()
        lead = 0
        while lead < len(words) and words[lead] in _STOP:
            lead += 1
        words = words[lead:]
        if not words or (m.start() == 0 and lead == 0 and len(words) == 1):
            continue
        out.setdefault(" ".join(words), None)
    return list(out)


def echo_reply(schema_name: str, prompt: str) -> str:
    """A plausible valid reply built from the prompt, so long runs need no script.

    ``ExtractionReply``: one fact per sentence of the text between ``<chunk>`` tags (the
    speaker prefix ``"Name: "`` kept on each fact), entities = the speaker and capitalised
    word runs (:func:`_names`), ``caused_by`` the previous fact when a sentence says
    ``because``/``so that``. ``ClosetReply``: the first sentence of the first five units
    between ``<units>`` tags. Anything else: ``{}``."""
    if schema_name == "ExtractionReply":
        chunk = _between(prompt, CHUNK_OPEN, CHUNK_CLOSE) or ""
        speaker, body = None, chunk
        m = re.match(r"^([A-Z][\w .'-]{0,40}):\s+(.*)$", chunk, re.S)
        if m:
            speaker, body = m.group(1), m.group(2)
        facts = []
        for sentence in (s.strip() for s in _SENTENCE.split(body)):
            if len(sentence) < 3:
                continue
            names = _names(sentence)
            if speaker:
                names = [speaker, *[n for n in names if n != speaker]]
            facts.append({"text": f"{speaker} said: {sentence}" if speaker else sentence,
                          "kind": "fact", "entities": names[:8],
                          "caused_by": [len(facts) - 1] if facts and _CAUSAL.search(sentence)
                          else []})
        return json.dumps({"facts": facts})
    if schema_name == "ClosetReply":
        units = _between(prompt, UNITS_OPEN, UNITS_CLOSE) or ""
        lines = [ln.split("] ", 1)[-1] for ln in units.splitlines() if ln.strip()][:5]
        firsts = [_SENTENCE.split(ln)[0] for ln in lines]
        return json.dumps({"title": "Summary", "summary": " ".join(firsts) or "No content."})
    return "{}"


def recorded_calls(path: str | Path) -> list[dict]:
    """The calls recorded beside the script file ``path`` (``"record": true``), oldest
    first: ``[{"model", "messages", "schema"}]``; ``[]`` when there are none."""
    calls = Path(f"{path}.calls.jsonl")
    if not calls.exists():
        return []
    return [json.loads(line) for line in calls.read_text(encoding="utf-8").splitlines()
            if line.strip()]


class ReplayLLM(CustomLLM):
    """litellm custom provider replaying the script at ``path`` (``None``: always echo)."""

    def __init__(self, path: str | Path | None):
        super().__init__()
        self.path = Path(path) if path else None
        self._cache: tuple[float, dict] | None = None

    def _script(self) -> dict:
        if self.path is None or not self.path.exists():
            return {"scripts": [], "default": "echo"}
        mtime = self.path.stat().st_mtime
        if self._cache is None or self._cache[0] != mtime:
            self._cache = (mtime, json.loads(self.path.read_text(encoding="utf-8")))
        return self._cache[1]

    def _next_index(self, key: str) -> int:
        """How many earlier calls matched ``key`` (then counts this one), across processes."""
        state = Path(f"{self.path}.state")
        with open(state, "a+", encoding="utf-8") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            fh.seek(0)
            raw = fh.read()
            counts = json.loads(raw) if raw.strip() else {}
            n = int(counts.get(key, 0))
            counts[key] = n + 1
            fh.seek(0)
            fh.truncate()
            fh.write(json.dumps(counts))
        return n

    def _record(self, model: str, messages: list, schema_name: str) -> None:
        with open(f"{self.path}.calls.jsonl", "a", encoding="utf-8") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            fh.write(json.dumps({"model": model, "messages": [
                {"role": m.get("role"), "content": str(m.get("content") or "")}
                for m in messages], "schema": schema_name}) + "\n")

    def completion(self, model, messages, api_base, custom_prompt_dict, model_response,
                   print_verbose, encoding, api_key, logging_obj, optional_params,
                   *args, **kwargs):
        """Answer one call from the script (see the module docstring)."""
        script = self._script()
        prompt = _user_text(messages)
        fmt = (optional_params or {}).get("response_format") or {}
        schema_name = ((fmt.get("json_schema") or {}).get("name")
                       if isinstance(fmt, dict) else None) or ""
        if script.get("record") and self.path is not None:
            self._record(model, messages, schema_name)
        reply: dict | None = None
        for entry in script.get("scripts", []):
            if entry.get("match") and entry["match"] in prompt:
                replies = entry.get("replies") or [{"content": ""}]
                reply = replies[min(self._next_index(entry["match"]), len(replies) - 1)]
                break
        if reply is None:
            default = script.get("default", "echo")
            reply = ({"content": echo_reply(schema_name, prompt),
                      "delay_s": script.get("echo_delay_s", 0)}
                     if default == "echo" else {"content": ""})
        if reply.get("delay_s"):
            time.sleep(float(reply["delay_s"]))
        error = reply.get("error")
        if error == "timeout":
            raise litellm.Timeout(message="scripted timeout", model=model,
                                  llm_provider="rcll-replay")
        if error == "rate_limit":
            raise litellm.RateLimitError(message="scripted rate limit", model=model,
                                         llm_provider="rcll-replay")
        if error == "unavailable":
            raise litellm.ServiceUnavailableError(message="scripted outage", model=model,
                                                  llm_provider="rcll-replay")
        text = json.dumps(reply["json"]) if "json" in reply else str(reply.get("content", ""))
        model_response.choices[0].message.content = text
        model_response.model = f"rcll-replay/{model}"
        prompt_chars = sum(len(str(m.get("content") or "")) for m in messages)
        model_response.usage = Usage(prompt_tokens=prompt_chars // 4,
                                     completion_tokens=len(text) // 4,
                                     total_tokens=prompt_chars // 4 + len(text) // 4)
        return model_response
