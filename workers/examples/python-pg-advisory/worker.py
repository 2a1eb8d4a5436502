#!/usr/bin/python3
"""A fencecheck worker that locks with a PostgreSQL advisory lock, the way a team without a lock
service does: the lock is held by a database session, and the server's idle_session_timeout ends
a session that has been idle too long, and its lock with it. That timeout is the lease: the holder
renews it by touching its lock session before every write. fencecheck manages none of this
(lock_service: {kind: none}).

  worker.py --broken    the token is a constant (1); when the lock session is gone it opens a new
                        one and keeps writing, trusting that it still holds the lock; its writes
                        compare no token
  worker.py --correct   the token is nextval of a sequence, taken in the lock session right after
                        pg_advisory_lock returned; every write is conditional on it (the key's fence
                        row only moves upwards, in the statement that writes the chunk); when its
                        lock session is gone, or a write is rejected, it stops, takes the lock
                        again with a new token and redoes its segment

  worker.py ... --scenario-write
                        the same token logic, but each write runs the scenario's own `write`
                        statement(s), handed over in FENCECHECK_PG_WRITE_* (ScenarioWrite), instead
                        of this program's SQL: the SQL fencecheck's probe tests is the SQL the run
                        tests

It speaks fencecheck's worker protocol v1 (FENCECHECK_* in, JSON event lines out on fd 3) and
writes to the run's PostgreSQL (FENCECHECK_RESOURCE_DSN), the tables the scenario's schema declares.
What it writes is fencecheck's self-describing chunks, or with the scenario's `job.payload: opaque`
(FENCECHECK_JOB_PAYLOAD) one JSON document per row, the team's own bytes.
Standard library plus Debian's python3-psycopg2; run it with /usr/bin/python3 (README.md).
"""
import os
import sys
import time
import zlib

import psycopg2

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "python-common"))
from fencecheck_example import ScenarioWrite, chunk_bytes, emit, env, give_up  # noqa: E402

BROKEN_TOKEN = 1  # what the broken worker writes with, whoever holds the lock

# One statement per write: the key's fence row first, then the chunk and its accept-log entry only
# when the fence row was written (1 row = accepted, 0 = rejected). The two designs differ in one
# line: the broken one records the token but compares it with nothing.
FENCE_SQL = """WITH fenced AS (
  INSERT INTO fencecheck_fence AS fence (key, token) VALUES (%(key)s, %(token)s)
  ON CONFLICT (key) DO UPDATE SET token = EXCLUDED.token
  {where}
  RETURNING fence.key
), stored AS (
  INSERT INTO fencecheck_chunks (key, segment, chunk, token, writer, data)
  SELECT %(key)s, %(segment)s, %(chunk)s, %(token)s, %(writer)s, %(data)s FROM fenced
  ON CONFLICT (key, segment, chunk) DO UPDATE
  SET token = EXCLUDED.token, writer = EXCLUDED.writer, data = EXCLUDED.data
)
INSERT INTO fencecheck_accept_log (key, segment, chunk, token, writer)
SELECT %(key)s, %(segment)s, %(chunk)s, %(token)s, %(writer)s FROM fenced"""
BROKEN_SQL = FENCE_SQL.format(where="")
CORRECT_SQL = FENCE_SQL.format(where="WHERE fence.token <= EXCLUDED.token")


def connect(dsn):
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    return conn


class LockSession:
    """The advisory lock's session: pg_advisory_lock(id) holds the lock until the session ends.
    idle_session_timeout (the lease TTL) makes the server end it, and so release the lock, when the
    holder has not touched it for that long (PostgreSQL 14 and later)."""

    def __init__(self, dsn, lock_id, ttl_ms):
        self.conn = connect(dsn)
        self.cur = self.conn.cursor()
        self.cur.execute("SET idle_session_timeout = %s", (ttl_ms,))
        self.cur.execute("SELECT pg_backend_pid()")
        self.pid = self.cur.fetchone()[0]
        self.lock_id = lock_id

    def lock(self):
        self.cur.execute("SELECT pg_advisory_lock(%s)", (self.lock_id,))  # waits until granted

    def touch(self):
        """The renewal: raises psycopg2.Error when the server has ended the session (and its lock)."""
        self.cur.execute("SELECT 1")

    def unlock(self):
        self.cur.execute("SELECT pg_advisory_unlock(%s)", (self.lock_id,))
        return self.cur.fetchone()[0]

    def close(self):
        try:
            self.conn.close()
        except psycopg2.Error:
            pass


def main():
    usage = "usage: worker.py --broken|--correct [--scenario-write]"
    if len(sys.argv) not in (2, 3) or sys.argv[1] not in ("--broken", "--correct"):
        sys.exit(usage)
    if len(sys.argv) == 3 and sys.argv[2] != "--scenario-write":
        sys.exit(usage)
    broken = sys.argv[1] == "--broken"
    scenario_write = len(sys.argv) == 3
    dsn = env("FENCECHECK_RESOURCE_DSN")
    me, key, lock_name = env("FENCECHECK_WORKER_ID"), env("FENCECHECK_KEY"), env("FENCECHECK_LOCK_NAME")
    segments, chunks = int(env("FENCECHECK_JOB_SEGMENTS")), int(env("FENCECHECK_JOB_CHUNKS"))
    size = int(env("FENCECHECK_CHUNK_BYTES"))
    interval = int(env("FENCECHECK_CHUNK_INTERVAL_MS")) / 1000.0
    ttl_ms = int(env("FENCECHECK_LEASE_TTL_MS"))
    lock_id = zlib.crc32(lock_name.encode())  # the advisory lock's bigint key, the same in every worker
    emit("hello", protocol=1)
    if os.environ.get("FENCECHECK_JOB_KIND", "segments") != "segments":
        return give_up(f"job kind {os.environ['FENCECHECK_JOB_KIND']!r}: this worker writes segments of chunks only")
    sql = BROKEN_SQL if broken else CORRECT_SQL

    def data_session():
        """The session the rows go to, and how a row is written on it: the scenario's statement(s)
        prepared on it (--scenario-write), or this program's own SQL."""
        conn = connect(dsn)
        if scenario_write:
            statement = ScenarioWrite(conn)
            return conn, lambda params: statement.write(**params)

        def own(params):
            with conn.cursor() as cur:
                cur.execute(sql, params)
                return "accepted" if cur.rowcount >= 1 else "rejected"
        return conn, own

    data, write = data_session()
    segment = 0
    for attempt in range(1, 21):
        emit("acquire.invoke", lock=lock_name, ttl_ms=ttl_ms)
        session = LockSession(dsn, lock_id, ttl_ms)
        session.lock()
        if broken:
            token = BROKEN_TOKEN
        else:
            session.cur.execute("SELECT nextval('fencecheck_lock_token')")
            token = session.cur.fetchone()[0]
        lock_key = f"{lock_name}/pid-{session.pid}"
        emit("acquire.ok", lock=lock_name, lock_key=lock_key, token=token, lease_id=session.pid, ttl_ms=ttl_ms)
        stopped = None
        while segment < segments and stopped is None:
            for c in range(chunks):
                try:
                    session.touch()
                except psycopg2.Error as e:
                    emit("lease.lost", token=token, lease_id=session.pid, detail=f"{type(e).__name__}: {e}".strip())
                    if not broken:
                        stopped = "the lock session is gone"
                        break
                    # broken: a new session, and on it goes, as if it still held the lock
                    session.close()
                    session = LockSession(dsn, lock_id, ttl_ms)
                fields = dict(key=key, segment=segment, chunk=c, token=token)
                emit("write.invoke", **fields)
                params = dict(key=key, segment=segment, chunk=c, token=token, writer=me,
                              data=chunk_bytes(me, token, key, segment, c, size))
                try:
                    outcome = write(params)
                    with data.cursor() as cur:
                        cur.execute("SELECT token FROM fencecheck_fence WHERE key = %s", (key,))
                        row = cur.fetchone()
                except psycopg2.Error as e:
                    outcome, row = "unknown", None
                    detail = f"{type(e).__name__}: {e}".strip()
                    data.close()
                    data, write = data_session()
                else:
                    detail = "the statement reported no row count"
                if outcome == "unknown":
                    emit("write.info", detail=detail, **fields)
                    stopped = "a write's outcome is unknown"
                    break
                mark = row[0] if row else None
                if outcome == "accepted":
                    emit("write.ok", **fields)
                else:
                    emit("write.fail", high_water=mark, detail=f"fenced: token {token} is below the key's mark {mark}",
                         **fields)
                    stopped = f"write fenced out under token {token}"
                    break
                time.sleep(interval)
            else:
                segment += 1
        if stopped is None:
            emit("job.done", token=token)
        emit("release.invoke", lock_key=lock_key, token=token, lease_id=session.pid)
        try:
            held = session.unlock()
        except psycopg2.Error as e:
            emit("release.fail", lock_key=lock_key, token=token, detail=f"{type(e).__name__}: {e}".strip())
        else:
            if held:
                emit("release.ok", lock_key=lock_key, token=token)
            else:
                emit("release.fail", lock_key=lock_key, token=token, detail="this session did not hold the lock")
        session.close()
        if stopped is None:
            return 0
        print(f"worker.py: attempt {attempt}: {stopped}; taking the lock again", file=sys.stderr)
    return give_up(f"20 holdings and the job is not done (the last: {stopped})")


if __name__ == "__main__":
    sys.exit(main())
