#!/usr/bin/env bash
# `make run`: trainwatch serve on DATA_DIR at LISTEN, plus `trainwatch demo`:
# a simulated 4-rank training job sent through the C++ client
# (clients/cpp/trainwatch/client.h), one run after another. Ctrl-C stops both.
set -euo pipefail
BIN=${BIN:-./build/release/src/app/trainwatch}
DATA_DIR=${DATA_DIR:-data}
LISTEN=${LISTEN:-127.0.0.1:9800}

"$BIN" serve --data-dir "$DATA_DIR" --listen "$LISTEN" &
serve_pid=$!
"$BIN" demo --url "http://$LISTEN" &
demo_pid=$!
stop() { kill "$demo_pid" 2>/dev/null || true; kill -TERM "$serve_pid" 2>/dev/null || true; }
trap stop INT TERM
echo "trainwatch: http://$LISTEN (demo job pid $demo_pid; Ctrl-C stops both)"
status=0
wait "$serve_pid" || status=$?
# A second wait: the first returns early when a trapped signal arrives.
wait "$serve_pid" 2>/dev/null || true
kill "$demo_pid" 2>/dev/null || true
wait "$demo_pid" 2>/dev/null || true
exit "$status"
