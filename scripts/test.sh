#!/usr/bin/env bash
# Set up and run the test suite. Each run starts its own PostgreSQL+pgvector server and its
# own Redis server on free ports (state in a fresh folder under .rcll-test/) and a real Celery
# worker; nothing of the dev stack or of another test run is touched.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 LITELLM_LOCAL_MODEL_COST_MAP=True

./scripts/setup.sh
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
