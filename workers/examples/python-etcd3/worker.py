#!/usr/bin/python3
"""A fencecheck worker written the way a team using python-etcd3's Lock would write it.

  worker.py --broken    the lock, and the constant token a naive client sends (python-etcd3's Lock
                        hands out no token; the service wants a Fencing-Token header; it gets 1)
  worker.py --correct   the lock key's create_revision as the token; on a 409 it stops,
                        re-acquires and redoes its segment under the new token

It speaks fencecheck's worker protocol v1 (env vars in, JSON event lines out on fd 3) and writes
the job's chunks to an HTTP service with the store's API (docs/resource-http.md), through
../python-common/fencecheck_example.py. Standard library plus Debian's python3-etcd3; run it with
/usr/bin/python3 (see README.md).
"""
import os
import sys
import threading
import time

import etcd3

# The worker protocol, the chunks, the HTTP service and the job: shared by the Python examples.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "python-common"))
from fencecheck_example import emit, give_up, holdings, start  # noqa: E402

LOCK_PREFIX = "/locks/"  # python-etcd3 keeps the lock named N at the key /locks/N (etcd3.Lock.lock_prefix)
BROKEN_TOKEN = 1         # what the broken worker sends on every write, whoever holds the lock


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
    w = start()
    broken, lock_name, ttl, job = w.broken, w.lock_name, w.ttl, w.job
    # python-etcd3 puts the lock named N at the key /locks/N itself. fencecheck watches the lock
    # name's own key and the keys under it, so the scenario names its lock /locks/<something>, says
    # `client: python-etcd3`, and hands us <something> in FENCECHECK_LOCK_CLIENT_NAME (with
    # run_suffix: <something>/<run id>): the key python-etcd3 makes is exactly the scenario's lock.
    client_name = os.environ.get("FENCECHECK_LOCK_CLIENT_NAME")
    if client_name is None:
        if not lock_name.startswith(LOCK_PREFIX):
            return give_up(f"the lock name {lock_name!r} is not under {LOCK_PREFIX}, where python-etcd3 keeps its "
                           f"locks: name the scenario's lock {LOCK_PREFIX}<something> (and say client: python-etcd3)")
        client_name = lock_name[len(LOCK_PREFIX):]
    endpoint = w.lock_endpoint
    client = etcd3.client(host=endpoint.hostname, port=endpoint.port or 2379)

    def hold():
        emit("acquire.invoke", lock=lock_name, ttl_ms=ttl * 1000)
        lock = etcd3.Lock(client_name, ttl=ttl, etcd_client=client)
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
                return "the lock key was not ours"
            token = meta.create_revision
        emit("acquire.ok", lock=lock_name, lock_key=lock.key, token=token, lease_id=lock.lease.id)
        refresher = Refresher(lock, ttl)
        refresher.start()

        stopped = job.run(token)
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
        return None if stopped is None else f"write {stopped} under token {token}"

    return holdings(hold)


if __name__ == "__main__":
    sys.exit(main())
