#!/bin/sh
# A fencecheck worker written the way a shell script using `etcdctl lock` is: etcdctl takes the
# lock, runs job.sh while it holds it (ETCD_LOCK_KEY and ETCD_LOCK_REV in its environment), and
# releases it when job.sh exits.
#
#   worker.sh --broken    job.sh writes with a constant Fencing-Token (1), whoever holds the lock
#   worker.sh --rev       job.sh writes with ETCD_LOCK_REV as the token, trusting Lock's return, and
#                         stops at a 409; this loop then takes the lock again and job.sh redoes its
#                         segment. Broken two ways: etcd 3.4's Lock returns to a waiter whose key its
#                         lease expiry deleted (etcd#11456), and ETCD_LOCK_REV is no grant's token
#   worker.sh --correct   as --rev, but job.sh first confirms its lock key still exists (what etcd
#                         3.5's Mutex.Lock does; a holding whose key is gone is given up) and writes
#                         with that key's create revision, the grant's own token
#
# fencecheck's worker protocol v1: the FENCECHECK_* variables in, JSON event lines out on fd 3.
# Needs etcdctl (Debian's etcd-client, v3 API), curl, gzip and od; see README.md.
set -u

case "${1:-}" in
  --broken | --rev | --correct) mode=$1 ;;
  *) echo "usage: worker.sh --broken|--rev|--correct" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

# What survives from one holding to the next: the segment to write next, and what job.sh says
# about the holding it ends (token, lock key, and whether the job is done).
state=$(mktemp -d "${TMPDIR:-/tmp}/fencecheck-etcdctl.XXXXXX") || exit 1
trap 'rm -rf "$state"' EXIT
trap 'exit 143' TERM INT  # so that the EXIT trap runs when the harness ends the run
echo 0 > "$state/segment"

emit '{"kind":"hello","protocol":1}'
if [ "${FENCECHECK_JOB_KIND:-segments}" != segments ]; then
  give_up "job kind $FENCECHECK_JOB_KIND: this worker writes segments of chunks only"
fi
attempt=0
while [ "$attempt" -lt 20 ]; do
  attempt=$((attempt + 1))
  rm -f "$state/done" "$state/holding"
  emit "$(printf '{"kind":"acquire.invoke","lock":"%s","ttl_ms":%d}' "$FENCECHECK_LOCK_NAME" $((FENCECHECK_LEASE_TTL_S * 1000)))"
  # --ttl: the session's lease, kept alive by etcdctl while job.sh runs. etcdctl deletes its key
  # when job.sh exits; its exit status is 0 only when job.sh exited 0 and the delete succeeded
  # (etcd 3.4's etcdctl exits 1 for any other outcome, whatever job.sh's own status was).
  etcdctl lock --ttl="$FENCECHECK_LEASE_TTL_S" "$FENCECHECK_LOCK_NAME" -- "$here/job.sh" "$mode" "$state"
  rc=$?
  if [ -e "$state/done" ]; then
    if [ "$rc" -eq 0 ]; then
      read -r lock_key token < "$state/holding"
      emit "$(printf '{"kind":"release.ok","lock_key":"%s","token":%s}' "$lock_key" "$token")"
      exit 0
    fi
    # The job is done; only the unlock's outcome is not known (the lock service's history says).
    read -r lock_key token < "$state/holding"
    emit "$(printf '{"kind":"release.fail","lock_key":"%s","token":%s,"detail":"etcdctl exited %d after job.sh was done"}' "$lock_key" "$token" "$rc")"
    echo "worker.sh: the job is done but etcdctl exited $rc (its unlock failed?)" >&2
    exit 0
  fi
  [ -e "$state/holding" ] || { echo "worker.sh: etcdctl lock exited $rc before running job.sh" >&2; sleep 0.2; }
  echo "worker.sh: attempt $attempt ended with the job unfinished (etcdctl exit $rc); taking the lock again" >&2
done
give_up "20 holdings and the job is not done (the last: etcdctl exit $rc)"
