#!/usr/bin/env bash
# Installs, from Debian's packages only, whatever fencecheck needs to build, test and run that is
# not on this machine yet. Idempotent: when everything is present it does nothing and says so.
# Needs root (or sudo) only when something is missing.
set -euo pipefail

# Groups of Debian packages (no group named: every group, what scripts/test.sh needs).
usage() {
  cat >&2 <<'USAGE'
usage: scripts/install-deps.sh [GROUP|PACKAGE ...]
  (none)     every group below: what scripts/test.sh needs
  core       build fencecheck, fencecheck-worker and fencecheck-store, and run the smoke suite
             (embedded etcd, the reference store): what scripts/quickstart.sh installs
  tests      the test suite's own tools: GoogleTest, Google Benchmark, clang's sanitizers and
             libFuzzer, chromium (report.html), xmllint, prometheus + pushgateway, faketime
  postgres   the postgres resource kind's embedded server (postgresql-15)
  zookeeper  the zookeeper lock-service kind's embedded server
  redis      the redis lock-service kind's embedded server
  examples   the example workers: Go with Debian's etcd and pgx sources, python3-etcd3, kazoo,
             redis-py, psycopg2 (run scenarios/examples; they need postgres, zookeeper, redis too),
             and the node group
  node       the Node.js example worker (workers/examples/redlock-node, scenarios/redlock): Debian's
             nodejs and npm when `node` or `npm` is missing, then `npm ci` of the example's
             package-lock.json (node-redlock, ioredis) from the npm registry into its node_modules
  PACKAGE    any other word is a Debian package name, installed as it is
USAGE
}
# core: the compiler and every library the three programs link (each lock-service and resource
# kind is compiled in, so their client libraries are here too), and etcd for the smoke suite.
CORE_PKGS=(g++ cmake ninja-build pkg-config
  libboost1.81-dev libboost-filesystem1.81-dev libspdlog-dev libyaml-cpp-dev prometheus-cpp-dev
  libcpp-httplib-dev nlohmann-json3-dev libcli11-dev libpugixml-dev libpq-dev
  libzookeeper-mt-dev libhiredis-dev  # the zookeeper and redis lock clients of the reference worker
  libzstd-dev  # history.jsonl.zst: a long run's history compressed at its end
  libsimdjson-dev  # event_from_json_line (workers/proto): history and worker lines, simdjson ondemand (issue 16)
  etcd-server etcd-client iproute2 procps psmisc curl util-linux python3)
TESTS_PKGS=(libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev  # scripts/test.sh's sanitizer build and the libFuzzer targets (scripts/fuzz.sh): clang-14, its ASan/UBSan and libFuzzer runtimes
  faketime prometheus prometheus-pushgateway libxml2-utils
  chromium fonts-dejavu-core)  # chromium: the report test opens report.html headless; xmllint: junit.xml schema test
POSTGRES_PKGS=(postgresql-15)  # the postgres resource kind's embedded server (initdb, postgres; setpriv to drop root)
ZOOKEEPER_PKGS=(zookeeper)     # started by the harness, never as the machine's service
REDIS_PKGS=(redis-server)      # likewise
# The Go example worker (workers/examples/go-etcd-mutex), built offline against Debian's Go
# sources, and the Python example workers' client libraries.
EXAMPLES_PKGS=(golang-go golang-etcd-server-dev golang-github-jackc-pgx-v4-dev golang-golang-x-sys-dev
  python3-etcd3 python3-kazoo python3-redis python3-psycopg2)

wanted=()
want_node=0
if [ $# -eq 0 ]; then set -- core tests postgres zookeeper redis examples; fi
for g in "$@"; do
  case "$g" in
    core) wanted+=("${CORE_PKGS[@]}") ;;
    tests) wanted+=("${TESTS_PKGS[@]}") ;;
    postgres) wanted+=("${POSTGRES_PKGS[@]}") ;;
    zookeeper) wanted+=("${ZOOKEEPER_PKGS[@]}") ;;
    redis) wanted+=("${REDIS_PKGS[@]}") ;;
    examples) wanted+=("${EXAMPLES_PKGS[@]}"); want_node=1 ;;
    node) want_node=1 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "install-deps: unknown option $g" >&2; usage; exit 2 ;;
    *) wanted+=("$g") ;;
  esac
done

# Node.js as installed (any node >= 18 with its npm, e.g. NodeSource's, which bundles npm), else
# Debian's nodejs and npm: asking for Debian's npm beside NodeSource's nodejs would conflict.
if [ "$want_node" = 1 ] && ! { command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; }; then
  wanted+=(nodejs npm)
fi

# The Node.js example's own packages, from the npm registry at the versions its committed
# package-lock.json names (`npm ci`: exactly those, no lock file rewritten), into its own
# node_modules (ignored by git). Nothing is downloaded at build time.
node_example() {
  local dir
  dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/workers/examples/redlock-node"
  if [ -d "$dir/node_modules/redlock" ] && [ -d "$dir/node_modules/ioredis" ] &&
     [ "$dir/node_modules/.package-lock.json" -nt "$dir/package-lock.json" ]; then
    echo "install-deps: $dir/node_modules is up to date"
    return 0
  fi
  echo "install-deps: npm ci in $dir (node-redlock, ioredis from the npm registry)"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
}

missing=()
for p in "${wanted[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: every package of $* is installed"
  if [ "$want_node" = 1 ]; then node_example; fi
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
    echo "install-deps: missing packages (${missing[*]}) and not root: run as root or install them" >&2
    exit 1
  fi
fi
# PostgreSQL's server package would create and start the machine's own cluster ("15 main"): the
# harness runs its own clusters, never the machine's, so say no to that before installing.
if [[ " ${missing[*]} " == *" postgresql-15 "* ]] && [ ! -e /etc/postgresql-common/createcluster.conf ]; then
  $SUDO mkdir -p /etc/postgresql-common
  echo "create_main_cluster = false" | $SUDO tee /etc/postgresql-common/createcluster.conf >/dev/null
fi
# redis-server (and any other daemon package) would start the machine's own service on install: the
# harness starts its own servers on loopback, so tell invoke-rc.d no for the length of the install
# (policy-rc.d exit 101 = "action forbidden", Debian's policy-rc.d interface), unless one exists.
policy_rc=/usr/sbin/policy-rc.d
own_policy=0
if [ ! -e "$policy_rc" ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy_rc" >/dev/null
  $SUDO chmod 755 "$policy_rc"
  own_policy=1
fi
remove_policy() { if [ "$own_policy" = 1 ]; then $SUDO rm -f "$policy_rc"; fi; }
trap remove_policy EXIT
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends -o Dpkg::Options::=--force-confold "${missing[@]}" >/dev/null
if [ "$want_node" = 1 ]; then node_example; fi
echo "install-deps: done"
