#!/usr/bin/python3
"""A fencecheck worker written the way a team using redis-py's Lock would write it.

  worker.py --broken    redis-py's Lock as it comes: SET NX PX with a random value, renewed by a
                        thread; it hands out no token, the service wants a Fencing-Token header, and
                        the naive client sends 1 on every write
  worker.py --correct   the same Lock with its acquire replaced by one Lua script that also INCRs
                        the counter "<lock>:fence" when (and only when) it set the key; that number
                        is the token. On a 409 it stops, re-acquires and redoes its segment

It speaks fencecheck's worker protocol v1 (env vars in, JSON event lines out on fd 3) and writes
the job's chunks to an HTTP service with the store's API (docs/resource-http.md), through
../python-common/fencecheck_example.py. Standard library plus Debian's python3-redis; run it with
/usr/bin/python3 (see README.md).
"""
import os
import sys
import threading

import redis
from redis.exceptions import LockNotOwnedError

# The worker protocol, the chunks, the HTTP service and the job: shared by the Python examples.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "python-common"))
from fencecheck_example import emit, holdings, start  # noqa: E402

BROKEN_TOKEN = 1  # what the broken worker sends on every write, whoever holds the lock


class FencedLock(redis.lock.Lock):
    """redis-py's Lock whose acquire also takes a fencing token (the shape of Redisson's
    RFencedLock and bsm/redislock's FenceKey): in ONE script, SET the key NX PX with
    "<random token>:<fence>" and, only when it was set, INCR "<name>:fence" to that fence. Release
    and renewal are Lock's own owner-checked scripts, comparing the whole stored value."""

    LUA_ACQUIRE_FENCED = """
        local fence = tonumber(redis.call('GET', KEYS[2]) or '0') + 1
        local value = ARGV[1] .. ':' .. fence
        if redis.call('SET', KEYS[1], value, 'NX', 'PX', ARGV[2]) then
            redis.call('INCR', KEYS[2])
            return fence
        end
        return false
    """

    def __init__(self, client, name, **kwargs):
        super().__init__(client, name, **kwargs)
        self.lua_acquire_fenced = client.register_script(self.LUA_ACQUIRE_FENCED)
        self.fence = None
        self._value = None

    def do_acquire(self, token):
        fence = self.lua_acquire_fenced(keys=[self.name, self.name + ":fence"],
                                        args=[token, int(self.timeout * 1000)], client=self.redis)
        if not fence:
            return False
        self.fence = int(fence)
        self._value = token + b":" + str(self.fence).encode()
        return True

    def acquire(self, *args, **kwargs):
        if not super().acquire(*args, **kwargs):
            return False
        self.local.token = self._value  # Lock keeps the random part; the key holds "<random>:<fence>"
        return True


class Renewer(threading.Thread):
    """redis-py's Lock does not renew itself: the holder calls lock.reacquire() (an owner-checked
    PEXPIRE back to the full TTL) three times a TTL, as Redisson's watchdog does, until told to stop
    or the key is no longer its own."""

    def __init__(self, lock, ttl_s, fence):
        super().__init__(daemon=True)
        self.lock, self.period, self.fence, self.done = lock, ttl_s / 3.0, fence, threading.Event()

    def run(self):
        while not self.done.wait(self.period):
            try:
                self.lock.reacquire()
            except LockNotOwnedError:
                emit("lease.lost", token=self.fence, detail="reacquire: the lock key is gone or another holder's")
                return
            except Exception as e:  # noqa: BLE001 - a failed round trip leaves the key's state unknown
                emit("keepalive.fail", token=self.fence, detail=f"{type(e).__name__}: {e}")


def main():
    w = start()
    broken, lock_name, ttl, job = w.broken, w.lock_name, w.ttl, w.job
    endpoint = w.lock_endpoint
    client = redis.Redis(host=endpoint.hostname, port=endpoint.port or 6379, socket_timeout=5)

    def hold():
        emit("acquire.invoke", lock=lock_name, ttl_ms=ttl * 1000)
        # thread_local=False: the renewal thread must see the token the main thread acquired with
        # (redis-py keeps it thread-local by default, and reacquire() from another thread would
        # say "Cannot reacquire an unlocked lock").
        kind = redis.lock.Lock if broken else FencedLock
        lock = kind(client, lock_name, timeout=ttl, sleep=0.05, thread_local=False)
        if not lock.acquire(blocking_timeout=30):
            emit("acquire.fail", lock=lock_name, detail="not acquired within 30 s")
            return "not acquired within 30 s"
        token = BROKEN_TOKEN if broken else lock.fence
        emit("acquire.ok", lock=lock_name, lock_key=lock_name, token=token)
        renewer = Renewer(lock, ttl, token)
        renewer.start()

        stopped = job.run(token)
        if stopped is None:
            emit("job.done", token=token)
        renewer.done.set()
        renewer.join()
        emit("release.invoke", lock_key=lock_name, token=token)
        try:
            lock.release()  # Lock's script: DEL only while the key still holds our value
        except LockNotOwnedError:
            emit("release.fail", lock_key=lock_name, detail="the lock key no longer holds our value (expired)")
        except Exception as e:  # noqa: BLE001
            emit("release.fail", lock_key=lock_name, detail=f"{type(e).__name__}: {e}")
        else:
            emit("release.ok", lock_key=lock_name, token=token)
        return None if stopped is None else f"write {stopped} under token {token}"

    return holdings(hold)


if __name__ == "__main__":
    sys.exit(main())
