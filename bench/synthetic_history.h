// fencecheck bench — a synthetic run history of any size with its matching read-back, for the
// checker benchmark (bench_check.cpp) and its test (tests/bench/). Holders take turns on 50 keys;
// each holding is: acquire.invoke, lock.grant, acquire.ok, 4 x (write.invoke, write.ok),
// release.invoke, lock.delete, release.ok, job.done (15 events). Every 64th holding is paused past
// its lease instead: the lock service deletes its key (an expiry, no release), and when the next
// holder of the same key has written, the paused one resumes with its old token and is fenced
// (pause, write.invoke, write.fail with the new holder's token as high-water). The read-back
// holds every accepted write in its log (seq order), the last write of each chunk slot
// (self-describing chunk bytes), the rejections and the high-water marks: a VALID run.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>

#include "fencecheck/harness/history.h"
#include "fencecheck/proto/chunk.h"
#include "fencecheck/proto/readback.h"

namespace fencecheck::bench {

inline constexpr int kKeys = 50;
inline constexpr int kChunks = 4;
inline constexpr int kSegments = 8;

struct Synthetic {
  harness::History history;
  ReadBack readback;
};

/// Generates the valid history of make_history() event by event: calls sink(const Event&) for each
/// of at least `target` events (fewer than 20 more), in history order, and fills `*readback` to
/// match when it is not null. Memory without a read-back: a few small maps (the paused holder
/// per key), whatever the target; with one, the read-back's size. `log`, when given, takes each
/// accept-log entry in order instead of readback->log (a bench packing the log as it goes never
/// holds it as AcceptedWrites). Deterministic.
template <typename Sink>
void generate_history(std::int64_t target, Sink&& sink, ReadBack* readback,
                      const std::function<void(const AcceptedWrite&)>& log = {}) {
  std::int64_t events = 0;
  struct Out {
    Sink& sink;
    std::int64_t& events;
    void add(const Event& e) {
      sink(e);
      ++events;
    }
  } out{sink, events};
  ReadBack scratch;  // stands in when no read-back is asked for (only the high-water marks: one per key)
  ReadBack& rb = readback ? *readback : scratch;
  rb.resource = "store";
  rb.fencing = "per-key";
  std::map<std::tuple<std::string, std::int64_t, std::int64_t>, StoredChunk> slots;
  std::int64_t t = 1'000'000, revision = 1, seq = 0, holding = 0;
  struct Stale {
    std::string worker;
    std::int64_t segment = 0;
    std::int64_t token = 0;
  };
  std::map<std::string, Stale> stale;  // key -> the holder paused past its lease on it
  auto ev = [&](const std::string& source, EventKind kind) {
    Event e;
    e.t_ns = (t += 1000);
    e.src_ns = t - 500;
    e.source = source;
    e.kind = kind;
    return e;
  };
  while (events < target) {
    const std::string key = "k" + std::to_string(holding % kKeys);
    const std::string worker = "w" + std::to_string(holding % 200);
    const std::string lock = "lock-" + key;
    const std::int64_t token = ++revision;
    const std::int64_t segment = (holding / kKeys) % kSegments;
    const std::string lock_key = lock + "/" + std::to_string(token);
    Event e = ev(worker, EventKind::kAcquireInvoke);
    e.lock = lock;
    e.ttl_ms = 2000;
    out.add(e);
    e = ev("lock", EventKind::kLockGrant);
    e.lock = lock, e.lock_key = lock_key, e.token = token, e.revision = token, e.lease_id = token;
    out.add(e);
    e = ev(worker, EventKind::kAcquireOk);
    e.lock = lock, e.lock_key = lock_key, e.token = token, e.revision = token, e.lease_id = token, e.ttl_ms = 2000;
    out.add(e);
    for (int c = 0; c < kChunks; ++c) {
      e = ev(worker, EventKind::kWriteInvoke);
      e.key = key, e.segment = segment, e.chunk = c, e.token = token;
      out.add(e);
      e.t_ns = (t += 1000);
      e.kind = EventKind::kWriteOk;
      e.high_water = token;
      out.add(e);
      ++seq;
      if (readback) {
        if (log) log(AcceptedWrite{seq, key, segment, c, token, worker});
        else readback->log.push_back({seq, key, segment, c, token, worker});
        auto& slot = slots[{key, segment, c}];
        slot = {key, segment, c, token, worker, seq, encode_chunk({worker, token, key, segment, c}, 64)};
      }
    }
    if (const auto it = stale.find(key); it != stale.end()) {
      // The holder paused past its lease on this key resumes now and writes with its old token:
      // fenced against this holder's token, the key's high-water mark.
      const Stale& old = it->second;
      e = ev(old.worker, EventKind::kPause);
      e.duration_ns = 6'000'000'000, e.token = old.token;
      out.add(e);
      e = ev(old.worker, EventKind::kWriteInvoke);
      e.key = key, e.segment = old.segment, e.chunk = 0, e.token = old.token;
      out.add(e);
      e.t_ns = (t += 1000);
      e.kind = EventKind::kWriteFail;
      e.high_water = token;
      e.detail = "fenced";
      out.add(e);
      if (readback) readback->rejections.push_back({key, old.segment, 0, old.token, old.worker, token});
      stale.erase(it);
    }
    if (holding % 64 == 63 && !stale.count(key)) {
      // Paused past its lease: the lock service expires it (a delete no release explains).
      e = ev("lock", EventKind::kLockDelete);
      e.lock = lock, e.lock_key = lock_key, e.token = token, e.revision = ++revision;
      out.add(e);
      stale[key] = {worker, segment, token};
      rb.high_water[key] = token;
      ++holding;
      continue;
    }
    e = ev(worker, EventKind::kReleaseInvoke);
    e.lock_key = lock_key, e.lease_id = token, e.token = token;
    out.add(e);
    e = ev("lock", EventKind::kLockDelete);
    e.lock = lock, e.lock_key = lock_key, e.token = token, e.revision = ++revision;
    out.add(e);
    e = ev(worker, EventKind::kReleaseOk);
    e.lock_key = lock_key, e.token = token, e.revision = revision;
    out.add(e);
    e = ev(worker, EventKind::kJobDone);
    e.token = token;
    out.add(e);
    rb.high_water[key] = token;
    ++holding;
  }
  if (readback)
    for (auto& [_, chunk] : slots) readback->chunks.push_back(std::move(chunk));
}

/// A valid history of at least `target` events (fewer than 20 more), with its read-back. Pure;
/// deterministic (same target, same history). Memory: a few hundred bytes per event.
inline Synthetic make_history(std::int64_t target) {
  Synthetic s;
  s.history.events.reserve(static_cast<std::size_t>(target + 32));
  generate_history(target, [&](const Event& e) { s.history.add(e); }, &s.readback);
  return s;
}

}  // namespace fencecheck::bench
