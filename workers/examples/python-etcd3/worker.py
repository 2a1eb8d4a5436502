#!/usr/bin/python3
"""A fencecheck worker written the way a team using python-etcd3's Lock would write it.

  worker.py --broken    the lock, and the constant token a naive client sends (python-etcd3's Lock
                        hands out no token; the service wants a Fencing-Token header; it gets 1)
  worker.py --correct   the lock key's create_revision as the token; on a 409 it stops,
                        re-acquires and redoes its segment under the new token

It speaks fencecheck's worker protocol v1 (env vars in, JSON event lines out on fd 3) and writes
the job's chunks to an HTTP service with the store's API (docs/resource-http.md):
PUT /v1/keys/{key}/segments/{segment}/chunks/{chunk} with Fencing-Token and Fencecheck-Client.
Standard library plus Debian's python3-etcd3; run it with /usr/bin/python3 (see README.md).
"""
import http.client
import json
import os
import sys
import threading
import time
import urllib.parse
import zlib

import etcd3

LOCK_PREFIX = "/locks/"  # python-etcd3 keeps the lock named N at the key /locks/N (etcd3.Lock.lock_prefix)
BROKEN_TOKEN = 1         # what the broken worker sends on every write, whoever holds the lock


def env(name):
    value = os.environ.get(name)
    if not value:
        sys.exit(f"worker.py: {name} is not set (run me under fencecheck, or export the variables README.md lists)")
    return value


EVENTS_FD = int(os.environ.get("FENCECHECK_EVENTS_FD", "3"))


def emit(kind, **fields):
    """One event line, in one write(2): atomic on the harness's pipe."""
    line = json.dumps({"kind": kind, **fields}, separators=(",", ":")) + "\n"
    os.write(EVENTS_FD, line.encode())


def encode_chunk(worker, token, key, segment, chunk, size):
    """The chunk's self-describing bytes, exactly as workers/proto/src/chunk.cpp's encode_chunk: the
    header, 'x' filler up to `size` bytes in all, then ' crc=' and the CRC-32 (IEEE, as zlib.crc32)
    of everything before it as 8 lower-case hex digits. A header longer than `size` gets no filler."""
    out = f"fc1 w={worker} t={token} k={key} s={segment} c={chunk} f="
    tail = len(" crc=") + 8
    if len(out) + tail < size:
        out += "x" * (size - len(out) - tail)
    return (out + f" crc={zlib.crc32(out.encode()) & 0xFFFFFFFF:08x}").encode()


class Service:
    """The HTTP service the chunks go to: one request per chunk, on its own connection."""

    def __init__(self, base_url, writer):
        u = urllib.parse.urlsplit(base_url)
        self.host, self.port, self.base = u.hostname, u.port or 80, u.path.rstrip("/")
        self.writer = writer

    def put_chunk(self, key, segment, chunk, token, data):
        """(outcome, high_water, detail); outcome is ok, fenced, invalid or unknown."""
        path = f"{self.base}/v1/keys/{urllib.parse.quote(key, safe='')}/segments/{segment}/chunks/{chunk}"
        conn = http.client.HTTPConnection(self.host, self.port, timeout=5)
        try:
            conn.request("PUT", path, body=data, headers={
                "Fencing-Token": str(token), "Fencecheck-Client": self.writer,
                "Content-Type": "application/octet-stream", "Connection": "close"})
            res = conn.getresponse()
            body = res.read()
        except (OSError, http.client.HTTPException) as e:
            return "unknown", None, f"{type(e).__name__}: {e}"
        finally:
            conn.close()
        try:
            reply = json.loads(body) if body else {}
        except ValueError:
            reply = {}
        mark = reply.get("high_water") if isinstance(reply, dict) else None
        mark = mark if isinstance(mark, int) else None
        detail = f"HTTP {res.status}" + (f": {reply['error']}" if isinstance(reply, dict) and reply.get("error") else "")
        if 200 <= res.status < 300:
            if isinstance(reply, dict) and reply.get("accepted") is False:
                return "unknown", mark, detail + " with accepted: false"
            return "ok", mark, detail
        if res.status == 409:
            return "fenced", mark, detail
        if 400 <= res.status < 500:
            return "invalid", None, detail
        return "unknown", None, detail


class Refresher(threading.Thread):
    """python-etcd3's Lock does not keep its lease alive: the holder must call lock.refresh()
    itself. This thread does, three times a TTL, until told to stop or the lease is gone."""

    def __init__(self, lock, ttl_s):
        super().__init__(daemon=True)
        self.lock, self.period, self.done = lock, ttl_s / 3.0, threading.Event()

    def run(self):
        while not self.done.wait(self.period):
            try:
                replies = self.lock.refresh()
            except Exception as e:  # noqa: BLE001 - a failed round trip leaves the lease's state unknown
                emit("keepalive.fail", lease_id=self.lock.lease.id, detail=f"{type(e).__name__}: {e}")
                continue
            if replies and replies[0].TTL <= 0:
                emit("lease.lost", lease_id=self.lock.lease.id)
                return


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ("--broken", "--correct"):
        sys.exit("usage: worker.py --broken|--correct")
    broken = sys.argv[1] == "--broken"
    me = env("FENCECHECK_WORKER_ID")
    lock_name = env("FENCECHECK_LOCK_NAME")
    ttl = int(env("FENCECHECK_LEASE_TTL_S"))
    key = env("FENCECHECK_KEY")
    segments, chunks = int(env("FENCECHECK_JOB_SEGMENTS")), int(env("FENCECHECK_JOB_CHUNKS"))
    chunk_bytes = int(env("FENCECHECK_CHUNK_BYTES"))
    interval = int(env("FENCECHECK_CHUNK_INTERVAL_MS")) / 1000.0
    service = Service(env("FENCECHECK_RESOURCE_URL"), me)

    emit("hello", protocol=1)
    if os.environ.get("FENCECHECK_JOB_KIND", "segments") != "segments":
        print(f"worker.py: job kind {os.environ['FENCECHECK_JOB_KIND']!r}: this worker writes segments of chunks only",
              file=sys.stderr)
        return 1
    # python-etcd3 puts the lock named N at /locks/N. fencecheck watches the keys under the
    # scenario's lock name, so the scenario names it /locks/<something> and the lock here is
    # <something>/lock: its key is <lock name>/lock, where the harness sees it come and go.
    if not lock_name.startswith(LOCK_PREFIX):
        print(f"worker.py: the lock name {lock_name!r} is not under {LOCK_PREFIX}, where python-etcd3 keeps its "
              f"locks: name the scenario's lock {LOCK_PREFIX}<something>", file=sys.stderr)
        return 1
    endpoint = urllib.parse.urlsplit(env("FENCECHECK_LOCK_ENDPOINTS").split(",")[0])
    client = etcd3.client(host=endpoint.hostname, port=endpoint.port or 2379)

    segment = 0
    for attempt in range(1, 21):
        emit("acquire.invoke", lock=lock_name, ttl_ms=ttl * 1000)
        lock = etcd3.Lock(lock_name[len(LOCK_PREFIX):] + "/lock", ttl=ttl, etcd_client=client)
        # A try-lock, polled: python-etcd3 0.12.0's waiting acquire() raises TypeError under the
        # tenacity Debian 12 ships (8.2: its wait callback has the old signature; upstream issue
        # kragniz/python-etcd3#2149). timeout=0 stops before that callback is ever called.
        while not lock.acquire(timeout=0):
            time.sleep(0.05)
        if broken:
            token = BROKEN_TOKEN
        else:
            # The lock key's create_revision: etcd's revision counter only goes up, and a new
            # holder's key is created after the previous one was deleted, so it orders holders.
            value, meta = client.get(lock.key)
            if value != lock.uuid:  # lost between the acquire and this read: the key is not ours
                emit("acquire.fail", lock=lock_name, detail="the lock key was not ours when read back")
                continue
            token = meta.create_revision
        emit("acquire.ok", lock=lock_name, lock_key=lock.key, token=token, lease_id=lock.lease.id)
        refresher = Refresher(lock, ttl)
        refresher.start()

        stopped = None
        while segment < segments and stopped is None:
            for c in range(chunks):
                emit("write.invoke", key=key, segment=segment, chunk=c, token=token)
                outcome, mark, detail = service.put_chunk(key, segment, c, token,
                                                          encode_chunk(me, token, key, segment, c, chunk_bytes))
                fields = dict(key=key, segment=segment, chunk=c, token=token)
                if mark is not None:
                    fields["high_water"] = mark
                if outcome == "ok":
                    emit("write.ok", **fields)
                    time.sleep(interval)
                    continue
                emit("write.info" if outcome == "unknown" else "write.fail", detail=detail, **fields)
                stopped = outcome  # stop: re-acquire and redo this segment, never resend this token
                break
            else:
                segment += 1

        if stopped is None:
            emit("job.done", token=token)
        refresher.done.set()
        emit("release.invoke", lock_key=lock.key, token=token, lease_id=lock.lease.id)
        try:
            released = lock.release()  # deletes the key only while it still holds our uuid
        except Exception as e:  # noqa: BLE001
            emit("release.fail", lock_key=lock.key, detail=f"{type(e).__name__}: {e}")
        else:
            if released:
                emit("release.ok", lock_key=lock.key, token=token)
            else:
                emit("release.fail", lock_key=lock.key, detail="the lock key no longer holds our uuid (lease expired)")
        if stopped is None:
            return 0
        print(f"worker.py: attempt {attempt}: write {stopped} under token {token}; re-acquiring", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
