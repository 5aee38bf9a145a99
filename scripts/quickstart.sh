#!/usr/bin/env bash
# Set up, start the local stack (PostgreSQL+pgvector, Redis, Celery worker, API), ingest the
# sample corpus through the API and the worker, and print the top memories for its questions.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 LITELLM_LOCAL_MODEL_COST_MAP=True

./scripts/setup.sh
.venv/bin/rcll dev up
.venv/bin/rcll ingest rcll/samples/longmemeval/items.jsonl --bank quickstart

.venv/bin/python - <<'PY'
import json
import subprocess

for line in open("rcll/samples/longmemeval/questions.jsonl"):
    q = json.loads(line)
    print(f"\n### {q['question']}\n(reference answer: {q['answer']})")
    subprocess.run([".venv/bin/rcll", "recall", q["question"], "--bank", "quickstart",
                    "--limit", "3"], check=True)
PY
echo
echo "The stack is still running: try '.venv/bin/rcll recall \"...\" --bank quickstart';"
echo "stop it with '.venv/bin/rcll dev down'."
