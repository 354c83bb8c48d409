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
  # headless browser for the web UI e2e test (driven by npm playwright-core);
  # the UI build itself needs Node.js >= 20.19 + npm (not Debian 12's nodejs 18)
  chromium
  # YAML for the rule-file e2e test (writes promtool unit-test files)
  python3-yaml
  # the Python client's tests: a real PyTorch model (torch_e2e_test.py),
  # `pip install ./clients/python` (pip + setuptools, no network)
  python3-torch python3-pip python3-setuptools
  # the notifier (src/notify): OpenSSL for SMTP STARTTLS and PagerDuty's dedup key;
  # its e2e test: amtool (prometheus-alertmanager), an SMTP server, a test certificate
  libssl-dev openssl prometheus-alertmanager python3-aiosmtpd
  # logs e2e test: a real shipper (imfile + omelasticsearch into trainwatch's /_bulk);
  # ripgrep: the physical baseline beside grep in bench/logs
  rsyslog rsyslog-elasticsearch ripgrep
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
