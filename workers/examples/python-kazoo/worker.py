#!/usr/bin/python3
"""A fencecheck worker written the way a team using kazoo's Lock recipe would write it.

  worker.py --broken    kazoo's Lock, and the constant token a naive client sends (the recipe hands
                        out no token; the service wants a Fencing-Token header; it gets 1)
  worker.py --correct   the lock znode's czxid (the zxid of its create) as the token; on a 409 it
                        stops, re-acquires and redoes its segment under the new token

It speaks fencecheck's worker protocol v1 (../python-common/fencecheck_example.py) and writes the
job's chunks to an HTTP service with the store's API. Debian's python3-kazoo (2.8); run it with
/usr/bin/python3 (see README.md).
"""
import os
import sys
import threading

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, LockTimeout, NoNodeError

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "python-common"))
from fencecheck_example import emit, give_up, holdings, start  # noqa: E402

BROKEN_TOKEN = 1  # what the broken worker sends on every write, whoever holds the lock


class SessionWatch:
    """Turns kazoo's connection states into the protocol's lease events. kazoo calls the listener on
    its own thread: SUSPENDED (connection lost: whether the server still counts the session is
    unknown), LOST (the session expired; kazoo opens a new one by itself), CONNECTED."""

    def __init__(self, zk):
        self.zk = zk
        self.session = zk.client_id[0]
        self.lost = threading.Event()

    def __call__(self, state):
        if state == KazooState.SUSPENDED:
            emit("keepalive.fail", lease_id=self.session, detail="kazoo: connection SUSPENDED")
        elif state == KazooState.LOST and not self.lost.is_set():
            self.lost.set()
            emit("lease.lost", lease_id=self.session)
        return False  # stay registered


def main():
    w = start()
    broken, ttl, job = w.broken, w.ttl, w.job
    # The scenario's lock name "fencecheck/x" is the znode /fencecheck/x (what fencecheck watches).
    lock_name = w.lock_name.rstrip("/")
    # `client: kazoo` hands the znode's path in FENCECHECK_LOCK_CLIENT_NAME ("/" + the lock).
    lock_path = os.environ.get("FENCECHECK_LOCK_CLIENT_NAME") or (lock_name if lock_name.startswith("/") else "/" + lock_name)
    # ZOOKEEPER_HOSTS: the connection string, "h:p,h:p" (FENCECHECK_LOCK_ENDPOINTS spells it the same).
    hosts = os.environ.get("ZOOKEEPER_HOSTS") or os.environ["FENCECHECK_LOCK_ENDPOINTS"]
    # ZOOKEEPER_FIRST_SERVER=N (the scenario's workers[].env; 1-based): connect to the Nth server of
    # an ensemble first and move through the others in order (kazoo's randomize_hosts=False), so a
    # scenario knows which server its holder talks to. Unset: kazoo's own random order.
    first = os.environ.get("ZOOKEEPER_FIRST_SERVER")
    randomize = not first
    if first:
        servers = hosts.split(",")
        n = int(first)
        if not 1 <= n <= len(servers):
            return give_up(f"ZOOKEEPER_FIRST_SERVER={first}: the connection string has {len(servers)} servers")
        hosts = ",".join(servers[n - 1:] + servers[:n - 1])

    def hold():
        # One session per holding: the session timeout is the lease (kazoo asks for `timeout`).
        zk = KazooClient(hosts=hosts, timeout=float(ttl), randomize_hosts=randomize)
        zk.start(timeout=10)
        watch = SessionWatch(zk)
        zk.add_listener(watch)
        try:
            return hold_with(zk, watch)
        finally:
            zk.remove_listener(watch)  # kazoo's stop() ends the session through LOST: a close, not a loss
            zk.stop()
            zk.close()

    def hold_with(zk, watch):
        emit("acquire.invoke", lock=lock_name, ttl_ms=ttl * 1000)
        lock = zk.Lock(lock_path, identifier=job.me)
        try:
            lock.acquire(timeout=30)
        except LockTimeout:
            emit("acquire.fail", lock=lock_name, detail="kazoo: LockTimeout after 30 s")
            return "not acquired within 30 s"
        node = lock.path + "/" + lock.node
        lock_key = lock_name + "/" + lock.node
        if broken:
            token = BROKEN_TOKEN
        else:
            # The lock znode's czxid: every change to ZooKeeper gets a zxid, totally ordered, and a
            # new holder's znode was created after the previous holder's, so it orders holders.
            stat = zk.exists(node)
            if stat is None or stat.ephemeralOwner != watch.session:
                emit("acquire.fail", lock=lock_name, detail="the lock znode was not ours when read back")
                return "the lock znode was not ours"
            token = stat.czxid
        emit("acquire.ok", lock=lock_name, lock_key=lock_key, token=token, lease_id=watch.session)

        stopped = job.run(token)
        if stopped is None:
            emit("job.done", token=token)
        emit("release.invoke", lock_key=lock_key, token=token, lease_id=watch.session)
        # kazoo's release() deletes the znode by name and also says True when it was already gone
        # (its session expired): ask first whether the znode is still this session's.
        try:
            stat = zk.exists(node)
            ours = stat is not None and stat.ephemeralOwner == watch.session and not watch.lost.is_set()
            lock.release()
        except (KazooException, NoNodeError) as e:
            emit("release.fail", lock_key=lock_key, detail=f"{type(e).__name__}: {e}")
        else:
            if ours:
                emit("release.ok", lock_key=lock_key, token=token)
            else:
                emit("release.fail", lock_key=lock_key, detail="the lock znode was gone (the session expired)")
        return None if stopped is None else f"write {stopped} under token {token}"

    return holdings(hold)


if __name__ == "__main__":
    sys.exit(main())
