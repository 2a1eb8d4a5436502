#!/bin/sh
# Runs one example scenario (scenarios/examples/) with what it needs around it:
#
#   run_example.sh [--store PATH] [--repeat N] SCENARIO PROGRAM [ARGS...]
#
# runs `PROGRAM ARGS... SCENARIO` N times (default 1), e.g. PROGRAM = catalogue_run_test (ctest)
# or `fencecheck run`. Exit 77 (ctest's skip) when the example's client is not installed:
# python-etcd3 needs Debian's python3-etcd3 for /usr/bin/python3, python-redis its python3-redis,
# python-kazoo python3-kazoo, python-pg-advisory python3-psycopg2;
# shell-etcdctl needs etcdctl, curl, gzip and od. Otherwise the exit status is PROGRAM's (with
# N > 1: 0 only when every run exited 0, after a tally of the runs).
#
# A scenario whose resource is kind http names a service that must already be listening
# (fencecheck never starts it): for each run this script starts a fresh fencecheck-store (--store,
# default build/bin/fencecheck-store) on a free loopback port, and runs a copy of the scenario with
# that store's URL in place of the one written in it. The copy sits at the same path under a
# temporary directory whose workers/ is this tree's, so the scenario's relative `command:` paths
# still find the example. A fresh store each run: the http kind reads back everything the service
# holds, and the marks one run left would fence out the next run's tokens (each run's embedded etcd
# starts its revisions again).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
store=$root/build/bin/fencecheck-store
repeat=1
while [ $# -gt 0 ]; do
  case "$1" in
    --store) store=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    *) break ;;
  esac
done
[ $# -ge 2 ] || { echo "usage: run_example.sh [--store PATH] [--repeat N] SCENARIO PROGRAM [ARGS...]" >&2; exit 2; }
scenario=$1
shift

skip() { echo "run_example.sh: SKIP $(basename "$scenario"): $1" >&2; exit 77; }
if grep -q 'workers/examples/python-etcd3/' "$scenario"; then
  /usr/bin/python3 -c 'import etcd3' 2> /dev/null || skip "python-etcd3 is not installed for /usr/bin/python3 (apt-get install python3-etcd3)"
fi
if grep -q 'workers/examples/python-redis/' "$scenario"; then
  /usr/bin/python3 -c 'import redis' 2> /dev/null || skip "redis-py is not installed for /usr/bin/python3 (apt-get install python3-redis)"
fi
if grep -q 'workers/examples/python-kazoo/' "$scenario"; then
  /usr/bin/python3 -c 'import kazoo' 2> /dev/null || skip "kazoo is not installed for /usr/bin/python3 (apt-get install python3-kazoo)"
fi
if grep -q 'workers/examples/python-pg-advisory/' "$scenario"; then
  /usr/bin/python3 -c 'import psycopg2' 2> /dev/null || skip "psycopg2 is not installed for /usr/bin/python3 (apt-get install python3-psycopg2)"
fi
if grep -q 'workers/examples/shell-etcdctl/' "$scenario"; then
  for tool in etcdctl curl gzip od; do
    command -v "$tool" > /dev/null || skip "$tool is not installed (apt-get install etcd-client curl)"
  done
fi
if grep -q 'workers/examples/go-etcd-mutex/' "$scenario"; then
  [ -x "$(dirname "$store")/fc-example-go-etcd-mutex" ] ||
    skip "$(dirname "$store")/fc-example-go-etcd-mutex is not built (no go or no Debian Go sources at configure time: see the configure log)"
fi

# The http service's URL as the scenario writes it, if its resource is kind http.
template=$(sed -n 's/^resource: *{ *kind: *http, *url: *\(http:[^ ,}]*\).*/\1/p' "$scenario")
if [ -n "$template" ]; then
  [ -x "$store" ] || { echo "run_example.sh: no fencecheck-store at $store (--store PATH)" >&2; exit 2; }
  abs=$(cd "$(dirname "$scenario")" && pwd)/$(basename "$scenario")
  case "$abs" in
    "$root"/*) rel=${abs#"$root"/} ;;
    *) echo "run_example.sh: $scenario is not under $root, so its command paths cannot be kept" >&2; exit 2 ;;
  esac
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fencecheck-example.XXXXXX") || exit 2
store_pid=
stop_store() {
  if [ -n "$store_pid" ]; then
    kill "$store_pid" 2> /dev/null
    wait "$store_pid" 2> /dev/null
    store_pid=
  fi
}
trap 'stop_store; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

# Starts a fresh store for run $1 and writes the scenario's copy with its URL, at $path.
start_store() {
  "$store" --listen 127.0.0.1:0 --data-dir "$tmp/store-$1" > "$tmp/store-$1.out" 2> "$tmp/store-$1.log" &
  store_pid=$!
  i=0
  until url=$(sed -n 's/.*"listening":"\([^"]*\)".*/http:\/\/\1/p' "$tmp/store-$1.out") && [ -n "$url" ]; do
    i=$((i + 1))
    if [ "$i" -gt 100 ] || ! kill -0 "$store_pid" 2> /dev/null; then
      echo "run_example.sh: fencecheck-store did not start:" >&2
      cat "$tmp/store-$1.log" >&2
      return 1
    fi
    sleep 0.1
  done
  copy=$tmp/run-$1/$rel
  mkdir -p "$(dirname "$copy")"
  [ -e "$tmp/run-$1/workers" ] || ln -s "$root/workers" "$tmp/run-$1/workers"
  sed "s|url: *$template|url: $url|" "$scenario" > "$copy"
  path=$copy
}

met=0
n=0
status=0
while [ "$n" -lt "$repeat" ]; do
  n=$((n + 1))
  path=$scenario
  if [ -n "$template" ]; then
    start_store "$n" || exit 2
  fi
  "$@" "$path"
  rc=$?
  stop_store
  if [ "$rc" -eq 0 ]; then met=$((met + 1)); else status=$rc; fi
  [ "$rc" -ge 128 ] && break  # interrupted
done
[ "$repeat" -gt 1 ] && echo "run_example.sh: $(basename "$scenario"): $met of $n runs exited 0"
exit "$status"
