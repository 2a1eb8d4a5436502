#!/bin/sh
# A command worker for the tests (docs/worker-protocol.md): a user's program as the harness sees
# it, built from the reference worker so that what it writes is known. $1 picks the behaviour:
#   forking         this shell starts a subshell that starts fencecheck-worker: the lock holder
#                   is two processes below the one the harness started. Every fault must reach it.
#                   Arguments after the mode go to fencecheck-worker (its design flags).
#   lying           says hello, then a write.ok whose token is a string (line 2 breaks the
#                   protocol), then runs the reference worker (whose own hello is a second one).
#   exit3           writes to stderr and exits 3 (a failed worker).
#   crashes         runs the reference worker, passes its events on up to its first write.ok, then
#                   dies of an uncaught Python exception (exit 1, a traceback on stderr): a crash.
#   gives-up        the same, but says job.gave_up (with why) before it exits 1: not a crash.
#   never-acquires  says hello and acquire.invoke, then exits 0 without ever holding the lock.
#   silent          runs the reference worker with no event channel: a black box.
#   background      starts the reference worker in the background and exits at once, as if done.
#   escaping        says hello, leaves a process that escapes its process group (setsid) holding
#                   the event channel, and exits: the harness must still finish.
set -eu
mode=${1:?usage: worker.sh forking|lying|exit3|crashes|gives-up|never-acquires|silent|background|escaping [fencecheck-worker flags...]}
shift
# FC_TEST_WORKER_BIN_DIR: where fencecheck-worker is when the test copied it (and this script) to a
# directory an unprivileged account can reach (command_worker_test.cpp, "AsNobody").
worker() {
  "${FC_TEST_WORKER_BIN_DIR:-$FENCECHECK_BIN_DIR}/fencecheck-worker" --id "$FENCECHECK_WORKER_ID" --etcd "$FENCECHECK_LOCK_ENDPOINTS" \
    --resource "$FENCECHECK_RESOURCE" --lock "$FENCECHECK_LOCK_NAME" --key "$FENCECHECK_KEY" \
    --ttl-s "$FENCECHECK_LEASE_TTL_S" --segments "$FENCECHECK_JOB_SEGMENTS" --chunks "$FENCECHECK_JOB_CHUNKS" \
    --chunk-bytes "$FENCECHECK_CHUNK_BYTES" --chunk-interval-ms "$FENCECHECK_CHUNK_INTERVAL_MS" \
    --seed "$FENCECHECK_SEED" "$@"
}
case "$mode" in
  forking)
    echo "worker.sh: $FENCECHECK_WORKER_ID forking the holder two levels down (uid $(id -u))"
    ( worker "$@" & wait $! ) &
    wait $!
    ;;
  lying)
    printf '{"kind":"hello","protocol":1}\n' >&3
    printf '{"kind":"write.ok","key":"%s","token":"seven"}\n' "$FENCECHECK_KEY" >&3
    worker
    ;;
  exit3)
    echo "worker.sh: cannot reach the payments database (this worker fails on purpose)" >&2
    exit 3
    ;;
  crashes | gives-up)
    # The reference worker's events come through this shell, which stops reading after the first
    # write.ok (the reference worker then dies of the closed pipe at its next event).
    worker 3>&1 > /dev/null | while IFS= read -r line; do
      printf '%s\n' "$line" >&3
      case "$line" in *'"kind":"write.ok"'*) break ;; esac
    done
    if [ "$mode" = gives-up ]; then
      printf '{"kind":"job.gave_up","detail":"the ledger client lost its connection: giving up on purpose"}\n' >&3
      exit 1
    fi
    exec /usr/bin/python3 -c 'raise RuntimeError("the ledger client lost its connection (this worker crashes on purpose)")'
    ;;
  never-acquires)
    printf '{"kind":"hello","protocol":1}\n' >&3
    printf '{"kind":"acquire.invoke","lock":"%s","ttl_ms":%d}\n' "$FENCECHECK_LOCK_NAME" "$((FENCECHECK_LEASE_TTL_S * 1000))" >&3
    exit 0
    ;;
  silent)
    unset FENCECHECK_EVENTS_FD
    exec 3>&-
    worker > /dev/null
    ;;
  background)
    worker "$@" &
    exit 0
    ;;
  escaping)
    printf '{"kind":"hello","protocol":1}\n' >&3
    setsid sleep 987.654 &
    exit 0
    ;;
  *)
    echo "worker.sh: unknown mode $mode" >&2
    exit 64
    ;;
esac
