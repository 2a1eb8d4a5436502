"""What every Python example worker needs to speak fencecheck's worker protocol v1
(docs/worker-protocol.md): its environment, its event lines on fd 3, the chunks' self-describing
bytes, the HTTP service the chunks go to (the store's API, docs/resource-http.md) and the job's
write loop. The lock is each example's own business (python-etcd3, kazoo); this is the part a team
would write once to be tested by fencecheck. Standard library only.
"""
import http.client
import json
import os
import sys
import time
import urllib.parse
import zlib

EVENTS_FD = int(os.environ.get("FENCECHECK_EVENTS_FD", "3"))


def env(name):
    value = os.environ.get(name)
    if not value:
        sys.exit(f"{os.path.basename(sys.argv[0])}: {name} is not set "
                 "(run me under fencecheck, or export the variables README.md lists)")
    return value


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


class Job:
    """The job this worker writes (FENCECHECK_KEY, segments of chunks) and how far it got."""

    def __init__(self, me):
        self.me = me
        self.key = env("FENCECHECK_KEY")
        self.segments, self.chunks = int(env("FENCECHECK_JOB_SEGMENTS")), int(env("FENCECHECK_JOB_CHUNKS"))
        self.chunk_bytes = int(env("FENCECHECK_CHUNK_BYTES"))
        self.interval = int(env("FENCECHECK_CHUNK_INTERVAL_MS")) / 1000.0
        self.service = Service(env("FENCECHECK_RESOURCE_URL"), me)
        self.segment = 0  # the next segment to write

    def write(self, token):
        """Writes the remaining segments under `token`, one event per step. None when every
        segment is written; else the outcome that stopped it (fenced, invalid, unknown): the
        segment it was in is written again, whole, under the next holding's token."""
        while self.segment < self.segments:
            for c in range(self.chunks):
                emit("write.invoke", key=self.key, segment=self.segment, chunk=c, token=token)
                outcome, mark, detail = self.service.put_chunk(
                    self.key, self.segment, c, token,
                    encode_chunk(self.me, token, self.key, self.segment, c, self.chunk_bytes))
                fields = dict(key=self.key, segment=self.segment, chunk=c, token=token)
                if mark is not None:
                    fields["high_water"] = mark
                if outcome == "ok":
                    emit("write.ok", **fields)
                    time.sleep(self.interval)
                    continue
                emit("write.info" if outcome == "unknown" else "write.fail", detail=detail, **fields)
                return outcome  # stop: never resend under this token
            self.segment += 1
        return None


def start(usage_modes):
    """The common start: argv is one of `usage_modes`, the hello line, a segments job. Returns
    (mode, worker id) or exits."""
    if len(sys.argv) != 2 or sys.argv[1] not in usage_modes:
        sys.exit(f"usage: {os.path.basename(sys.argv[0])} {'|'.join(usage_modes)}")
    me = env("FENCECHECK_WORKER_ID")
    emit("hello", protocol=1)
    if os.environ.get("FENCECHECK_JOB_KIND", "segments") != "segments":
        print(f"{os.path.basename(sys.argv[0])}: job kind {os.environ['FENCECHECK_JOB_KIND']!r}: this worker writes "
              "segments of chunks only", file=sys.stderr)
        sys.exit(1)
    return sys.argv[1], me


def run_holdings(hold, tries=20):
    """The worker's life: hold(attempt) takes the lock once, writes what is left of the job and
    lets go; it returns None when the job is done, else why it must take the lock again (a write
    fenced out, the lock not ours when read back). Exit status: 0 done, 1 gave up after `tries`."""
    for attempt in range(1, tries + 1):
        why = hold(attempt)
        if why is None:
            return 0
        print(f"{os.path.basename(sys.argv[0])}: attempt {attempt}: {why}; re-acquiring", file=sys.stderr)
    return 1
