#!/usr/bin/env bash
# One large document through `rcll ingest` on an idle dev stack, the worker's spare cores on
# and off in turn (RCLL_WORKER_SPARE_CORES; rcll.models.cores; decision 0024), ROUNDS rounds:
#
#   cd <checkout> && benchmarks/ingest_one_document.sh [FILE] [ROUNDS]
#
# FILE defaults to /usr/share/doc/nodejs/api/stream.md. Each run starts its own stack (state in
# .rcll-bench/one-document, ports 54395 / 6430 / 8795), ingests a small warm-up file, then FILE
# into a fresh bank, and prints the wall seconds of the `rcll ingest` command beside its
# closing line and how many embedding passes ran on a lent core (the worker log's line).
set -euo pipefail
cd "$(dirname "$0")/.."
FILE=${1:-/usr/share/doc/nodejs/api/stream.md}
ROUNDS=${2:-2}
export HF_HUB_OFFLINE=1 LITELLM_LOCAL_MODEL_COST_MAP=True
export RCLL_STATE_DIR=.rcll-bench/one-document RCLL_PG_PORT=54395
export RCLL_REDIS_URL=redis://127.0.0.1:6430/0 RCLL_API_PORT=8795 RCLL_MCP_PORT=8796
export RCLL_METRICS_PORT=0 RCLL_API_URL=http://127.0.0.1:8795
WARM=/usr/share/doc/nodejs/README.md
for round in $(seq 1 "$ROUNDS"); do
  for spare in true false; do
    RCLL_WORKER_SPARE_CORES=$spare .venv/bin/rcll dev up > /dev/null 2>&1
    .venv/bin/rcll ingest "$WARM" --bank "warm-$spare-$round" > /dev/null 2>&1 || true
    sleep 2
    t0=$(date +%s.%N)
    out=$(.venv/bin/rcll ingest "$FILE" --bank "one-$spare-$round" 2>&1 | tail -1)
    t1=$(date +%s.%N)
    passes=$(grep "passes on borrowed cores" "$RCLL_STATE_DIR/run/worker.log" | tail -1 \
             | grep -o "[0-9]* vectors, [0-9]* passes on borrowed cores" || echo "no embed line")
    printf 'spare_cores=%-5s round %s: %.1f s  %s  (%s)\n' "$spare" "$round" \
      "$(echo "$t1 - $t0" | bc)" "$out" "$passes"
    .venv/bin/rcll dev down > /dev/null 2>&1
  done
done
