// Crash consistency beyond kill -9 (issue 14). kill -9 keeps the page cache, so it cannot tell a
// store that fdatasyncs from one that does not; a power cut can. FaultFs (fault_fs.h, the shape of
// RocksDB's FaultInjectionTestFS) is the store's file layer here: at a simulated crash it keeps
// only what was made durable, dropping (kDropUnsynced) or tearing (kTearLastWrite) the rest.
//
// Each round: open the store on the surviving image, check it against what was acknowledged
// before (0 acknowledged writes lost, 0 high-water marks lowered), arm a crash at a random
// mutating file operation, run concurrent writers on several keys until the crash fails the
// store, close, restart the "machine". Rounds chain on one image (CHAIN rounds), then a fresh
// image. The broken variant (StoreOptions::test_only_ack_before_sync: acknowledge before the
// fdatasync) must be caught losing acknowledged writes: the check can fail.
//
// FENCECHECK_CRASH_SEED=<n> replays one seed; the seed is printed either way.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "fault_fs.h"
#include "fencecheck/resources/store.h"

using namespace fencecheck;
using fencecheck::testing::CrashMode;
using fencecheck::testing::FaultFs;

namespace {

constexpr int kCrashes = 1000;  // per crash mode, for the correct store
constexpr int kChain = 40;      // rounds on one image before a fresh one (bounds replay time)
constexpr int kWriters = 4;
constexpr int kKeys = 3;

struct Figures {
  std::int64_t crashes = 0;
  std::int64_t restarts = 0;
  std::int64_t refusals = 0;
  std::int64_t acked_checked = 0;   // acknowledged writes looked up after a restart (with repeats across a chain)
  std::int64_t acked = 0;           // distinct acknowledged writes
  std::int64_t rejected = 0;        // fenced writes answered (their cited marks checked too)
  std::int64_t lost = 0;            // acknowledged writes missing or different after a restart
  std::int64_t lowered = 0;         // keys whose mark fell below one that was acknowledged
  std::int64_t torn_tails = 0;      // restarts that trimmed a torn tail
  std::string first_problem;
};

std::uint64_t seed_from_env() {
  if (const char* s = std::getenv("FENCECHECK_CRASH_SEED"); s != nullptr && *s != '\0') return std::strtoull(s, nullptr, 10);
  return std::random_device{}();
}

// Runs `crashes` crashes against the store built with `base` options; returns the figures.
Figures run_crashes(CrashMode mode, int crashes, std::uint64_t seed, bool ack_before_sync) {
  Figures f;
  std::mt19937_64 rng(seed);
  const std::filesystem::path dir = "/virtual/crash-store";
  std::shared_ptr<FaultFs> files;
  std::map<std::int64_t, AcceptedWrite> acked;  // by seq, across the chain
  std::map<std::string, std::int64_t> marks;    // the highest mark any reply cited, per key
  std::map<std::string, std::int64_t> latest;   // the writers' token generator, per key
  for (int round = 0; round < crashes; ++round) {
    if (round % kChain == 0) {
      files = std::make_shared<FaultFs>(mode, rng());
      acked.clear();
      marks.clear();
      latest.clear();
    }
    StoreOptions options;
    options.file_system = files;
    options.test_only_ack_before_sync = ack_before_sync;
    std::unique_ptr<FencedStore> store;
    try {
      store = FencedStore::open(dir, FencingMode::kPerKey, options);
    } catch (const StoreLogDamaged& e) {
      ++f.refusals;
      if (f.first_problem.empty()) f.first_problem = e.what();
      round += kChain - 1 - round % kChain;  // this image cannot go on: the next round starts a fresh one
      continue;
    }
    ++f.restarts;
    if (store->recovery().truncated_bytes > 0) ++f.torn_tails;

    // The check: every acknowledged write is there, unchanged; no mark fell.
    const ReadBack rb = store->readback();
    std::map<std::int64_t, const AcceptedWrite*> by_seq;
    for (const auto& w : rb.log) by_seq[w.seq] = &w;
    for (const auto& [seq, a] : acked) {
      ++f.acked_checked;
      auto it = by_seq.find(seq);
      const bool same = it != by_seq.end() && it->second->key == a.key && it->second->segment == a.segment &&
                        it->second->chunk == a.chunk && it->second->token == a.token && it->second->client == a.client;
      if (!same) {
        ++f.lost;
        if (f.first_problem.empty())
          f.first_problem = "acknowledged seq " + std::to_string(seq) + " (key " + a.key + ", token " +
                            std::to_string(a.token) + ") is " + (it == by_seq.end() ? "gone" : "different");
      }
    }
    for (const auto& [key, mark] : marks) {
      auto it = rb.high_water.find(key);
      if (it == rb.high_water.end() || it->second < mark) {
        ++f.lowered;
        if (f.first_problem.empty())
          f.first_problem = "key " + key + "'s mark fell below the acknowledged " + std::to_string(mark);
      }
    }
    // Only what the store reports now counts from here on (an unacknowledged write that
    // survived is fine, and later writes continue from it).
    acked.clear();
    for (const auto& w : rb.log) acked[w.seq] = w;
    for (const auto& [key, hw] : rb.high_water) {
      marks[key] = std::max(marks[key], hw);
      latest[key] = std::max(latest[key], hw);
    }

    // Crash at a random mutating operation: each flush is an append and an fdatasync.
    files->arm(std::uniform_int_distribution<std::int64_t>(1, 16)(rng));
    std::mutex mu;  // guards acked, marks, latest and f while the writers run
    std::vector<std::thread> writers;
    for (int t = 0; t < kWriters; ++t) {
      const std::uint64_t wseed = rng();
      writers.emplace_back([&, t, wseed] {
        std::mt19937_64 wr(wseed);
        const std::string client = "w" + std::to_string(t);
        for (std::int64_t n = 0;; ++n) {
          const std::string key = "k" + std::to_string(wr() % kKeys);
          std::int64_t token = 0;
          {
            std::lock_guard l(mu);
            // Mostly the current token or a newer one; sometimes a stale one (fenced).
            token = std::max<std::int64_t>(0, latest[key] + static_cast<std::int64_t>(wr() % 5) - 2);
            latest[key] = std::max(latest[key], token);
          }
          const std::int64_t segment = round;
          const WriteResult r = store->write(WriteRequest{key, segment, t * 100000 + n, FencingToken(token), client,
                                                          std::string(16, static_cast<char>('a' + t))});
          std::lock_guard l(mu);
          if (r.status == WriteStatus::kFailed) return;  // the crash
          auto& mark = marks[key];
          mark = std::max(mark, r.high_water);
          if (r.accepted) {
            acked[r.seq] = AcceptedWrite{r.seq, key, segment, t * 100000 + n, token, client};
            ++f.acked;
          } else {
            ++f.rejected;
          }
        }
      });
    }
    files->wait_crashed();
    for (auto& w : writers) w.join();
    store->close();
    files->restart();
    ++f.crashes;
  }
  return f;
}

void print(const char* what, std::uint64_t seed, const Figures& f) {
  std::cout << what << ": seed " << seed << ", " << f.crashes << " crashes, " << f.acked << " acknowledged writes ("
            << f.acked_checked << " look-ups after restarts), " << f.rejected << " fenced writes, " << f.restarts
            << " restarts (" << f.torn_tails << " trimmed a torn tail), " << f.refusals << " refusals, " << f.lost
            << " acknowledged writes lost, " << f.lowered << " marks lowered" << std::endl;
  if (!f.first_problem.empty()) std::cout << "  first problem: " << f.first_problem << std::endl;
}

// The correct store under one crash mode: every crash survived, nothing acknowledged lost.
void expect_safe(const Figures& f, std::uint64_t seed) {
  EXPECT_EQ(f.crashes, kCrashes) << "seed " << seed;
  EXPECT_EQ(f.lost, 0) << "seed " << seed << ": " << f.first_problem;
  EXPECT_EQ(f.lowered, 0) << "seed " << seed << ": " << f.first_problem;
  EXPECT_EQ(f.refusals, 0) << "seed " << seed << ": " << f.first_problem;
  EXPECT_EQ(f.restarts, kCrashes);
  EXPECT_GT(f.acked, kCrashes) << "too few writes acknowledged for the check to mean much";
  EXPECT_GT(f.acked_checked, f.acked);
}

}  // namespace

TEST(StoreCrash, DroppingUnsyncedDataLosesNoAcknowledgedWriteAndLowersNoMark) {
  const std::uint64_t seed = seed_from_env();
  const Figures f = run_crashes(CrashMode::kDropUnsynced, kCrashes, seed, false);
  print("drop-unsynced", seed, f);
  expect_safe(f, seed);
}

TEST(StoreCrash, TearingTheLastWriteLeavesOnlyTornTailsThatAreTrimmed) {
  const std::uint64_t seed = seed_from_env();
  const Figures f = run_crashes(CrashMode::kTearLastWrite, kCrashes, seed, false);
  print("tear-last-write", seed, f);
  expect_safe(f, seed);
  EXPECT_GT(f.torn_tails, 0) << "no crash tore a write: the mode did nothing";
}

TEST(StoreCrash, AStoreThatAcknowledgesBeforeFdatasyncIsCaughtLosingWrites) {
  const std::uint64_t seed = seed_from_env();
  const Figures f = run_crashes(CrashMode::kDropUnsynced, 200, seed, true);
  print("ack-before-fdatasync (broken on purpose)", seed, f);
  EXPECT_GT(f.lost, 0) << "seed " << seed << ": the checker found no lost acknowledged write in a store that "
                       << "acknowledges before fdatasync: the crash test cannot fail";
}
