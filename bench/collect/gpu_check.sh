#!/bin/sh
# On a machine with NVIDIA GPUs: the GPU collector's output beside nvidia-smi,
# for docs/performance.md. Writes both to $OUT (default: current directory).
#   bench/collect/gpu_check.sh build/release/bench/collect_bench
set -eu
BENCH=$1
OUT=${OUT:-.}
nvidia-smi --query-gpu=index,uuid,pci.bus_id,name,driver_version,utilization.gpu,utilization.memory,memory.used,memory.free,memory.total,memory.reserved,temperature.gpu,temperature.memory,power.draw,clocks.sm,clocks.mem,clocks_event_reasons.active \
  --format=csv > "$OUT/nvidia-smi.csv" 2>&1 || true
"$BENCH" --nvml libnvidia-ml.so.1 --print 1 > "$OUT/collector.txt" 2>&1
"$BENCH" --nvml libnvidia-ml.so.1 --cycles 30 --interval-ms 1000 > "$OUT/collector-cost.json" 2>&1 || true
cat "$OUT/nvidia-smi.csv"
grep -v '^#' "$OUT/collector.txt" | head -80
cat "$OUT/collector-cost.json"
