#!/usr/bin/env bash
# Set up and run the test suite. The tests start their own PostgreSQL+pgvector server (port
# 54339), use Redis on 127.0.0.1:6379 db 15 (starting one if none answers) and run a real
# Celery worker; nothing of the dev stack is touched.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 LITELLM_LOCAL_MODEL_COST_MAP=True

./scripts/setup.sh
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
