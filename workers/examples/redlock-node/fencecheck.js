// What a Node.js fencecheck worker needs apart from its lock: the worker protocol's environment and
// events (docs/worker-protocol.md), fencecheck's self-describing chunks, the HTTP service with the
// store's API (docs/resource-http.md), and the job of segments of chunks. Node's standard library
// only; the JavaScript twin of ../python-common/fencecheck_example.py.
"use strict";

const fs = require("node:fs");
const http = require("node:http");

const EVENTS_FD = Number(process.env.FENCECHECK_EVENTS_FD || "3");

function env(name) {
  const value = process.env[name];
  if (!value) {
    process.stderr.write(`worker.js: ${name} is not set (run me under fencecheck, or export the variables README.md lists)\n`);
    process.exit(2);
  }
  return value;
}

/** One event line, in one write(2): atomic on the harness's pipe. */
function emit(kind, fields = {}) {
  fs.writeSync(EVENTS_FD, JSON.stringify({ kind, ...fields }) + "\n");
}

/** Gives up for good, saying so first (job.gave_up); returns 1, the exit status to end with. */
function giveUp(why, fields = {}) {
  emit("job.gave_up", { detail: why, ...fields });
  process.stderr.write(`worker.js: giving up: ${why}\n`);
  return 1;
}

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

/** CRC-32 (IEEE 802.3, as zlib's crc32) of a string's UTF-8 bytes. */
function crc32(text) {
  let c = 0xffffffff;
  for (const byte of Buffer.from(text)) c = CRC_TABLE[(c ^ byte) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** The chunk's self-describing bytes, exactly as workers/proto/src/chunk.cpp's encode_chunk. */
function encodeChunk(worker, token, key, segment, chunk, size) {
  let out = `fc1 w=${worker} t=${token} k=${key} s=${segment} c=${chunk} f=`;
  const tail = " crc=".length + 8;
  if (out.length + tail < size) out += "x".repeat(size - out.length - tail);
  return Buffer.from(out + " crc=" + crc32(out).toString(16).padStart(8, "0"));
}

/** PUT one chunk; resolves {outcome: ok|fenced|invalid|unknown, mark, detail}. */
function putChunk(base, writer, key, segment, chunk, token, data) {
  const url = new URL(`${base.replace(/\/$/, "")}/v1/keys/${encodeURIComponent(key)}/segments/${segment}/chunks/${chunk}`);
  return new Promise((resolve) => {
    const req = http.request(url, {
      method: "PUT",
      timeout: 5000,
      headers: { "Fencing-Token": String(token), "Fencecheck-Client": writer, "Content-Type": "application/octet-stream",
                 "Content-Length": data.length, Connection: "close" },
    }, (res) => {
      const parts = [];
      res.on("data", (d) => parts.push(d));
      res.on("end", () => {
        let reply = {};
        try { reply = JSON.parse(Buffer.concat(parts).toString() || "{}"); } catch { reply = {}; }
        const mark = Number.isInteger(reply.high_water) ? reply.high_water : undefined;
        const detail = `HTTP ${res.statusCode}` + (reply.error ? `: ${reply.error}` : "");
        if (res.statusCode >= 200 && res.statusCode < 300) {
          resolve(reply.accepted === false ? { outcome: "unknown", mark, detail: detail + " with accepted: false" }
                                           : { outcome: "ok", mark, detail });
        } else if (res.statusCode === 409) {
          resolve({ outcome: "fenced", mark: mark === undefined ? 0 : mark, detail });
        } else if (res.statusCode >= 400 && res.statusCode < 500) {
          resolve({ outcome: "invalid", detail });
        } else {
          resolve({ outcome: "unknown", detail });
        }
      });
    });
    req.on("timeout", () => req.destroy(new Error("timeout after 5 s")));
    req.on("error", (e) => resolve({ outcome: "unknown", detail: `${e.name}: ${e.message}` }));
    req.end(data);
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The job of FENCECHECK_JOB_*: segments of chunks to one key; a holding that stops redoes its
 * segment from chunk 0 under its next token. */
class Job {
  constructor() {
    this.me = env("FENCECHECK_WORKER_ID");
    this.key = env("FENCECHECK_KEY");
    this.segments = Number(env("FENCECHECK_JOB_SEGMENTS"));
    this.chunks = Number(env("FENCECHECK_JOB_CHUNKS"));
    this.chunkBytes = Number(env("FENCECHECK_CHUNK_BYTES"));
    this.interval = Number(env("FENCECHECK_CHUNK_INTERVAL_MS"));
    this.base = env("FENCECHECK_RESOURCE_URL");
    this.segment = 0;
  }

  /** Writes the rest of the job under `token`: null when done, else the outcome that stopped it. */
  async run(token) {
    while (this.segment < this.segments) {
      for (let c = 0; c < this.chunks; c++) {
        const where = { key: this.key, segment: this.segment, chunk: c, token };
        emit("write.invoke", where);
        const data = encodeChunk(this.me, token, this.key, this.segment, c, this.chunkBytes);
        const r = await putChunk(this.base, this.me, this.key, this.segment, c, token, data);
        const fields = r.mark === undefined ? where : { ...where, high_water: r.mark };
        if (r.outcome !== "ok") {
          emit(r.outcome === "unknown" ? "write.info" : "write.fail", { ...fields, detail: r.detail });
          return r.outcome;
        }
        emit("write.ok", fields);
        await sleep(this.interval);
      }
      this.segment += 1;
    }
    return null;
  }
}

module.exports = { env, emit, giveUp, encodeChunk, crc32, Job, sleep };
