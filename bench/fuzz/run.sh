#!/usr/bin/env bash
# Fuzzing campaign: every libFuzzer target (fuzz/, docs/fuzzing.md) for longer
# than the ctest run, each from its seed corpus alone, JOBS at a time.
# Prints per target: executions, exec/s, coverage (libFuzzer's cov: edges and
# ft: features), corpus size and crashes (inputs in <work>/artifacts/<target>/).
# Usage: bench/fuzz/run.sh [build dir, default build/asan] [total seconds, default 900] [jobs, default 2]
#   NICE=15 bench/fuzz/run.sh build/asan 900 2    # beside other work
# The build dir must be configured with TW_FUZZ=ON (the asan preset is).
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build/asan}
TOTAL=${2:-900}
JOBS=${3:-2}
NICE=${NICE:-0}
mapfile -t EXES < <(find "$B/fuzz" -maxdepth 1 -name '*_fuzz' -type f -perm -u+x | sort)
if [ ${#EXES[@]} -eq 0 ]; then
  echo "no fuzz targets in $B/fuzz: configure with -DTW_FUZZ=ON (clang) and build" >&2
  exit 1
fi
N=${#EXES[@]}
# Wall time is TOTAL: N targets in JOBS lanes, each target TOTAL*JOBS/N seconds (startup included).
SECS=$(( TOTAL * JOBS / N ))
[ "$SECS" -ge 5 ] || SECS=5
WORK="$B/fuzz/campaign"
LOGS="$WORK/logs"
mkdir -p "$LOGS"
echo "fuzz campaign: $N targets, ${SECS} s each, $JOBS at a time, work dir $WORK ($(date -u +%FT%TZ))"
start=$(date +%s)
printf '%s\n' "${EXES[@]}" | xargs -P "$JOBS" -I{} sh -c '
  exe={}; t=$(basename "$exe" _fuzz)
  nice -n '"$NICE"' python3 fuzz/fuzz_test.py --target "$t" --exe "$exe" --seconds '"$SECS"' --work "'"$WORK"'" \
    --source . --shared ../shared --make-seeds "'"$B"'/fuzz/make_seeds" --fresh > "'"$LOGS"'/$t.log" 2>&1 || true'
end=$(date +%s)
printf '%-20s %12s %9s %7s %8s %7s %8s\n' target execs exec/s cov ft corpus crashes
total_crashes=0
for exe in "${EXES[@]}"; do
  t=$(basename "$exe" _fuzz)
  line=$(grep -E "^fuzz $t: .* execs in" "$LOGS/$t.log" | tail -1 || true)
  if [ -z "$line" ]; then
    printf '%-20s %s\n' "$t" "no summary (see $LOGS/$t.log)"
    continue
  fi
  # "fuzz T: E execs in S s, cov C, ft F, corpus K, crashes X"
  read -r execs secs cov ft corp crashes < <(echo "$line" |
    sed -E 's/^fuzz [^:]+: ([^ ]+) execs in ([0-9]+) s, cov ([^,]+), ft ([^,]+), corpus ([^,]+), crashes ([0-9]+)$/\1 \2 \3 \4 \5 \6/')
  rate="-"
  if [[ "$execs" =~ ^[0-9]+$ ]] && [ "$secs" -gt 0 ]; then rate=$(( execs / secs )); fi
  printf '%-20s %12s %9s %7s %8s %7s %8s\n' "$t" "$execs" "$rate" "$cov" "$ft" "$corp" "$crashes"
  total_crashes=$(( total_crashes + crashes ))
done
echo "wall time $(( end - start )) s; crashes in all: $total_crashes (inputs under $WORK/artifacts/)"
