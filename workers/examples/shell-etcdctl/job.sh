#!/bin/sh
# The command `etcdctl lock` runs while it holds the lock: writes the job's chunks to the store
# with curl, from the segment worker.sh's state says is next. Args: --broken|--rev|--correct STATE_DIR.
# Exits 0 when every segment is written, 3 when a write was rejected or its outcome is unknown.
set -u
mode=$1
state=$2
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

case "$mode" in
  --correct)
    # Confirm the lock is ours: etcd 3.4's Lock returns even when our key is gone (our lease expired
    # while we queued and etcd deleted the key; the lock is someone else's: etcd#11456). Our key's
    # create revision is the token: the grant's own, from the one ordering authority (README.md).
    token=$(etcdctl get "$ETCD_LOCK_KEY" -w fields 2> /dev/null | sed -n 's/^"CreateRevision" : \([0-9][0-9]*\)$/\1/p')
    if [ -z "$token" ]; then
      echo "job.sh: $ETCD_LOCK_KEY no longer exists (lease expired while queued): not holding the lock" >&2
      exit 3
    fi ;;
  --rev) token=$ETCD_LOCK_REV ;;  # the revision etcdctl hands us with the lock, trusted as it comes (README.md)
  *) token=1 ;;  # no token from the lock in use: every holder sends the same one
esac
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
    # A 409 is the fence's rejection: it always carries a high_water (0: the reply did not say it).
    [ "$status" = 409 ] && [ -z "$mark" ] && mark=',"high_water":0'
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
