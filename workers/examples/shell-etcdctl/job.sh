#!/bin/sh
# The command `etcdctl lock` runs while it holds the lock: writes the job's chunks to the store
# with curl, from the segment worker.sh's state says is next. Args: --broken|--correct STATE_DIR.
# Exits 0 when every segment is written, 3 when a write was rejected or its outcome is unknown.
set -u
mode=$1
state=$2
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

if [ "$mode" = --checked ] && [ -z "$(etcdctl get "$ETCD_LOCK_KEY" --keys-only 2> /dev/null)" ]; then
  # etcd 3.4's Lock returned although our key is gone: our lease expired while we queued, etcd
  # deleted the key, and the lock is someone else's (etcd#11456). Not a holding: give it up.
  echo "job.sh: $ETCD_LOCK_KEY no longer exists (lease expired while queued): not holding the lock" >&2
  exit 3
fi
if [ "$mode" != --broken ]; then
  token=$ETCD_LOCK_REV  # the revision etcdctl hands us with the lock (README.md: which one, and why it fences)
else
  token=1  # no token from the lock in use: every holder sends the same one
fi
# The lock key is <lock name>/<lease id in hex>: the session's lease.
lease_id=$(printf '%d' "0x${ETCD_LOCK_KEY##*/}")
echo "$ETCD_LOCK_KEY $token" > "$state/holding"
emit "$(printf '{"kind":"acquire.ok","lock":"%s","lock_key":"%s","token":%s,"lease_id":%s}' \
  "$FENCECHECK_LOCK_NAME" "$ETCD_LOCK_KEY" "$token" "$lease_id")"

ms=$FENCECHECK_CHUNK_INTERVAL_MS
interval=$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))
key=$FENCECHECK_KEY
reply=$state/reply
segment=$(cat "$state/segment")
while [ "$segment" -lt "$FENCECHECK_JOB_SEGMENTS" ]; do
  chunk=0
  while [ "$chunk" -lt "$FENCECHECK_JOB_CHUNKS" ]; do
    where=$(printf '"key":"%s","segment":%d,"chunk":%d,"token":%s' "$key" "$segment" "$chunk" "$token")
    emit "{\"kind\":\"write.invoke\",$where}"
    status=$(encode_chunk "$FENCECHECK_WORKER_ID" "$token" "$key" "$segment" "$chunk" "$FENCECHECK_CHUNK_BYTES" |
      curl -sS --max-time 5 -o "$reply" -w '%{http_code}' -X PUT --data-binary @- \
        -H 'Content-Type: application/octet-stream' -H "Fencing-Token: $token" \
        -H "Fencecheck-Client: $FENCECHECK_WORKER_ID" \
        "$FENCECHECK_RESOURCE_URL/v1/keys/$key/segments/$segment/chunks/$chunk" 2> "$state/curl-error")
    # The reply's mark and words ({"high_water":N,"error":"..."}), the words made JSON-safe.
    mark=$(sed -n 's/.*"high_water":\([0-9][0-9]*\).*/,"high_water":\1/p' "$reply" 2> /dev/null)
    words=$(sed -n 's/.*"error":"\([^"]*\)".*/: \1/p' "$reply" 2> /dev/null | tr -d '\\\000-\037')
    case "$status" in
      2??)
        emit "{\"kind\":\"write.ok\",$where$mark}"
        sleep "$interval"
        chunk=$((chunk + 1))
        continue ;;
      409) emit "{\"kind\":\"write.fail\",$where$mark,\"detail\":\"HTTP 409$words\"}" ;;
      4??) emit "{\"kind\":\"write.fail\",$where,\"detail\":\"HTTP $status$words\"}" ;;
      *) emit "{\"kind\":\"write.info\",$where,\"detail\":\"HTTP $status: $(tr -d '"\\\000-\037' < "$state/curl-error")\"}" ;;
    esac
    # Stop: worker.sh takes the lock again (a new token) and this segment is redone under it.
    echo "job.sh: write of segment $segment chunk $chunk under token $token: HTTP $status; stopping" >&2
    exit 3
  done
  segment=$((segment + 1))
  echo "$segment" > "$state/segment"
done
emit "$(printf '{"kind":"job.done","token":%s}' "$token")"
emit "$(printf '{"kind":"release.invoke","lock_key":"%s","token":%s,"lease_id":%s}' "$ETCD_LOCK_KEY" "$token" "$lease_id")"
touch "$state/done"  # etcdctl deletes the lock key once we exit
exit 0
