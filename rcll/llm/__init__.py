"""LLM access: one client (:mod:`rcll.llm.client`) that always calls ``litellm.completion``.

Providers (``RCLL_LLM_PROVIDER``): ``none`` (chunk mode, no client), ``litellm`` (any litellm
model string, or an OpenAI-compatible server via ``RCLL_LLM_API_BASE``), ``offline`` (a GGUF
file run in-process by llama-cpp-python, registered as the litellm custom provider
``rcll-offline``, :mod:`rcll.llm.offline`). The test and demo stand-in is the litellm custom
provider ``rcll-replay`` (:mod:`rcll.llm.replay`). Prompts live in :mod:`rcll.llm.prompts`,
one versioned module per prompt, beside their reply schema.
"""

from __future__ import annotations

import os

# litellm fetches its price map over the network at import unless told to use its local copy.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
