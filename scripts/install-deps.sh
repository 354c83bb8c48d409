#!/usr/bin/env bash
# Installs every Debian package trainwatch needs to build, test and benchmark.
# Idempotent: packages already present are skipped; apt-get update runs only
# when something is missing. See docs/dependencies.md for why each is here.
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential g++ cmake ninja-build ccache pkg-config git
  # libraries
  libfmt-dev libspdlog-dev libcli11-dev libyaml-cpp-dev libre2-dev
  libzstd-dev libsnappy-dev libprotobuf-dev protobuf-compiler
  libsqlite3-dev libcpp-httplib-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # real peers the tests and benchmarks run beside trainwatch
  prometheus victoria-metrics
  # test tooling
  python3 curl procps
  # scrape targets for the scrape e2e test (a real exporter, a real client library)
  prometheus-node-exporter python3-prometheus-client
  # YAML for the rule-file e2e test (writes promtool unit-test files)
  python3-yaml
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
