#!/usr/bin/env node
// A fencecheck worker written the way a team using node-redlock (npm `redlock`, with `ioredis`)
// would write it (README.md; docs/lock-service-redlock.md).
//
//   node worker.js --broken    node-redlock as it comes: acquire([lock], ttl) on every master,
//                              extended every TTL/3; Redlock hands out no token, the service wants
//                              a Fencing-Token header, and the naive client sends 1 on every write
//   node worker.js --correct   the same lock, and a fencing token from a linearizable counter
//                              (Kleppmann 2016, "How to do distributed locking": Redlock has none):
//                              the revision etcd gives a put of "<lock>/fence"
//                              (FENCECHECK_TOKEN_COUNTER, the embedded etcd beside the masters).
//                              On a 409 it stops, releases, acquires again and redoes its segment.
"use strict";

const { default: Redlock, ExecutionError } = require("redlock");
const Redis = require("ioredis");
const { env, emit, giveUp, Job, sleep } = require("./fencecheck.js");

function parseArgs(argv) {
  if (argv.length !== 1 || (argv[0] !== "--broken" && argv[0] !== "--correct")) {
    process.stderr.write("usage: node worker.js --broken|--correct\n");
    process.exit(2);
  }
  return { broken: argv[0] === "--broken" };
}

/** A client per master. The worker starts once every master is ready, or once a majority is and
 * 1 s has passed: a master that is down then (killed, restarting) is a vote against at once
 * (enableOfflineQueue: false), as Redlock wants, rather than a wait; ioredis reconnects to it in
 * the background. */
async function clients(urls) {
  const made = urls.map((url) => new Redis(url, {
    enableOfflineQueue: false, maxRetriesPerRequest: 0, connectTimeout: 1000,
    retryStrategy: (n) => Math.min(50 * n, 500),
  }));
  made.forEach((c) => c.on("error", () => {}));  // a down master: its votes fail, ioredis retries
  const quorum = Math.floor(urls.length / 2) + 1;
  const started = Date.now();
  for (;;) {
    const ready = made.filter((c) => c.status === "ready").length;
    if (ready === made.length || (ready >= quorum && Date.now() - started >= 1000)) return made;
    if (Date.now() - started > 30000) throw new Error(`only ${ready} of ${urls.length} masters ready within 30 s`);
    await sleep(20);
  }
}

/** The token: the etcd store revision of a put of "<lock>/fence", from etcd's JSON gateway. */
async function fenceToken(counter, lock, me) {
  const b64 = (s) => Buffer.from(s).toString("base64");
  const res = await fetch(`${counter}/v3/kv/put`, {
    method: "POST", body: JSON.stringify({ key: b64(`${lock}/fence`), value: b64(me) }),
    signal: AbortSignal.timeout(5000),
  });
  if (!res.ok) throw new Error(`etcd put answered HTTP ${res.status}`);
  const body = await res.json();
  const revision = Number(body?.header?.revision);
  if (!Number.isSafeInteger(revision) || revision <= 0) throw new Error(`etcd put gave no revision: ${JSON.stringify(body)}`);
  return revision;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const lockName = env("FENCECHECK_LOCK_NAME");
  const ttl = Number(env("FENCECHECK_LEASE_TTL_MS"));
  const urls = env("FENCECHECK_LOCK_ENDPOINTS").split(",");
  const counter = process.env.FENCECHECK_TOKEN_COUNTER;
  const job = new Job();
  emit("hello", { protocol: 1 });
  if ((process.env.FENCECHECK_JOB_KIND || "segments") !== "segments") {
    return giveUp(`job kind ${process.env.FENCECHECK_JOB_KIND}: this worker writes segments of chunks only`);
  }
  if (!args.broken && !counter) {
    return giveUp("--correct needs a token counter (FENCECHECK_TOKEN_COUNTER: lock_service.counter etcd)");
  }
  const redlock = new Redlock(await clients(urls), {
    driftFactor: Number(process.env.REDLOCK_DRIFT_FACTOR || "0.01"),
    // One attempt per acquire(): node-redlock's own retries keep the keys a failed attempt set on
    // a minority, and its acquire script refuses any existing key, its own too, so those keys
    // vote against every retry until they expire. acquire() with retryCount 0 undoes a failed
    // attempt's keys before it throws; the loop below retries (README.md).
    retryCount: 0,
  });
  redlock.on("error", () => {});  // a master's failed vote: counted by the quorum, said by acquire's error

  const hold = async () => {
    emit("acquire.invoke", { lock: lockName, ttl_ms: ttl });
    let lock;
    const deadline = Date.now() + 60000;
    for (;;) {
      try {
        lock = await redlock.acquire([lockName], ttl);
        break;
      } catch (e) {
        if (!(e instanceof ExecutionError) || Date.now() > deadline) {
          emit("acquire.fail", { lock: lockName, detail: `${e.name}: ${e.message}` });
          return `not acquired: ${e.message}`;
        }
        await sleep(100 + Math.floor(Math.random() * 50));  // node-redlock's retryDelay and retryJitter
      }
    }
    // Redlock's step 3: the lock counts only if time is left of its validity (TTL minus the
    // acquisition's time minus the drift: lock.expiration); node-redlock does not check it itself.
    if (Date.now() >= lock.expiration) {
      await redlock.release(lock, { retryCount: 0 }).catch(() => {});
      emit("acquire.fail", { lock: lockName, detail: "acquired after its validity had run out" });
      return "acquired after its validity had run out";
    }
    let token = 1;  // --broken: the same number on every write, whoever holds the lock
    if (!args.broken) {
      try {
        token = await fenceToken(counter, lockName, job.me);
      } catch (e) {
        await redlock.release(lock, { retryCount: 0 }).catch(() => {});
        emit("acquire.fail", { lock: lockName, detail: `no fencing token: ${e.message}` });
        return `no fencing token: ${e.message}`;
      }
    }
    emit("acquire.ok", { lock: lockName, lock_key: lockName, token, ttl_ms: ttl });
    // Extend three times a TTL, as long as the holding is ours (node-redlock's extend refuses an
    // expired lock and needs a quorum again).
    let extending = true;
    const extender = (async () => {
      while (extending) {
        await sleep(ttl / 3);
        if (!extending) break;
        try {
          lock = await redlock.extend(lock, ttl, { retryCount: 0 });  // once: a lost quorum stays lost
        } catch (e) {
          emit("lease.lost", { token, detail: `extend: ${e instanceof ExecutionError ? "no quorum" : e.message}` });
          return;
        }
      }
    })();

    const stopped = await job.run(token);
    if (stopped === null) emit("job.done", { token });
    extending = false;
    await extender;
    emit("release.invoke", { lock_key: lockName, token });
    try {
      await redlock.release(lock, { retryCount: 0 });  // once: keys that expired do not come back
      emit("release.ok", { lock_key: lockName, token });
    } catch (e) {
      emit("release.fail", { lock_key: lockName, detail: `${e.name}: ${e.message} (expired on a majority)` });
    }
    return stopped === null ? null : `write ${stopped} under token ${token}`;
  };

  let why = null;
  for (let attempt = 1; attempt <= 20; attempt++) {
    why = await hold();
    if (why === null) return 0;
    process.stderr.write(`worker.js: attempt ${attempt}: ${why}; re-acquiring\n`);
  }
  return giveUp(`20 holdings and the job is not done (the last: ${why})`);
}

main().then((code) => process.exit(code), (e) => {
  process.stderr.write(`worker.js: ${e.stack || e}\n`);
  process.exit(3);
});
