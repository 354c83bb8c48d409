#!/usr/bin/env bash
# `make run`: trainwatch serve on DATA_DIR at LISTEN, plus `trainwatch demo`:
# a simulated 4-rank training job sent through the C++ client
# (clients/cpp/trainwatch/client.h), one run after another. Ctrl-C stops both.
set -euo pipefail
BIN=${BIN:-./build/release/src/app/trainwatch}
DATA_DIR=${DATA_DIR:-data}
LISTEN=${LISTEN:-127.0.0.1:9800}

# No GPU here (no libnvidia-ml.so.1): the demo simulates one per rank through
# the fake NVML library the tests use, read by serve's real GPU collector.
FAKE_NVML_LIB=${FAKE_NVML_LIB:-./build/release/src/collect/libnvidia-ml-fake.so}
serve_args=()
demo_args=()
if ! { ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null; } | grep -q 'libnvidia-ml\.so\.1' && [ -f "$FAKE_NVML_LIB" ]; then
  export FAKE_NVML_CONFIG="${TMPDIR:-/tmp}/trainwatch-demo-gpus-$$.txt"
  serve_args=(--collect.nvml-path "$FAKE_NVML_LIB")
  demo_args=(--fake-gpus "$FAKE_NVML_CONFIG")
  echo "trainwatch: no NVIDIA driver here; the demo simulates its GPUs ($FAKE_NVML_CONFIG)"
fi

"$BIN" demo --url "http://$LISTEN" "${demo_args[@]}" &
demo_pid=$!
# The simulated GPUs' file exists before the collector opens the library.
if [ -n "${FAKE_NVML_CONFIG:-}" ]; then
  for _ in $(seq 50); do [ -f "$FAKE_NVML_CONFIG" ] && break; sleep 0.1; done
fi
"$BIN" serve --data-dir "$DATA_DIR" --listen "$LISTEN" "${serve_args[@]}" &
serve_pid=$!
stop() { kill "$demo_pid" 2>/dev/null || true; kill -TERM "$serve_pid" 2>/dev/null || true; }
trap 'rm -f "${FAKE_NVML_CONFIG:-}" "${FAKE_NVML_CONFIG:-}.tmp"' EXIT
trap stop INT TERM
echo "trainwatch: http://$LISTEN (demo job pid $demo_pid; Ctrl-C stops both)"
status=0
wait "$serve_pid" || status=$?
# A second wait: the first returns early when a trapped signal arrives.
wait "$serve_pid" 2>/dev/null || true
kill "$demo_pid" 2>/dev/null || true
wait "$demo_pid" 2>/dev/null || true
exit "$status"
