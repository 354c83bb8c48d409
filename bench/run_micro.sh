#!/usr/bin/env bash
# Runs the storage micro-benchmarks whose figures docs/performance.md quotes.
# Usage: bench/run_micro.sh [build dir, default build/release]
# For the workload-based chunk figures, first generate the data:
#   python3 src/tsdb/chunkenc/testdata_gen.py /tmp/chunkenc/workload.bin
set -euo pipefail
B=${1:-build/release}
run() { echo "== $*"; "$@" --benchmark_counters_tabular=true 2>&1 | grep -vE "^(Running|Run on|CPU Caches|  L[123]|Load Average|\*\*\*)"; }
run "$B/src/tsdb/tsdb_bench"
run "$B/src/tsdb/chunkenc/chunkenc_bench" --benchmark_filter='BM_(Encode|Decode)/(xor|dense|xor_iter|dense_iter)/'
if [ -f "${CHUNKENC_DATA:-/tmp/chunkenc/workload.bin}" ]; then
  CHUNKENC_DATA=${CHUNKENC_DATA:-/tmp/chunkenc/workload.bin} run "$B/src/tsdb/chunkenc/chunkenc_bench" --benchmark_filter='BM_Workload(Report|Encode|Decode)'
fi
run "$B/src/tsdb/wal/wal_bench" --benchmark_filter='BM_(Encode|Decode)Samples|BM_LogSamplesRecord'
run "$B/src/tsdb/index/index_bench" --benchmark_filter='BM_(Intersect|IndexBuild100k/3|PostingsForMatchers)'
run "$B/src/ingest/ingest_bench"
run "$B/src/promql/promql_bench" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
