#!/usr/bin/env bash
# Create .venv and install RCLL with its dependencies (idempotent; fast when nothing changed).
# The CPU build of torch goes in first, so sentence-transformers never pulls a CUDA build.
# RCLL_TORCH_INDEX_URL: an extra index of CPU torch wheels (default PyTorch's CPU index,
# https://download.pytorch.org/whl/cpu, used when it answers; set it to a mirror, or to ""
# to use only pip's own configuration, e.g. a local wheel folder). Whatever pip would pick,
# setup refuses a torch that brings CUDA libraries, before downloading it.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for cand in python3.11 python3; do
    if command -v "$cand" >/dev/null 2>&1; then PY=$cand; break; fi
  done
fi
[ -n "$PY" ] || { echo "setup: python 3.11+ not found" >&2; exit 1; }

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $($PY --version)"
  "$PY" -m venv .venv
fi
stamp=.venv/.rcll-installed
want=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
echo "setup: installing dependencies into .venv (first run takes a few minutes)"
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python scripts/install_torch.py
.venv/bin/python -m pip install --quiet -e ".[dev,docs]"  # docs: the site's build test
# tests/web drives Debian's Chromium through Playwright (never `playwright install`): install
# it when missing, as root with apt; never fails the setup (the web tests skip without it).
if [ ! -x /usr/bin/chromium ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "setup: installing chromium for tests/web (apt)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } \
    >/dev/null 2>&1 || echo "setup: chromium not installed; tests/web will skip" >&2
fi
echo "$want" > "$stamp"
echo "setup: done"
