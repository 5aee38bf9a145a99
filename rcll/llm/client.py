"""The one LLM client: ``complete_json(messages, schema)`` through ``litellm.completion``.

Every call passes the reply's JSON schema (``response_format`` = the pydantic model; litellm
turns it into a ``json_schema`` response format and drops it where a provider does not take
it), a per-call ``timeout`` and ``api_base``. Bounded retries with exponential backoff
(``backoff_s * 2**attempt``) on timeouts, rate limits, an unreachable or failing provider
(litellm's exception classes) and on a reply that is not valid JSON for the schema (the next
attempt is told what was wrong). Usage and cost are litellm's (``response.usage``; cost from
``_hidden_params["response_cost"]`` or :func:`litellm.completion_cost`, 0 when litellm has no
price for the model).

Every attempt is also one row of the LLM request log when the client has one
(:mod:`rcll.llm.request_log`: off the caller's path; a failure to log never fails the call):
the caller's :class:`~rcll.llm.request_log.CallInfo` (bank, operation, step, run, document),
provider, model, outcome, tokens, cost and latency.

Errors: :class:`LLMReplyInvalid` (the last raw reply, after retries), :class:`LLMUnavailable`
(provider unreachable, timing out or rate limiting after retries), :class:`LLMError` (any
other refusal: bad request, authentication, unknown model).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pydantic import BaseModel, ValidationError

import rcll.llm  # noqa: F401  (sets LITELLM_LOCAL_MODEL_COST_MAP before litellm loads)
from rcll.config import Settings
from rcll.llm.request_log import CallInfo
from rcll.telemetry import metrics

log = logging.getLogger(__name__)
REPLAY_PREFIX = "rcll-replay/"
OFFLINE_PREFIX = "rcll-offline/"
RAW_REPLY_KEEP = 8000  # characters of an invalid reply kept for diagnosis


class LLMError(Exception):
    """An LLM call failed for a reason retries do not fix (bad request, auth, unknown model)."""

    def __init__(self, message: str, usage: LLMUsage | None = None):
        super().__init__(message)
        self.usage = usage or LLMUsage()


class LLMUnavailable(LLMError):
    """The provider stayed unreachable, timing out or rate limiting through every retry."""


class LLMReplyInvalid(LLMError):
    """The reply stayed invalid (not JSON, or not the schema) through every retry.
    ``raw_reply`` is the last reply's text (at most :data:`RAW_REPLY_KEEP` characters)."""

    def __init__(self, message: str, raw_reply: str, usage: LLMUsage | None = None):
        super().__init__(message, usage)
        self.raw_reply = raw_reply[:RAW_REPLY_KEEP]


@dataclass
class LLMUsage:
    """Token and cost totals over one or more calls: ``cost_usd`` in US dollars (0 when the
    model has no known price), ``calls`` made, ``retries`` among them."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    calls: int = 0
    retries: int = 0

    def add(self, other: LLMUsage) -> None:
        """Add ``other``'s totals to these."""
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cost_usd += other.cost_usd
        self.calls += other.calls
        self.retries += other.retries

    def as_dict(self) -> dict:
        """The totals as JSON-ready values (cost rounded to 1e-8 USD)."""
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "cost_usd": round(self.cost_usd, 8), "calls": self.calls, "retries": self.retries}


@dataclass
class LLMResult:
    """A validated reply: ``parsed`` (an instance of the schema), ``raw_text``, ``usage``."""

    parsed: BaseModel
    raw_text: str
    usage: LLMUsage = field(default_factory=LLMUsage)


@dataclass(frozen=True)
class LLMConfig:
    """What a call needs, from :class:`~rcll.config.Settings` (``RCLL_LLM_*``)."""

    provider: str
    model: str
    api_base: str | None = None
    model_path: Path | None = None
    timeout_s: float = 60.0
    max_retries: int = 3
    backoff_s: float = 1.0
    temperature: float = 0.0
    max_tokens: int = 2048
    input_cost_per_token: float | None = None
    output_cost_per_token: float | None = None
    replay_path: Path | None = None
    health_ttl_s: float = 60.0

    @classmethod
    def from_settings(cls, s: Settings) -> LLMConfig:
        """The config of ``s``; ``offline`` uses the model string ``rcll-offline/<file stem>``."""
        model = s.llm_model
        if s.llm_provider == "offline":
            stem = Path(s.llm_model_path).stem if s.llm_model_path else "model"
            model = model if model.startswith(OFFLINE_PREFIX) else f"{OFFLINE_PREFIX}{stem}"
        return cls(provider=s.llm_provider, model=model, api_base=s.llm_api_base,
                   model_path=s.llm_model_path, timeout_s=s.llm_timeout_s,
                   max_retries=s.llm_max_retries, backoff_s=s.llm_backoff_s,
                   temperature=s.llm_temperature, max_tokens=s.llm_max_tokens,
                   input_cost_per_token=s.llm_input_cost_per_token,
                   output_cost_per_token=s.llm_output_cost_per_token,
                   replay_path=s.llm_replay_path, health_ttl_s=s.llm_health_ttl_s)


_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.S)


def _unfence(text: str) -> str:
    """The reply without a surrounding Markdown code fence (models add one often)."""
    m = _FENCE.match(text)
    return m.group(1) if m else text


def _transient_errors() -> tuple[type[BaseException], ...]:
    import litellm

    return (litellm.Timeout, litellm.RateLimitError, litellm.APIConnectionError,
            litellm.ServiceUnavailableError, litellm.InternalServerError)


class LLMClient:
    """Calls the configured model. Thread-safe; one per process (:mod:`rcll.bootstrap`).
    Registers the custom providers it needs (``rcll-replay``, ``rcll-offline``) with litellm."""

    def __init__(self, config: LLMConfig, sleep=time.sleep, request_log=None):
        if config.provider == "none":
            raise ValueError("chunk mode (llm_provider=none) has no LLM client")
        if not config.model:
            raise ValueError("RCLL_LLM_MODEL is empty")
        self.config = config
        self._sleep = sleep
        self.request_log = request_log  # rcll.llm.request_log.RequestLog, or None
        self.provider_name = _provider_name(config)
        self._health: tuple[float, dict] | None = None
        self._health_lock = threading.Lock()
        _register_providers(config)

    @property
    def model(self) -> str:
        """The litellm model string calls use (stored on closets as ``model``)."""
        return self.config.model

    def _call(self, messages: list[dict], schema: type[BaseModel], max_tokens: int | None):
        import litellm

        c = self.config
        kwargs: dict = {"model": c.model, "messages": messages, "response_format": schema,
                        "timeout": c.timeout_s, "temperature": c.temperature,
                        "max_tokens": max_tokens or c.max_tokens, "num_retries": 0,
                        "drop_params": True}
        if c.api_base:
            kwargs["api_base"] = c.api_base
        if c.input_cost_per_token is not None:
            kwargs["input_cost_per_token"] = c.input_cost_per_token
        if c.output_cost_per_token is not None:
            kwargs["output_cost_per_token"] = c.output_cost_per_token
        return litellm.completion(**kwargs)

    @staticmethod
    def _usage_of(resp) -> LLMUsage:
        import litellm

        u = getattr(resp, "usage", None)
        cost = (getattr(resp, "_hidden_params", None) or {}).get("response_cost")
        if cost is None:
            try:
                cost = litellm.completion_cost(completion_response=resp)
            except Exception:  # no price for this model: unknown cost counts 0
                cost = 0.0
        return LLMUsage(prompt_tokens=int(getattr(u, "prompt_tokens", 0) or 0),
                        completion_tokens=int(getattr(u, "completion_tokens", 0) or 0),
                        cost_usd=float(cost or 0.0), calls=1)

    def _log(self, call: CallInfo | None, attempt: int, outcome: str, started: datetime,
             seconds: float, usage: LLMUsage | None = None, error: str | None = None) -> None:
        """One row of the request log for one attempt (nothing without a log; never
        raises)."""
        if self.request_log is None:
            return
        try:
            c = call or CallInfo()
            u = usage or LLMUsage()
            self.request_log.record({
                "bank_id": c.bank_id, "operation": c.operation, "scope": c.scope,
                "trace_id": c.trace_id, "document_id": c.document_id,
                "provider": self.provider_name, "model": self.model,
                "status": "success" if outcome == "ok" else "error", "outcome": outcome,
                "attempt": attempt, "started_at": started,
                "ended_at": started + timedelta(seconds=seconds),
                "duration_ms": int(round(seconds * 1000)),
                "input_tokens": u.prompt_tokens, "output_tokens": u.completion_tokens,
                "cost_usd": u.cost_usd, "error": error})
        except Exception:  # the log must never fail the call it describes
            log.warning("LLM request log entry not made", exc_info=True)

    def complete_json(self, messages: list[dict], schema: type[BaseModel],
                      max_tokens: int | None = None, call: CallInfo | None = None) -> LLMResult:
        """One validated reply of type ``schema`` to ``messages`` (OpenAI chat format);
        ``call`` says what it is for (the request log's bank, operation, step, run).

        Up to ``1 + max_retries`` calls. Raises :class:`LLMReplyInvalid` (with the raw reply),
        :class:`LLMUnavailable` or :class:`LLMError`; each carries the usage spent."""
        usage = LLMUsage()
        msgs = list(messages)
        last_raw, last_problem, last_invalid = "", "", False
        attempts = self.config.max_retries + 1
        for attempt in range(attempts):
            if attempt:
                usage.retries += 1
                self._sleep(self.config.backoff_s * 2 ** (attempt - 1))
            t_call = time.perf_counter()
            started = datetime.now(UTC)
            try:
                resp = self._call(msgs, schema, max_tokens)
            except _transient_errors() as exc:
                usage.calls += 1
                took = time.perf_counter() - t_call
                metrics.llm_call(self.model, "transient_error", took, error=type(exc).__name__)
                last_problem, last_invalid = f"{type(exc).__name__}: {exc}", False
                self._log(call, attempt + 1, "transient_error", started, took,
                          error=last_problem)
                log.warning("LLM call %d/%d failed: %s", attempt + 1, attempts, last_problem)
                continue
            except Exception as exc:  # bad request, auth, unknown model or provider: no retry
                usage.calls += 1
                took = time.perf_counter() - t_call
                metrics.llm_call(self.model, "error", took, error=type(exc).__name__)
                self._log(call, attempt + 1, "error", started, took,
                          error=f"{type(exc).__name__}: {exc}")
                raise LLMError(f"LLM call refused: {type(exc).__name__}: {exc}", usage) from exc
            call_usage = self._usage_of(resp)
            usage.add(call_usage)
            raw = (resp.choices[0].message.content or "") if resp.choices else ""
            try:
                if not raw.strip():
                    raise ValueError("empty reply")
                parsed = schema.model_validate_json(_unfence(raw))
            except (ValidationError, ValueError) as exc:
                took = time.perf_counter() - t_call
                metrics.llm_call(self.model, "invalid_reply", took,
                                 call_usage.prompt_tokens, call_usage.completion_tokens,
                                 call_usage.cost_usd, error="invalid_reply")
                last_raw, last_problem, last_invalid = raw, _describe(exc), True
                self._log(call, attempt + 1, "invalid_reply", started, took, call_usage,
                          error=last_problem)
                log.warning("LLM reply %d/%d invalid: %s", attempt + 1, attempts, last_problem)
                msgs = [*messages, {"role": "assistant", "content": raw[:2000]},
                        {"role": "user", "content": "That reply was invalid: "
                         f"{last_problem[:500]}. Reply again with only a JSON object that "
                         "matches the schema."}]
                continue
            took = time.perf_counter() - t_call
            metrics.llm_call(self.model, "ok", took, call_usage.prompt_tokens,
                             call_usage.completion_tokens, call_usage.cost_usd)
            self._log(call, attempt + 1, "ok", started, took, call_usage)
            return LLMResult(parsed=parsed, raw_text=raw, usage=usage)
        if last_invalid:
            raise LLMReplyInvalid(f"invalid reply after {attempts} attempts: {last_problem}",
                                  last_raw, usage)
        raise LLMUnavailable(f"LLM provider unavailable after {attempts} attempts: "
                             f"{last_problem}", usage)

    def health(self) -> dict:
        """``{"provider", "model", "ok", "error"?}`` for ``/readyz``, cached ``health_ttl_s``.
        Never calls the model: offline checks the GGUF file; the replay stand-in its file;
        an ``api_base`` is asked ``GET /models`` (2 s); a hosted model that litellm knows
        needs its key variables set (:func:`litellm.validate_environment`)."""
        with self._health_lock:
            now = time.monotonic()
            if self._health and now - self._health[0] < self.config.health_ttl_s:
                return self._health[1]
            out = {"provider": self.config.provider, "model": self.config.model}
            error = _probe(self.config)
            out["ok"] = error is None
            if error:
                out["error"] = error
            self._health = (now, out)
            return out


def _provider_name(c: LLMConfig) -> str:
    """The provider a call goes to, as litellm names it (``openai``, ``hosted_vllm``, the
    custom ``rcll-replay`` / ``rcll-offline``); the model string's prefix when litellm
    does not know it."""
    if c.model.startswith(REPLAY_PREFIX):
        return "rcll-replay"
    if c.model.startswith(OFFLINE_PREFIX):
        return "rcll-offline"
    try:
        import litellm

        return litellm.get_llm_provider(c.model, api_base=c.api_base)[1]
    except Exception:  # a model string litellm cannot place
        return c.model.split("/", 1)[0] if "/" in c.model else c.provider


def _describe(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        errs = exc.errors(include_url=False, include_input=False)[:3]
        return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'reply'}: {e['msg']}"
                         for e in errs) or "invalid reply"
    return f"invalid reply: {exc}"


def _probe(c: LLMConfig) -> str | None:
    """Why the configured model cannot be used, or ``None``."""
    if c.model.startswith(OFFLINE_PREFIX):
        if not c.model_path or not Path(c.model_path).is_file():
            return f"GGUF model file not found: {c.model_path}"
        try:
            import llama_cpp  # noqa: F401
        except ImportError:
            return "llama-cpp-python is not installed (pip install -e '.[offline]')"
        return None
    if c.model.startswith(REPLAY_PREFIX):
        if c.replay_path and not Path(c.replay_path).is_file():
            return f"replay file not found: {c.replay_path}"
        return None
    if c.api_base:
        import httpx

        try:
            r = httpx.get(c.api_base.rstrip("/") + "/models", timeout=2)
            return None if r.status_code < 500 else f"GET /models answered {r.status_code}"
        except httpx.HTTPError as exc:
            return f"unreachable: {type(exc).__name__}"
    try:
        import litellm

        env = litellm.validate_environment(model=c.model)
    except Exception as exc:
        return f"unknown model: {type(exc).__name__}"
    if not env.get("keys_in_environment", True):
        return "missing key variables: " + ", ".join(env.get("missing_keys") or [])
    return None


_registered: dict[str, str] = {}  # provider name -> the file its handler serves
_register_lock = threading.Lock()


def _register_providers(c: LLMConfig) -> None:
    """Put the custom provider ``c.model`` needs in ``litellm.custom_provider_map`` (again
    only when its file changed: one handler per provider name per process)."""
    import litellm

    with _register_lock:
        if c.model.startswith(REPLAY_PREFIX):
            from rcll.llm.replay import ReplayLLM

            name, key, make = "rcll-replay", str(c.replay_path), lambda: ReplayLLM(c.replay_path)
        elif c.model.startswith(OFFLINE_PREFIX):
            from rcll.llm.offline import OfflineLLM

            name, key, make = "rcll-offline", str(c.model_path), lambda: OfflineLLM(c.model_path)
        else:
            return
        if _registered.get(name) == key:
            return
        litellm.custom_provider_map = [
            *[p for p in litellm.custom_provider_map if p["provider"] != name],
            {"provider": name, "custom_handler": make()}]
        from litellm.utils import custom_llm_setup

        custom_llm_setup()
        _registered[name] = key
