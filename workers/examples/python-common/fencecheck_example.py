"""What every Python example worker needs from fencecheck, apart from its lock: the worker
protocol's environment and events, the self-describing chunks (or, with the scenario's
`job.payload: opaque`, rows of the team's own JSON), the HTTP service with the store's API, the
scenario's own PostgreSQL `write` statement (ScenarioWrite), and the job of segments of chunks.
Standard library only (ScenarioWrite takes a DB-API connection the worker opened, psycopg2's);
the examples import it from ../python-common (workers/examples/python-etcd3/worker.py,
workers/examples/python-redis/worker.py, workers/examples/python-kazoo/worker.py,
workers/examples/python-pg-advisory/worker.py).

The protocol: docs/worker-protocol.md. The service: docs/resource-http.md (PUT
/v1/keys/{key}/segments/{segment}/chunks/{chunk} with Fencing-Token and Fencecheck-Client).
"""
import http.client
import json
import os
import sys
import time
import types
import urllib.parse
import zlib

EVENTS_FD = int(os.environ.get("FENCECHECK_EVENTS_FD", "3"))


def env(name, program="worker.py"):
    value = os.environ.get(name)
    if not value:
        sys.exit(f"{program}: {name} is not set (run me under fencecheck, or export the variables README.md lists)")
    return value


def emit(kind, **fields):
    """One event line, in one write(2): atomic on the harness's pipe."""
    line = json.dumps({"kind": kind, **fields}, separators=(",", ":")) + "\n"
    os.write(EVENTS_FD, line.encode())


def give_up(why, program="worker.py", **fields):
    """Gives up for good, saying so first: job.gave_up with the reason (the protocol's one way to
    say it; an exit 1 alone is a crash, docs/worker-protocol.md), the reason on stderr too.
    Returns 1, the exit status to end with."""
    emit("job.gave_up", detail=why, **fields)
    print(f"{program}: giving up: {why}", file=sys.stderr)
    return 1


def encode_chunk(worker, token, key, segment, chunk, size):
    """The chunk's self-describing bytes, exactly as workers/proto/src/chunk.cpp's encode_chunk: the
    header, 'x' filler up to `size` bytes in all, then ' crc=' and the CRC-32 (IEEE, as zlib.crc32)
    of everything before it as 8 lower-case hex digits. A header longer than `size` gets no filler."""
    out = f"fc1 w={worker} t={token} k={key} s={segment} c={chunk} f="
    tail = len(" crc=") + 8
    if len(out) + tail < size:
        out += "x" * (size - len(out) - tail)
    return (out + f" crc={zlib.crc32(out.encode()) & 0xFFFFFFFF:08x}").encode()


def payload():
    """The scenario's job.payload: "self-describing" (fencecheck's chunks, encode_chunk) or
    "opaque" (the system's own bytes: json_row). FENCECHECK_JOB_PAYLOAD; self-describing when unset
    (a harness from before it)."""
    return os.environ.get("FENCECHECK_JOB_PAYLOAD", "self-describing")


def json_row(worker, token, key, segment, chunk):
    """A row as a team's own service writes it: a shipment's JSON, nothing of fencecheck's format.
    With job.payload opaque the checkers never read these bytes; who wrote a row, and under which
    token, is what the resource's writer and token columns say (docs/worker-protocol.md)."""
    return json.dumps({"shipment": f"{key}-{segment}-{chunk}", "status": "packed", "packed_by": worker,
                       "lease_token": token}, separators=(",", ":")).encode()


def chunk_bytes(worker, token, key, segment, chunk, size):
    """What the job writes to one slot, per the scenario's payload: encode_chunk() or json_row()."""
    if payload() == "opaque":
        return json_row(worker, token, key, segment, chunk)
    return encode_chunk(worker, token, key, segment, chunk, size)


class ScenarioWrite:
    """The scenario's own `write` statement(s), as resource kind postgres hands them to a command
    worker (docs/resource-postgres.md, "Your worker writes through the scenario's statement"):
    FENCECHECK_PG_WRITE_COUNT statements, each FENCECHECK_PG_WRITE_<i>_POSITIONAL with $1..$6
    standing for FENCECHECK_PG_WRITE_PARAMS (key, segment, chunk, token, writer, data) of the types
    FENCECHECK_PG_WRITE_TYPES. Each is prepared once on `conn` (a DB-API connection in autocommit
    mode: psycopg2's with conn.autocommit = True) and run the way fencecheck-worker runs it:

      one statement: its row count decides, >= 1 accepted, 0 rejected, none (-1) unknown;
      several: BEGIN ISOLATION LEVEL READ COMMITTED, each in order; the first with 0 rows rolls
      back (rejected); a statement without a row count neither accepts nor rejects; else COMMIT.

    So the SQL the probe tests and the SQL the runs test are the same text. A database error
    propagates (the outcome is unknown: write.info); prepare again on a new connection after it."""

    def __init__(self, conn, program="worker.py"):
        self.conn = conn
        self.params = env("FENCECHECK_PG_WRITE_PARAMS", program).split(",")
        types = env("FENCECHECK_PG_WRITE_TYPES", program)
        count = int(env("FENCECHECK_PG_WRITE_COUNT", program))
        self.names = [f"fencecheck_write_{i}" for i in range(1, count + 1)]
        with conn.cursor() as cur:
            for i, name in enumerate(self.names, start=1):
                # No parameters passed: the driver sends the text as it is (no %-interpolation).
                cur.execute(f"PREPARE {name} ({types}) AS {env(f'FENCECHECK_PG_WRITE_{i}_POSITIONAL', program)}")
        self.call = "EXECUTE {} (" + ", ".join(["%s"] * len(self.params)) + ")"

    def write(self, **values):
        """Runs the statement(s) with values for key, segment, chunk, token, writer, data (bytes).
        Returns "accepted", "rejected" or "unknown" (a single statement with no row count)."""
        args = [values[p] for p in self.params]
        with self.conn.cursor() as cur:
            if len(self.names) == 1:
                cur.execute(self.call.format(self.names[0]), args)
                return "unknown" if cur.rowcount < 0 else "accepted" if cur.rowcount >= 1 else "rejected"
            cur.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
            for name in self.names:
                cur.execute(self.call.format(name), args)
                if cur.rowcount == 0:
                    cur.execute("ROLLBACK")
                    return "rejected"
            cur.execute("COMMIT")
            return "accepted"


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
            # A rejection by the fence always carries a high_water (0: the reply did not say the
            # mark); a write.fail without one is an invalid request (docs/worker-protocol.md).
            return "fenced", mark if mark is not None else 0, detail
        if 400 <= res.status < 500:
            return "invalid", None, detail
        return "unknown", None, detail


class PostgresRows:
    """The chunks go to the run's PostgreSQL (resource kind postgres) through the scenario's own
    `write` statements (ScenarioWrite), with put_chunk() as Service's. psycopg2 (Debian's
    python3-psycopg2) is imported only here, so the other examples need nothing but the standard
    library. One connection, made again (and the statements prepared again) after an error."""

    def __init__(self, dsn, writer, program="worker.py"):
        import psycopg2  # noqa: PLC0415 - only a worker writing to PostgreSQL needs it
        self.psycopg2, self.dsn, self.writer, self.program = psycopg2, dsn, writer, program
        endpoint = json.loads(os.environ.get("FENCECHECK_RESOURCE", "{}") or "{}")
        # The key's mark after a rejection: the resource's high_water query (key, token), when it
        # takes no parameter but $keys (the run's keys, a text[]: here the one key asked about);
        # else the rejection says 0 (the reply did not say it).
        mark_query = endpoint.get("high_water") if isinstance(endpoint, dict) else None
        if isinstance(mark_query, str) and "$" not in mark_query.replace("$keys", ""):
            self.mark_query = mark_query.replace("%", "%%").replace("$keys", "%(keys)s")
        else:
            self.mark_query = None
        self.conn = None

    def _connect(self):
        self.conn = self.psycopg2.connect(self.dsn)
        self.conn.autocommit = True
        self.statement = ScenarioWrite(self.conn, self.program)

    def _mark(self, key):
        if not self.mark_query:
            return 0
        with self.conn.cursor() as cur:
            cur.execute(self.mark_query, {"keys": [key]})  # a list is sent as an array
            return next((int(row[1]) for row in cur.fetchall() if row[0] == key), 0)

    def put_chunk(self, key, segment, chunk, token, data):
        """(outcome, high_water, detail); outcome is ok, fenced or unknown."""
        try:
            if self.conn is None:
                self._connect()
            outcome = self.statement.write(key=key, segment=segment, chunk=chunk, token=token, writer=self.writer,
                                           data=data)
            if outcome == "accepted":
                return "ok", None, "accepted"
            if outcome == "rejected":
                try:
                    mark = self._mark(key)
                except self.psycopg2.Error:
                    mark = 0  # the rejection stands; only its mark is not known
                return "fenced", mark, "rejected: the scenario's write statement changed no row"
            return "unknown", None, "the statement reported no row count"
        except self.psycopg2.Error as e:
            if self.conn is not None:
                self.conn.close()
            self.conn = None
            return "unknown", None, f"{type(e).__name__}: {e}".strip()


class Job:
    """The job the harness describes in FENCECHECK_JOB_*: segments of chunks to one key, one chunk
    every FENCECHECK_CHUNK_INTERVAL_MS, each write reported as write.invoke and its outcome. The
    chunks go to the HTTP service (FENCECHECK_RESOURCE_URL), or with resource kind postgres through
    the scenario's own write statements (PostgresRows)."""

    def __init__(self, program="worker.py"):
        self.me = env("FENCECHECK_WORKER_ID", program)
        self.key = env("FENCECHECK_KEY", program)
        self.segments = int(env("FENCECHECK_JOB_SEGMENTS", program))
        self.chunks = int(env("FENCECHECK_JOB_CHUNKS", program))
        self.chunk_bytes = int(env("FENCECHECK_CHUNK_BYTES", program))
        self.interval = int(env("FENCECHECK_CHUNK_INTERVAL_MS", program)) / 1000.0
        if os.environ.get("FENCECHECK_RESOURCE_KIND") == "postgres":
            self.service = PostgresRows(env("FENCECHECK_RESOURCE_DSN", program), self.me, program)
        else:
            self.service = Service(env("FENCECHECK_RESOURCE_URL", program), self.me)
        self.segment = 0  # the segment being written: a holding that stops redoes it from chunk 0

    def run(self, token):
        """Writes the rest of the job under `token`. None when done; else the outcome that stopped
        it (fenced, invalid, unknown): the holder must stop, take the lock again and call run() with
        the new token, which redoes the current segment. A rejected token is never sent again."""
        while self.segment < self.segments:
            for c in range(self.chunks):
                emit("write.invoke", key=self.key, segment=self.segment, chunk=c, token=token)
                data = chunk_bytes(self.me, token, self.key, self.segment, c, self.chunk_bytes)
                outcome, mark, detail = self.service.put_chunk(self.key, self.segment, c, token, data)
                fields = dict(key=self.key, segment=self.segment, chunk=c, token=token)
                if mark is not None:
                    fields["high_water"] = mark
                if outcome != "ok":
                    emit("write.info" if outcome == "unknown" else "write.fail", detail=detail, **fields)
                    return outcome
                emit("write.ok", **fields)
                time.sleep(self.interval)
            self.segment += 1
        return None


def start(program="worker.py"):
    """The start every example shares: `--broken` or `--correct` from argv, the lock and the job
    from the environment, then the protocol's hello. Exits (status 1) for a job kind other than
    segments. Returns broken, lock_name, ttl (whole seconds), job and lock_endpoint (the first of
    FENCECHECK_LOCK_ENDPOINTS, split by urllib.parse.urlsplit)."""
    if len(sys.argv) != 2 or sys.argv[1] not in ("--broken", "--correct"):
        sys.exit(f"usage: {program} --broken|--correct")
    w = types.SimpleNamespace(broken=sys.argv[1] == "--broken", lock_name=env("FENCECHECK_LOCK_NAME", program),
                              ttl=int(env("FENCECHECK_LEASE_TTL_S", program)), job=Job(program))
    w.lock_endpoint = urllib.parse.urlsplit(env("FENCECHECK_LOCK_ENDPOINTS", program).split(",")[0])
    emit("hello", protocol=1)
    if os.environ.get("FENCECHECK_JOB_KIND", "segments") != "segments":
        sys.exit(give_up(f"job kind {os.environ['FENCECHECK_JOB_KIND']!r}: this worker writes segments of chunks only",
                         program))
    return w


def holdings(hold, tries=20, program="worker.py"):
    """The worker's life: hold() takes the lock once, writes what is left of the job and lets go.
    It returns None when the job is done, else why it must take the lock again (a write fenced
    out: never again under that token). Exit status: 0 done (hold() said job.done), 1 gave up
    after `tries` holdings (job.gave_up says so first)."""
    for attempt in range(1, tries + 1):
        why = hold()
        if why is None:
            return 0
        print(f"{program}: attempt {attempt}: {why}; re-acquiring", file=sys.stderr)
    return give_up(f"{tries} holdings and the job is not done (the last: {why})", program)
