// Synthetic histories and read-backs for the checker tests (check_test.cpp,
// blackbox_check_test.cpp): a Builder that stamps events 1 ms apart, and stored chunks and accept
// log entries of key "ledger". Test-only: its definitions are in an unnamed namespace, so each
// test file that includes it has its own copy.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "fencecheck/harness/history.h"
#include "fencecheck/proto/chunk.h"
#include "fencecheck/proto/readback.h"

namespace fencecheck::harness {
namespace {

const std::string kKey = "ledger";
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
                    const std::string& key = kKey) {
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
  return StoredChunk{kKey, segment, chunk, token, client, seq,
                     encode_chunk(ChunkHeader{client, token, kKey, segment, chunk}, 64)};
}

AcceptedWrite logged(std::int64_t seq, const std::string& client, std::int64_t token, std::int64_t segment,
                     std::int64_t chunk) {
  return AcceptedWrite{seq, kKey, segment, chunk, token, client};
}

}  // namespace
}  // namespace fencecheck::harness
