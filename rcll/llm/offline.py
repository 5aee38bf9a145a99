"""``RCLL_LLM_PROVIDER=offline``: a GGUF model run in-process by llama-cpp-python, behind
the litellm custom provider ``rcll-offline`` so callers see the same ``litellm.completion``.

Install the optional extra: ``pip install -e ".[offline]"``; point ``RCLL_LLM_MODEL_PATH``
at a ``.gguf`` file. The model loads on the first call (``from llama_cpp import Llama``,
imported lazily), once per process, and calls are serialised by a lock (one llama.cpp
context is not thread-safe). The reply schema is enforced by llama.cpp's JSON-schema
grammar (``response_format={"type": "json_object", "schema": ...}``).
"""

from __future__ import annotations

import threading
from pathlib import Path

import litellm
from litellm import CustomLLM
from litellm.types.utils import Usage

# llama.cpp unrolls these bounds into grammar repetitions that exceed its limits (a 2000-char
# string is 2000 nested rules); the reply is validated against the full schema afterwards.
_UNROLLED_BOUNDS = ("maxLength", "minLength", "maxItems", "minItems")


def grammar_schema(schema):
    """``schema`` without length and item-count bounds (see :data:`_UNROLLED_BOUNDS`)."""
    if isinstance(schema, dict):
        return {k: grammar_schema(v) for k, v in schema.items() if k not in _UNROLLED_BOUNDS}
    if isinstance(schema, list):
        return [grammar_schema(v) for v in schema]
    return schema


class OfflineLLM(CustomLLM):
    """litellm custom provider around ``llama_cpp.Llama(model_path)``."""

    def __init__(self, model_path: str | Path | None, n_ctx: int = 4096):
        super().__init__()
        self.model_path = Path(model_path) if model_path else None
        self.n_ctx = n_ctx
        self._llama = None
        self._lock = threading.Lock()

    def _load(self):
        if self._llama is None:
            if self.model_path is None or not self.model_path.is_file():
                raise litellm.APIConnectionError(
                    message=f"GGUF model file not found: {self.model_path}",
                    llm_provider="rcll-offline", model=str(self.model_path))
            from llama_cpp import Llama  # optional extra "offline"

            self._llama = Llama(model_path=str(self.model_path), n_ctx=self.n_ctx, verbose=False)
        return self._llama

    def completion(self, model, messages, api_base, custom_prompt_dict, model_response,
                   print_verbose, encoding, api_key, logging_obj, optional_params,
                   *args, **kwargs):
        """Run the chat completion locally; the reply schema becomes a JSON grammar."""
        params = optional_params or {}
        fmt = params.get("response_format")
        response_format = None
        if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
            response_format = {"type": "json_object", "schema": grammar_schema(
                (fmt.get("json_schema") or {}).get("schema"))}
        with self._lock:
            llama = self._load()
            out = llama.create_chat_completion(
                messages=messages, response_format=response_format,
                temperature=float(params.get("temperature", 0.0)),
                max_tokens=int(params.get("max_tokens", 1024)))
        model_response.choices[0].message.content = out["choices"][0]["message"]["content"]
        model_response.model = f"rcll-offline/{model}"
        u = out.get("usage") or {}
        model_response.usage = Usage(prompt_tokens=u.get("prompt_tokens", 0),
                                     completion_tokens=u.get("completion_tokens", 0),
                                     total_tokens=u.get("total_tokens", 0))
        return model_response
