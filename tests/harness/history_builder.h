// Synthetic histories and read-backs for the checker tests (check_test.cpp,
// blackbox_check_test.cpp, tests/check's golden record): a Builder that stamps events 1 ms apart,
// stored chunks and accept log entries of key "ledger", and the smoke scenario's story, fenced and
// unfenced (fenced_run(), unfenced_run()). Test-only: its definitions are in an unnamed namespace, so each
// test file that includes it has its own copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fencecheck/harness/history.h"
#include "fencecheck/proto/chunk.h"
#include "fencecheck/proto/readback.h"

namespace fencecheck::harness {
namespace {

const std::string kLedgerKey = "ledger";
const std::string kLock = "fencecheck/test";
const std::string kKey1 = "fencecheck/test/694d8a1b2c3d0001";  // w1's lock key (token 33)
const std::string kKey2 = "fencecheck/test/694d8a1b2c3d0002";  // w2's lock key (token 34)

/// Builds a history with increasing receive times (1 ms apart unless told otherwise).
struct Builder {
  History h;
  std::int64_t t = 1'000'000'000;

  std::size_t add(Event e, std::int64_t advance_ns = 1'000'000) {
    t += advance_ns;
    e.t_ns = t;
    e.src_ns = t;
    return h.add(std::move(e));
  }
  static Event ev(const std::string& source, EventKind kind) {
    Event e;
    e.source = source;
    e.kind = kind;
    return e;
  }
  std::size_t run_start() { return add(ev("harness", EventKind::kRunStart)); }
  std::size_t acquire_ok(const std::string& w, const std::string& lock_key, std::int64_t token, std::int64_t lease) {
    Event e = ev(w, EventKind::kAcquireOk);
    e.lock = kLock;
    e.lock_key = lock_key;
    e.token = token;
    e.revision = token;
    e.lease_id = lease;
    return add(e);
  }
  std::size_t lock_grant(const std::string& lock_key, std::int64_t token, std::int64_t lease) {
    Event e = ev("lock", EventKind::kLockGrant);
    e.lock_key = lock_key;
    e.token = token;
    e.revision = token;
    e.lease_id = lease;
    return add(e);
  }
  std::size_t lock_delete(const std::string& lock_key, std::int64_t token, std::optional<std::int64_t> revision,
                          const std::string& detail = "") {
    Event e = ev("lock", EventKind::kLockDelete);
    e.lock_key = lock_key;
    e.token = token;
    e.revision = revision;
    e.detail = detail;
    return add(e);
  }
  std::size_t release_ok(const std::string& w, const std::string& lock_key, std::int64_t token,
                         std::optional<std::int64_t> revision) {
    Event e = ev(w, EventKind::kReleaseOk);
    e.lock_key = lock_key;
    e.token = token;
    e.revision = revision;
    return add(e);
  }
  std::size_t write(const std::string& w, EventKind kind, std::int64_t token, std::int64_t segment,
                    std::int64_t chunk, std::optional<std::int64_t> high_water = std::nullopt,
                    const std::string& key = kLedgerKey) {
    Event e = ev(w, kind);
    e.key = key;
    e.token = token;
    e.segment = segment;
    e.chunk = chunk;
    e.high_water = high_water;
    return add(e);
  }
  /// invoke + ok; returns the ok's index.
  std::size_t write_ok(const std::string& w, std::int64_t token, std::int64_t segment, std::int64_t chunk,
                       std::int64_t high_water) {
    write(w, EventKind::kWriteInvoke, token, segment, chunk);
    return write(w, EventKind::kWriteOk, token, segment, chunk, high_water);
  }
  std::size_t job_done(const std::string& w, std::optional<std::int64_t> token) {
    Event e = ev(w, EventKind::kJobDone);
    e.token = token;
    return add(e);
  }
  std::size_t pause(const std::string& w, std::int64_t ns, std::optional<std::int64_t> token = std::nullopt) {
    Event e = ev(w, EventKind::kPause);
    e.duration_ns = ns;
    e.token = token;
    return add(e);
  }
  std::size_t fault_inject(const std::string& target, std::int64_t planned_ns) {
    Event e = ev("harness", EventKind::kFaultInject);
    e.fault = "sigstop";
    e.target = target;
    e.duration_ns = planned_ns;
    return add(e);
  }
  std::size_t fault_heal(const std::string& target, std::optional<std::int64_t> actual_ns,
                         std::int64_t advance_ns = 1'000'000) {
    Event e = ev("harness", EventKind::kFaultHeal);
    e.fault = "sigstop";
    e.target = target;
    e.duration_ns = actual_ns;
    return add(e, advance_ns);
  }
};

StoredChunk stored(const std::string& client, std::int64_t token, std::int64_t segment, std::int64_t chunk,
                   std::int64_t seq) {
  return StoredChunk{kLedgerKey, segment, chunk, token, client, seq,
                     encode_chunk(ChunkHeader{client, token, kLedgerKey, segment, chunk}, 64)};
}

AcceptedWrite logged(std::int64_t seq, const std::string& client, std::int64_t token, std::int64_t segment,
                     std::int64_t chunk) {
  return AcceptedWrite{seq, kLedgerKey, segment, chunk, token, client};
}

/// The story of the smoke scenario, 2 segments x 2 chunks: w1 (token 33) writes one or two chunks,
/// is SIGSTOPped past its 2 s lease, etcd deletes its key, w2 (token 34) writes the whole job and
/// releases; w1 resumes and writes with its stale token.
struct StoryRun {
  Builder b;
  ReadBack rb;
  // Indices of interest.
  std::size_t w1_acquire = 0, w1_grant = 0, w1_ok_s0c0 = 0, w1_ok_s0c1 = 0, inject = 0, w1_delete = 0;
  std::size_t w2_acquire = 0, w2_ok[4] = {}, w2_done = 0, w2_release = 0, w2_delete = 0, heal = 0, w1_pause = 0;
  std::size_t w1_late = 0;       // fenced: write.fail s1c0; unfenced: write.ok s0c1
  std::size_t w1_late_s1[2] = {};  // unfenced: write.ok s1c0, s1c1
};

/// The middle of both stories: w2 takes the lock (its key, token 34, lease 7002) and writes the
/// whole job, 2 segments x 2 chunks, each acknowledged with high-water 34, then job.done.
inline void w2_writes_the_job(StoryRun& r) {
  Builder& b = r.b;
  r.w2_acquire = b.acquire_ok("w2", kKey2, 34, 7002);
  r.w2_ok[0] = b.write_ok("w2", 34, 0, 0, 34);
  r.w2_ok[1] = b.write_ok("w2", 34, 0, 1, 34);
  r.w2_ok[2] = b.write_ok("w2", 34, 1, 0, 34);
  r.w2_ok[3] = b.write_ok("w2", 34, 1, 1, 34);
  r.w2_done = b.job_done("w2", 34);
}

inline StoryRun fenced_run() {
  StoryRun r;
  Builder& b = r.b;
  b.run_start();
  b.add(Builder::ev("w1", EventKind::kAcquireInvoke));
  r.w1_acquire = b.acquire_ok("w1", kKey1, 33, 7001);
  r.w1_grant = b.lock_grant(kKey1, 33, 7001);
  b.add(Builder::ev("w2", EventKind::kAcquireInvoke));
  b.lock_grant(kKey2, 34, 7002);  // w2's key exists from here; it holds the lock once w1's is gone
  r.w1_ok_s0c0 = b.write_ok("w1", 33, 0, 0, 33);
  r.w1_ok_s0c1 = b.write_ok("w1", 33, 0, 1, 33);
  r.inject = b.fault_inject("w1", 6'000'000'000);
  r.w1_delete = b.lock_delete(kKey1, 33, 40);  // lease expired: no release has revision 40
  w2_writes_the_job(r);
  b.add(Builder::ev("w2", EventKind::kReleaseInvoke));
  r.w2_release = b.release_ok("w2", kKey2, 34, 50);
  r.w2_delete = b.lock_delete(kKey2, 34, 50);
  r.heal = b.fault_heal("w1", 6'000'400'000, 6'000'000'000);
  r.w1_pause = b.pause("w1", 5'950'000'000, 33);
  b.write("w1", EventKind::kWriteInvoke, 33, 1, 0);
  r.w1_late = b.write("w1", EventKind::kWriteFail, 33, 1, 0, 34);
  b.add(Builder::ev("harness", EventKind::kWorkerExit));
  b.add(Builder::ev("harness", EventKind::kRunEnd));

  r.rb.resource = "store";
  r.rb.fencing = "per-key";
  r.rb.chunks = {stored("w2", 34, 0, 0, 3), stored("w2", 34, 0, 1, 4), stored("w2", 34, 1, 0, 5),
                 stored("w2", 34, 1, 1, 6)};
  r.rb.log = {logged(1, "w1", 33, 0, 0), logged(2, "w1", 33, 0, 1), logged(3, "w2", 34, 0, 0),
              logged(4, "w2", 34, 0, 1),  logged(5, "w2", 34, 1, 0), logged(6, "w2", 34, 1, 1)};
  r.rb.rejections = {RejectedWrite{kLedgerKey, 1, 0, 33, "w1", 34}};
  r.rb.high_water = {{kLedgerKey, 34}};
  return r;
}

/// Same story against a store that does not fence: w1 wrote only s0c0 before the pause, and after
/// it resumes its s0c1, s1c0, s1c1 (token 33) are accepted over w2's.
inline StoryRun unfenced_run() {
  StoryRun r;
  Builder& b = r.b;
  b.run_start();
  r.w1_acquire = b.acquire_ok("w1", kKey1, 33, 7001);
  r.w1_grant = b.lock_grant(kKey1, 33, 7001);
  b.lock_grant(kKey2, 34, 7002);
  r.w1_ok_s0c0 = b.write_ok("w1", 33, 0, 0, 33);
  r.inject = b.fault_inject("w1", 6'000'000'000);
  r.w1_delete = b.lock_delete(kKey1, 33, 40);
  w2_writes_the_job(r);
  r.w2_release = b.release_ok("w2", kKey2, 34, 50);
  r.w2_delete = b.lock_delete(kKey2, 34, 50);
  r.heal = b.fault_heal("w1", 6'000'400'000, 6'000'000'000);
  r.w1_pause = b.pause("w1", 5'980'000'000, 33);
  // An unfenced store accepts and (like the reference store) reports its high-water mark, 34.
  r.w1_late = b.write_ok("w1", 33, 0, 1, 34);
  r.w1_late_s1[0] = b.write_ok("w1", 33, 1, 0, 34);
  r.w1_late_s1[1] = b.write_ok("w1", 33, 1, 1, 34);
  b.job_done("w1", 33);

  r.rb.resource = "store";
  r.rb.fencing = "none";
  r.rb.chunks = {stored("w2", 34, 0, 0, 2), stored("w1", 33, 0, 1, 6), stored("w1", 33, 1, 0, 7),
                 stored("w1", 33, 1, 1, 8)};
  r.rb.log = {logged(1, "w1", 33, 0, 0), logged(2, "w2", 34, 0, 0), logged(3, "w2", 34, 0, 1),
              logged(4, "w2", 34, 1, 0), logged(5, "w2", 34, 1, 1), logged(6, "w1", 33, 0, 1),
              logged(7, "w1", 33, 1, 0), logged(8, "w1", 33, 1, 1)};
  r.rb.high_water = {{kLedgerKey, 34}};
  return r;
}

/// Issue 31, item 2: an HTTP service that keeps the contract's one lock but compares tokens as
/// text ("10" < "9"), etcd with 7 prior revisions, a job of 1 segment x 2 chunks, no fault. w1
/// (token 9) writes both chunks (mark 9) and releases; w2 then acquires 10, 13, ..., 49 and every
/// write of each is rejected at mark 9 (the write.fail says it, and so does the read-back's record).
struct TextCompareRun {
  Builder b;
  ReadBack rb;
  std::size_t w1_ok[2] = {};
  std::vector<std::size_t> w2_acquires, w2_fails;  // in order
  std::vector<std::int64_t> w2_tokens;
};

inline TextCompareRun text_compare_run() {
  TextCompareRun r;
  Builder& b = r.b;
  b.run_start();
  b.add(Builder::ev("w1", EventKind::kAcquireInvoke));
  b.acquire_ok("w1", kKey1, 9, 7001);
  r.w1_ok[0] = b.write_ok("w1", 9, 0, 0, 9);
  r.w1_ok[1] = b.write_ok("w1", 9, 0, 1, 9);
  b.job_done("w1", 9);
  b.release_ok("w1", kKey1, 9, 12);
  for (std::int64_t token = 10; token <= 49; token += 3) {
    b.add(Builder::ev("w2", EventKind::kAcquireInvoke), 200'000'000);
    r.w2_acquires.push_back(b.acquire_ok("w2", kLock + "/694d8a1b2c3d1" + std::to_string(token), token, 7000 + token));
    b.write("w2", EventKind::kWriteInvoke, token, 0, 0);
    r.w2_fails.push_back(b.write("w2", EventKind::kWriteFail, token, 0, 0, 9));
    b.release_ok("w2", kLock + "/694d8a1b2c3d1" + std::to_string(token), token, token + 1);
    r.w2_tokens.push_back(token);
  }
  b.add(Builder::ev("harness", EventKind::kWorkerExit));
  b.add(Builder::ev("harness", EventKind::kRunEnd));

  r.rb.resource = "http";
  r.rb.fencing = "per-key (tokens compared as text)";
  r.rb.chunks = {stored("w1", 9, 0, 0, 1), stored("w1", 9, 0, 1, 2)};
  r.rb.log = {logged(1, "w1", 9, 0, 0), logged(2, "w1", 9, 0, 1)};
  for (const std::int64_t token : r.w2_tokens) r.rb.rejections.push_back(RejectedWrite{kLedgerKey, 0, 0, token, "w2", 9});
  r.rb.high_water = {{kLedgerKey, 9}};
  return r;
}

}  // namespace
}  // namespace fencecheck::harness
