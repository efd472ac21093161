#!/usr/bin/env bash
# Produce throughput with tracing off, metrics only, sampled at 1% and at
# 100%, all on the binary built from this tree, plus a baseline binary
# built from a commit without the telemetry hooks (default: none; pass a
# commit as $1, e.g. `bash bench/otel/run.sh 6391b7a`).
#
#   REGENT_OTEL_BENCH_RECORDS=200000 REGENT_OTEL_BENCH_ROUNDS=5 bash bench/otel/run.sh [commit]
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ $# -ge 1 ]; then
  src=$(mktemp -d)
  git archive "$1" | tar -x -C "$src"
  (cd "$src" && go build -o "$src/regent-baseline" ./cmd/regent)
  export REGENT_OTEL_BENCH_BASELINE="$src/regent-baseline"
  echo "baseline: $1 -> $REGENT_OTEL_BENCH_BASELINE"
fi
REGENT_OTEL_BENCH=1 go test -count=1 -timeout 60m -v -run '^TestProduceOverhead$' ./bench/otel
