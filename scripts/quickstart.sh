#!/usr/bin/env bash
# From a fresh Debian 12 machine to a first verdict: installs what is missing for that and no more
# (Debian packages only: scripts/install-deps.sh core), builds the three programs the smoke suite
# runs (fencecheck, fencecheck-worker, fencecheck-store), runs the smoke suite against an embedded
# etcd and the reference fenced store, and prints the verdicts and where the run directories are.
# The other kinds' packages come with scripts/test.sh, or by name: scripts/install-deps.sh postgres
# zookeeper redis examples.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${FENCECHECK_BUILD:-build}

scripts/install-deps.sh core
echo "== build ($BUILD: fencecheck, fencecheck-worker, fencecheck-store)"
# A unity build (CMake batches each library's files, so the headers are parsed once a batch) at
# -O2: 248 CPU-s and 126 s on 2 cores for these three programs, against 454 CPU-s and 224 s for
# the file-by-file -O3 build (docs/performance.md, "The quickstart from a bare Debian 12 root").
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
  -DCMAKE_UNITY_BUILD=ON -DFENCECHECK_BUILD_TESTS=OFF -DFENCECHECK_BUILD_BENCH=OFF >/dev/null
cmake --build "$BUILD" -j "$(nproc)" --target fencecheck fencecheck-worker fencecheck-store

echo "== smoke suite: a holder SIGSTOPped past its lease, against a fenced and an unfenced store"
status=0
"$BUILD/bin/fencecheck" run scenarios/smoke --run-root runs || status=$?
echo
if [ "$status" -eq 0 ]; then
  echo "quickstart: every smoke scenario met its expectation."
else
  echo "quickstart: fencecheck exited $status (see README: exit codes)."
fi
echo "A scenario passes when its expectation is met: the unfenced control is expected to be invalid (it proves the checker can fail)."
echo "Run directories: $(pwd)/runs (newest: $(pwd)/runs/latest): report.html (open it in a browser), verdict.json, junit.xml, history.jsonl, readback.json, metrics.prom, logs/"
exit "$status"
