#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/, docs/fuzzing.md) in their own build directory with
# clang (-fsanitize=fuzzer,address,undefined) and runs each for a bounded time over a scratch
# copy of its seed corpus (the committed corpus is never grown), with its dictionary. Prints the
# executions of each target; exits non-zero when any target crashed (an oracle failed, a
# sanitizer report, a leak, a timeout), after keeping the crashing inputs in $BUILD/fuzz-crashes/.
#
#   scripts/fuzz.sh [-t SECONDS] [-r RUNS] [TARGET...]
#     -t SECONDS  time per target (default 10; FUZZ_TIME)
#     -r RUNS     also stop a target after RUNS executions (default: no limit; FUZZ_RUNS)
#     TARGET      store_request store_log scenario worker_line report (default: all)
#   FUZZ_TIMEOUT: seconds one input may take before it counts as a hang (default 10; raise it for a
#     long run at nice 19 beside other work, where a starved input can take longer than that).
#   FENCECHECK_FUZZ_BUILD (default build-fuzz), JOBS (default nproc); FUZZ_SKIP_BUILD=1 runs the
#   programs already built (e.g. a second fuzz.sh beside a first, on other targets).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${FENCECHECK_FUZZ_BUILD:-build-fuzz}
JOBS=${JOBS:-$(nproc)}
TIME=${FUZZ_TIME:-10}
RUNS=${FUZZ_RUNS:--1}
TIMEOUT=${FUZZ_TIMEOUT:-10}
ALL=(store_request store_log scenario worker_line report)
while getopts "t:r:" opt; do
  case $opt in
    t) TIME=$OPTARG ;;
    r) RUNS=$OPTARG ;;
    *) sed -n '2,15p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=("${ALL[@]}")

start=$SECONDS
if ! command -v clang++ >/dev/null 2>&1; then
  echo "fuzz.sh: clang++ not found (Debian: clang, libclang-rt-14-dev; scripts/install-deps.sh installs them)" >&2
  exit 2
fi
launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
if [ "${FUZZ_SKIP_BUILD:-0}" = 1 ]; then
  echo "== fuzz: FUZZ_SKIP_BUILD=1: using $BUILD as built"
else
  echo "== fuzz: configure + build $BUILD (clang, fuzzer+ASan+UBSan)"
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
    -DFENCECHECK_FUZZ=ON "${launcher[@]}" >/dev/null
  cmake --build "$BUILD" --target fencecheck_fuzz -j "$JOBS"
  echo "== fuzz: built in $((SECONDS - start))s"
fi

# Scratch space: tmpfs when there is one (the store targets fdatasync), removed at the end.
shm=/dev/shm; [ -d "$shm" ] && [ -w "$shm" ] || shm=${TMPDIR:-/tmp}
scratch=$(mktemp -d "$shm/fencecheck-fuzz-run.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
export FENCECHECK_FUZZ_SCRATCH=$scratch
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# Seeds beyond tests/fuzz/corpus/<target>/: the repository's real files.
seed() {
  local t=$1 dir=$2
  cp "$ROOT/tests/fuzz/corpus/$t/"* "$dir/" 2>/dev/null || true
  case $t in
    scenario)  # every scenario file in the repository
      find "$ROOT/scenarios" -name '*.yaml' -print0 | while IFS= read -r -d '' f; do
        cp "$f" "$dir/$(echo "${f#"$ROOT"/}" | tr / _)"; done ;;
    report)  # the real runs kept as report fixtures: history.jsonl, the separator line, readback.json
      for fx in "$ROOT"/tests/report/fixtures/*/; do
        { cat "$fx/history.jsonl"; printf '\n--- readback.json ---\n'; cat "$fx/readback.json"; } >"$dir/fixture-$(basename "$fx")"
      done ;;
  esac
}

failed=()
printf '%-14s %12s %8s %8s  %s\n' target executions seconds exec/s result
for t in "${TARGETS[@]}"; do
  bin="$BUILD/bin/${t}_fuzz"
  [ -x "$bin" ] || { echo "fuzz.sh: no target $t ($bin)" >&2; exit 2; }
  corpus="$scratch/$t-corpus"; mkdir -p "$corpus" "$scratch/$t-artifacts"
  seed "$t" "$corpus"
  dict=(); [ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
  log="$scratch/$t.log"
  t0=$SECONDS
  rc=0
  "$bin" -max_total_time="$TIME" -runs="$RUNS" -timeout="$TIMEOUT" -print_final_stats=1 -artifact_prefix="$scratch/$t-artifacts/" \
    "${dict[@]}" "$corpus" >"$log" 2>&1 || rc=$?
  secs=$((SECONDS - t0))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  result=ok
  if [ "$rc" -ne 0 ] || ls "$scratch/$t-artifacts/" | grep -q .; then
    result="CRASH (exit $rc)"
    failed+=("$t")
    mkdir -p "$BUILD/fuzz-crashes/$t"
    cp "$scratch/$t-artifacts/"* "$BUILD/fuzz-crashes/$t/" 2>/dev/null || true
    cp "$log" "$BUILD/fuzz-crashes/$t/fuzz.log"
  fi
  printf '%-14s %12s %8s %8s  %s\n' "$t" "${execs:-?}" "$secs" "${rate:-?}" "$result"
done

if [ ${#failed[@]} -ne 0 ]; then
  for t in "${failed[@]}"; do
    echo "== $t: the inputs and the log are in $BUILD/fuzz-crashes/$t/; the report:"
    grep -E -A25 'ERROR: |fuzz oracle:|runtime error:|deadly signal|timeout' "$BUILD/fuzz-crashes/$t/fuzz.log" | head -60
  done
  echo "fuzz.sh: crashes in: ${failed[*]} [$((SECONDS - start))s]"
  exit 1
fi
echo "fuzz.sh: no crash in ${TARGETS[*]} [$((SECONDS - start))s]"
