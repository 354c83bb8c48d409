#!/usr/bin/env bash
# Installs every Debian package trainwatch needs to build, test and benchmark.
# Idempotent: packages already present are skipped; apt-get update runs only
# when something is missing. Node.js + npm (the web UI's build) come from
# Debian (nodejs 18, npm 9) unless a node >= 18.19 and an npm are already on
# PATH (e.g. NodeSource's nodejs, which bundles npm and conflicts with Debian's
# npm package: it is kept). See docs/dependencies.md for why each is here.
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential g++ cmake ninja-build ccache pkg-config git
  # the asan preset's compiler: clang 14 builds ASan + UBSan and the libFuzzer
  # targets (fuzz/, docs/fuzzing.md); libclang-rt-14-dev has libclang_rt.fuzzer
  clang-14 libclang-rt-14-dev
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
  # the UI build's Node.js >= 18.19 + npm: see NODE_PACKAGES below
  chromium
  # YAML for the rule-file e2e test (writes promtool unit-test files)
  python3-yaml
  # the Python client's tests: a real PyTorch model (torch_e2e_test.py),
  # `pip install ./clients/python` (pip + setuptools, no network)
  python3-torch python3-pip python3-setuptools
  # the notifier (src/notify): OpenSSL for SMTP STARTTLS and PagerDuty's dedup key;
  # its e2e test: amtool (prometheus-alertmanager), an SMTP server, a test certificate.
  # --web.config.file (src/http): OpenSSL for the TLS server, libxcrypt (crypt.h) for bcrypt
  libssl-dev openssl prometheus-alertmanager python3-aiosmtpd libcrypt-dev
  # logs e2e test: a real shipper (imfile + omelasticsearch into trainwatch's /_bulk);
  # ripgrep: the physical baseline beside grep in bench/logs
  rsyslog rsyslog-elasticsearch ripgrep
  # the soak benchmark's plots (bench/soak/plot.py)
  python3-matplotlib
)

# The web UI's build (web/CMakeLists.txt): node >= 18.19 and npm on PATH.
# Judged by what is on PATH, not by dpkg: dpkg may list a NodeSource nodejs.
NODE_PACKAGES=(nodejs npm)
node_ok() {
  command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || return 1
  local v
  v=$(node --version 2>/dev/null) || return 1
  dpkg --compare-versions "${v#v}" ge 18.19
}

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ! node_ok; then
  # Listed even when dpkg has them: apt-get install then upgrades an older nodejs.
  missing+=("${NODE_PACKAGES[@]}")
fi

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
hash -r
if ! node_ok; then
  echo "install-deps: warning: still no node >= 18.19 with npm on PATH (node: $(command -v node || echo none)" \
       "$(node --version 2>/dev/null || echo -), npm: $(command -v npm || echo none)); the web UI build needs them" >&2
fi
