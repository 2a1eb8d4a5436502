#!/bin/sh
# Runs one example scenario (scenarios/examples/) with what it needs around it:
#
#   run_example.sh [--store PATH] [--repeat N] SCENARIO PROGRAM [ARGS...]
#
# runs `PROGRAM ARGS... SCENARIO` N times (default 1), e.g. PROGRAM = catalogue_run_test (ctest)
# or `fencecheck run`. Exit 77 (ctest's skip) when the example's client is not installed:
# python-etcd3 needs Debian's python3-etcd3 for /usr/bin/python3, python-redis its python3-redis,
# python-kazoo python3-kazoo, python-pg-advisory (and any Python example against kind postgres)
# python3-psycopg2;
# shell-etcdctl needs etcdctl, curl, gzip and od; redlock-node needs node and its node_modules
# (npm ci: scripts/install-deps.sh node). Otherwise the exit status is PROGRAM's (with
# N > 1: 0 only when every run exited 0, after a tally of the runs).
#
# A scenario whose resource is kind http starts its own service (resource.start: the reference
# store on a free port, a fresh one each run), so nothing is started here. --store names the build's
# fencecheck-store; the Go example is looked for in its directory.
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
if grep -q 'workers/examples/python-' "$scenario" && grep -q 'kind: postgres' "$scenario"; then
  /usr/bin/python3 -c 'import psycopg2' 2> /dev/null || skip "psycopg2 is not installed for /usr/bin/python3 (apt-get install python3-psycopg2)"
fi
if grep -q 'workers/examples/shell-etcdctl/' "$scenario"; then
  for tool in etcdctl curl gzip od; do
    command -v "$tool" > /dev/null || skip "$tool is not installed (apt-get install etcd-client curl)"
  done
fi
if grep -q 'workers/examples/redlock-node/' "$scenario"; then
  command -v node > /dev/null || skip "node is not installed (scripts/install-deps.sh node)"
  node_modules=$root/workers/examples/redlock-node/node_modules
  [ -d "$node_modules/redlock" ] && [ -d "$node_modules/ioredis" ] ||
    skip "$node_modules has no redlock or ioredis (scripts/install-deps.sh node runs npm ci there)"
fi
if grep -q 'workers/examples/go-etcd-mutex/' "$scenario"; then
  [ -x "$(dirname "$store")/fc-example-go-etcd-mutex" ] ||
    skip "$(dirname "$store")/fc-example-go-etcd-mutex is not built (no go or no Debian Go sources at configure time: see the configure log)"
fi

met=0
n=0
status=0
while [ "$n" -lt "$repeat" ]; do
  n=$((n + 1))
  "$@" "$scenario"
  rc=$?
  if [ "$rc" -eq 0 ]; then met=$((met + 1)); else status=$rc; fi
  [ "$rc" -ge 128 ] && break  # interrupted
done
[ "$repeat" -gt 1 ] && echo "run_example.sh: $(basename "$scenario"): $met of $n runs exited 0"
exit "$status"
