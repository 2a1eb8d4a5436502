#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls this): installs what is missing from
# Debian's packages, builds with AddressSanitizer + UndefinedBehaviorSanitizer, runs every test
# (unit, integration against real etcd and real processes, and the root-only fault tests when
# run as root), then checks that nothing was left behind.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${FENCECHECK_TEST_BUILD:-build-asan}
JOBS=${JOBS:-$(nproc)}

scripts/install-deps.sh

echo "== configure ($BUILD: ASan+UBSan) [${SECONDS}s]"
# The benchmark programs are not built here: scripts/bench.sh builds them (Release), nothing in the
# test suite runs them (tests/bench checks their inputs and arithmetic, not the binaries), and under
# the sanitizers they are minutes of CI's 60 on 2 cores.
# Built with clang (Debian's clang-14): the reference ASan/UBSan, and on 2 cores it builds this
# tree in about half the time GCC 12 takes with the same flags (875 s against 1750 s, measured
# 2026-12-02), which keeps CI's whole run well inside its 60 minutes. The release builds
# (scripts/quickstart.sh, scripts/bench.sh) stay on GCC, so both compilers see every file.
# A unity build (CMake batches each target's files): 943 CPU-s against 1,112 file by file, about
# 430 s against 540 s on 2 cores (docs/performance.md), and the tests then run the same batched
# code that scripts/quickstart.sh builds.
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFENCECHECK_SANITIZE=ON -DCMAKE_UNITY_BUILD=ON \
  -DCMAKE_CXX_COMPILER=clang++ -DFENCECHECK_BUILD_BENCH=OFF >/dev/null
echo "== build [${SECONDS}s]"
cmake --build "$BUILD" -j "$JOBS"

# Sanitizers: stop at the first error; leaks are errors.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# Command workers run as an unprivileged account (docs/worker-protocol.md, "The worker's account"):
# nobody, when root runs this without sudo. A checkout nobody cannot reach (a clone under /root,
# whose mode is 0700) would fail every command-worker scenario at validate, so the suite then runs
# them as root and says so. The tests that prove each fault acts on an unprivileged worker copy
# their worker out of the checkout and name `user: nobody` themselves, so they run either way.
if [ "$(id -u)" = 0 ] && [ -z "${FENCECHECK_WORKER_USER:-}" ] && [ -z "${SUDO_USER:-}" ] &&
  ! setpriv --reuid=nobody --regid=nogroup --clear-groups test -r "$ROOT/tests/command_worker/worker.sh"; then
  echo "test.sh: the account nobody cannot reach this checkout ($ROOT): command workers run as root in this run (FENCECHECK_WORKER_USER=root)"
  export FENCECHECK_WORKER_USER=root
fi

echo "== scenarios validate [${SECONDS}s]"
"$BUILD/bin/fencecheck" validate scenarios/smoke
"$BUILD/bin/fencecheck" validate scenarios/postgres
"$BUILD/bin/fencecheck" validate scenarios/redis
"$BUILD/bin/fencecheck" validate scenarios/zookeeper
"$BUILD/bin/fencecheck" validate scenarios/examples
"$BUILD/bin/fencecheck" validate scenarios/staging
"$BUILD/bin/fencecheck" validate scenarios/cluster

echo "== tests [${SECONDS}s]"
ctest --test-dir "$BUILD" --output-on-failure -j "$JOBS" --timeout 600

echo "== residue check [${SECONDS}s]"
left=""
if command -v ip >/dev/null 2>&1; then left+=$(ip netns list 2>/dev/null | grep -E '^fc-' || true); fi
left+=$(find /sys/fs/cgroup -mindepth 1 -maxdepth 3 -type d -name '*fencecheck*' 2>/dev/null || true)
left+=$(ps -eo pid=,stat=,comm= | awk '$2 ~ /^T/ && $3 ~ /fencecheck|etcd|redis/' || true)
if [ -n "$left" ]; then
  echo "test.sh: the tests left something behind:"; echo "$left"; exit 1
fi
# A short pass of every fuzz target (docs/fuzzing.md): FUZZ_TIME seconds per target over its seeds.
# The clang sanitizer build above is also the fuzz build (FENCECHECK_FUZZ_PROGRAMS in
# CMakeLists.txt): its bin/<target>_fuzz programs run as built, with no build-fuzz of their own.
echo "== fuzz: short pass [${SECONDS}s]"
FUZZ_TIME=${FUZZ_TIME:-5} FUZZ_SKIP_BUILD=1 FENCECHECK_FUZZ_BUILD=$BUILD scripts/fuzz.sh

echo "test.sh: all tests passed in $BUILD [${SECONDS}s]"
