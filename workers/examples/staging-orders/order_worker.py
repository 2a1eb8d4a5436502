#!/usr/bin/python3
"""The order service a team runs, as a plain service loop: take the etcd lock (python-etcd3),
pack the order's shipments into PostgreSQL as JSON rows (psycopg2), let go. Self-contained.

  order_worker.py --broken    sends the constant token 1 on every write: python-etcd3's Lock
                              hands out no token, and the naive client does not read one back
  order_worker.py --correct   the token is the lock key's create_revision, read back after each
                              acquire; a rejected write stops the holding, the lock is taken
                              again and the order's current batch is redone under the new token
                              (a rejected token is never sent again)

Adapted to fencecheck by the documented minimum (docs/worker-protocol.md): the endpoints, the lock,
the DSN, the write statement and the order come from the environment, and a few event lines go to
fd 3 (hello, acquire.*, write.*, release.*, job.done). Run it with /usr/bin/python3 (Debian's
python3-etcd3 and python3-psycopg2).
"""
import json
import os
import sys
import time
import urllib.parse

import etcd3
import psycopg2

EVENTS = int(os.environ.get("FENCECHECK_EVENTS_FD", "3"))


def emit(kind, **fields):
    """One worker-protocol event: a JSON line in one write(2)."""
    os.write(EVENTS, (json.dumps({"kind": kind, **fields}, separators=(",", ":")) + "\n").encode())


def env(name):
    value = os.environ.get(name)
    if not value:
        sys.exit(f"order_worker.py: {name} is not set (run me under fencecheck)")
    return value


class Shipments:
    """The shipments table, written through the scenario's own write statement (the one copy of
    the fencing SQL: FENCECHECK_PG_WRITE_1_POSITIONAL, parameters FENCECHECK_PG_WRITE_PARAMS of
    types FENCECHECK_PG_WRITE_TYPES; docs/resource-postgres.md). One connection, made again after
    an error. write() returns "accepted", "rejected" (no row changed) or raises."""

    def __init__(self, dsn, me):
        if env("FENCECHECK_PG_WRITE_COUNT") != "1":
            sys.exit("order_worker.py: this service writes with one statement (FENCECHECK_PG_WRITE_COUNT is not 1)")
        self.dsn, self.me, self.conn = dsn, me, None
        self.params = env("FENCECHECK_PG_WRITE_PARAMS").split(",")
        # The order's fence mark, reported with a rejection (write.fail's high_water): the
        # resource's high_water query (key, token rows; $keys: the keys asked about).
        self.high_water = json.loads(os.environ.get("FENCECHECK_RESOURCE") or "{}").get("high_water")

    def write(self, **values):
        if self.conn is None:
            self.conn = psycopg2.connect(self.dsn)
            self.conn.autocommit = True
            with self.conn.cursor() as cur:  # no parameters: psycopg2 leaves the text's % alone
                cur.execute(f"PREPARE ship ({env('FENCECHECK_PG_WRITE_TYPES')}) AS {env('FENCECHECK_PG_WRITE_1_POSITIONAL')}")
                if self.high_water:
                    cur.execute(f"PREPARE mark (text[]) AS {self.high_water.replace('$keys', '$1')}")
        try:
            with self.conn.cursor() as cur:
                cur.execute("EXECUTE ship (" + ", ".join(["%s"] * len(self.params)) + ")",
                            [values[p] for p in self.params])
                return "accepted" if cur.rowcount >= 1 else "rejected"
        except psycopg2.Error:
            self.conn.close()
            self.conn = None
            raise

    def mark(self, key):
        """The key's fence mark after a rejection; 0 when the resource has no high_water query or
        it failed (the rejection stands, only its mark is not known)."""
        try:
            with self.conn.cursor() as cur:
                cur.execute("EXECUTE mark (%s)", [[key]])
                return next((int(t) for k, t in cur.fetchall() if k == key), 0)
        except (psycopg2.Error, AttributeError):
            return 0


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ("--broken", "--correct"):
        sys.exit("usage: order_worker.py --broken|--correct")
    broken = sys.argv[1] == "--broken"
    me, order = env("FENCECHECK_WORKER_ID"), env("FENCECHECK_KEY")
    batches, per_batch = int(env("FENCECHECK_JOB_SEGMENTS")), int(env("FENCECHECK_JOB_CHUNKS"))
    pace = int(env("FENCECHECK_CHUNK_INTERVAL_MS")) / 1000.0
    ttl = int(env("FENCECHECK_LEASE_TTL_S"))
    lock_name = env("FENCECHECK_LOCK_NAME")
    # python-etcd3 keeps lock N at /locks/N: the scenario's lock is /locks/<N>, we are told <N>.
    name = os.environ.get("FENCECHECK_LOCK_CLIENT_NAME") or lock_name.removeprefix("/locks/")
    endpoint = urllib.parse.urlsplit(env("FENCECHECK_LOCK_ENDPOINTS").split(",")[0])
    client = etcd3.client(host=endpoint.hostname, port=endpoint.port or 2379)
    table = Shipments(env("FENCECHECK_RESOURCE_DSN"), me)
    emit("hello", protocol=1)

    batch = 0
    for _ in range(20):  # holdings
        emit("acquire.invoke", lock=lock_name, ttl_ms=ttl * 1000)
        lock = etcd3.Lock(name, ttl=ttl, etcd_client=client)
        # Polled try-lock: python-etcd3 0.12's waiting acquire() raises TypeError under Debian 12's
        # tenacity 8.2 (kragniz/python-etcd3#2149); timeout=0 never reaches that code.
        while not lock.acquire(timeout=0):
            time.sleep(0.05)
        if broken:
            token = 1
        else:
            value, meta = client.get(lock.key)
            if value != lock.uuid:  # lost between the acquire and this read
                emit("acquire.fail", lock=lock_name, detail="the lock key was not ours when read back")
                continue
            token = meta.create_revision
        emit("acquire.ok", lock=lock_name, lock_key=lock.key, token=token, lease_id=lock.lease.id)
        stopped = None
        while batch < batches and stopped is None:
            for n in range(per_batch):
                slot = dict(key=order, segment=batch, chunk=n, token=token)
                row = json.dumps({"order": order, "shipment": {"batch": batch, "item": n, "packed_by": me}}).encode()
                emit("write.invoke", **slot)
                try:
                    outcome = table.write(key=order, segment=batch, chunk=n, token=token, writer=me, data=row)
                except psycopg2.Error as e:
                    emit("write.info", detail=f"{type(e).__name__}: {e}".strip(), **slot)
                    stopped = "unknown"
                    break
                if outcome == "rejected":
                    emit("write.fail", detail="rejected: the write statement changed no row",
                         high_water=table.mark(order) if table.high_water else 0, **slot)
                    stopped = "rejected"
                    break
                emit("write.ok", **slot)
                # The service keeps its lease alive inline, between shipments (python-etcd3's Lock
                # never refreshes by itself); a refresh that fails is noted, the loop goes on.
                try:
                    lock.refresh()
                except Exception as e:  # noqa: BLE001
                    emit("keepalive.fail", lease_id=lock.lease.id, detail=f"{type(e).__name__}: {e}")
                time.sleep(pace)
            else:
                batch += 1
        if stopped is None:
            emit("job.done", token=token)
        emit("release.invoke", lock_key=lock.key, token=token, lease_id=lock.lease.id)
        try:
            released = lock.release()
        except Exception as e:  # noqa: BLE001
            emit("release.fail", lock_key=lock.key, detail=f"{type(e).__name__}: {e}")
        else:
            if released:
                emit("release.ok", lock_key=lock.key, token=token)
            else:
                emit("release.fail", lock_key=lock.key, detail="the lock key no longer holds our uuid (lease expired)")
        if stopped is None:
            return 0
        print(f"order_worker.py: write {stopped} under token {token}; taking the lock again", file=sys.stderr)
    emit("job.gave_up", detail="20 holdings and the order is not packed")
    return 1


if __name__ == "__main__":
    sys.exit(main())
