// Unit tests for the failure catalogue's store side (docs/catalogue-plan.md): the "global" and
// "check-then-write" fencing modes, counters, side effects, and their durability (replay after a
// restart, torn records, the old record format). Threads are synchronised through the store's test
// seams (StoreOptions), never through sleeps.
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "fencecheck/proto/chunk.h"
#include "fencecheck/resources/store.h"
#include "temp_dir.h"

using namespace fencecheck;
using fencecheck::testing::TempDir;

namespace {

WriteRequest req(const std::string& key, std::int64_t segment, std::int64_t chunk, std::int64_t token,
                 const std::string& client = "w1") {
  return WriteRequest{key, segment, chunk, FencingToken(token), client,
                      encode_chunk(ChunkHeader{client, token, key, segment, chunk}, 64)};
}

CounterWriteRequest counter(const std::string& key, std::int64_t value, std::int64_t token, const std::string& client) {
  return CounterWriteRequest{key, value, FencingToken(token), client};
}

EffectRequest effect(const std::string& key, const std::string& id, std::int64_t token, const std::string& client,
                     EffectMode mode) {
  return EffectRequest{key, id, FencingToken(token), client, mode};
}

std::vector<std::int64_t> log_tokens(const ReadBack& rb, const std::string& key) {
  std::vector<std::int64_t> out;
  for (const auto& w : rb.log)
    if (w.key == key) out.push_back(w.token);
  return out;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_file(const std::filesystem::path& p, const std::string& data) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << data;
}

template <typename U>
void put_le(std::string& out, U v) {
  for (std::size_t i = 0; i < sizeof(U); ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::string sealed(const std::string& payload) {
  std::string out;
  put_le(out, static_cast<std::uint32_t>(payload.size()));
  put_le(out, crc32(payload));
  return out + payload;
}

/// One writer parked inside the check-then-write window until the test lets it go.
struct WindowGate {
  std::mutex m;
  std::condition_variable cv;
  std::int64_t park_token = -1;  ///< the token to park; others pass straight through
  bool parked = false;
  bool go = false;
  std::vector<std::int64_t> passed;  ///< tokens that went through the window, in order

  StoreOptions options() {
    StoreOptions o;
    o.in_check_window = [this](std::string_view, FencingToken token, std::string_view) {
      std::unique_lock l(m);
      passed.push_back(token.value());
      if (token.value() != park_token) return;
      parked = true;
      cv.notify_all();
      cv.wait(l, [&] { return go; });
    };
    return o;
  }
  void wait_parked() {
    std::unique_lock l(m);
    cv.wait(l, [&] { return parked; });
  }
  void release() {
    std::lock_guard l(m);
    go = true;
    cv.notify_all();
  }
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// global: one mark for the whole store

TEST(FencedStoreGlobal, AWriteToXIsRejectedAfterYAdvanced) {
  TempDir dir;
  auto store = FencedStore::open(dir.path(), FencingMode::kGlobal);
  ASSERT_TRUE(store->write(req("x", 0, 0, 10, "w1")).accepted);
  auto y = store->write(req("y", 0, 0, 20, "w2"));
  ASSERT_TRUE(y.accepted) << y.error;
  EXPECT_EQ(y.high_water, 20);

  // w1 still holds the lock for x with token 10 — but y's token fences it out of x.
  auto x = store->write(req("x", 0, 1, 10, "w1"));
  EXPECT_EQ(x.status, WriteStatus::kRejected);
  EXPECT_EQ(x.high_water, 20);
  EXPECT_NE(x.error.find("global high-water"), std::string::npos) << x.error;
  EXPECT_NE(x.error.find("key 'y'"), std::string::npos) << x.error;

  EXPECT_TRUE(store->write(req("x", 0, 1, 20, "w3")).accepted) << "equal to the global mark is accepted";
  auto rb = store->readback();
  EXPECT_EQ(rb.fencing, "global");
  // The read-back keeps per-key marks (the largest token accepted for each key) ...
  EXPECT_EQ(rb.high_water, (std::map<std::string, std::int64_t>{{"x", 20}, {"y", 20}}));
  // ... and the rejection cites the global mark, which no accepted write to x ever reached.
  ASSERT_EQ(rb.rejections.size(), 1u);
  EXPECT_EQ(rb.rejections[0].key, "x");
  EXPECT_EQ(rb.rejections[0].token, 10);
  EXPECT_EQ(rb.rejections[0].high_water, 20);
}

TEST(FencedStoreGlobal, CountersAndFencedEffectsAreJudgedByTheGlobalMarkToo) {
  TempDir dir;
  auto store = FencedStore::open(dir.path(), FencingMode::kGlobal);
  ASSERT_TRUE(store->write(req("other", 0, 0, 50)).accepted);
  auto c = store->write_counter(counter("hits", 1, 40, "w1"));
  EXPECT_EQ(c.status, WriteStatus::kRejected);
  EXPECT_EQ(c.high_water, 50);
  EXPECT_EQ(store->read_counter("hits").high_water, 50);
  auto e = store->post_effect(effect("hits", "w1:seg0", 40, "w1", EffectMode::kFenced));
  EXPECT_EQ(e.status, EffectStatus::kRejected);
  EXPECT_NE(e.error.find("global high-water"), std::string::npos) << e.error;
}

TEST(FencedStoreGlobal, ReopenRebuildsTheGlobalMark) {
  TempDir dir;
  {
    auto store = FencedStore::open(dir.path(), FencingMode::kGlobal);
    ASSERT_TRUE(store->write(req("a", 0, 0, 5)).accepted);
    ASSERT_TRUE(store->write_counter(counter("b", 1, 9, "w2")).accepted);
  }
  auto store = FencedStore::open(dir.path(), FencingMode::kGlobal);
  auto r = store->write(req("a", 0, 1, 8));
  EXPECT_EQ(r.status, WriteStatus::kRejected);
  EXPECT_EQ(r.high_water, 9);
  EXPECT_NE(r.error.find("key 'b'"), std::string::npos) << r.error;
}

// ---------------------------------------------------------------------------------------------
// check-then-write: the check and the write are two separately locked steps

TEST(FencedStoreCheckThenWrite, AStaleWriteIsAcceptedWhenAHigherOneLandsInsideTheWindow) {
  TempDir dir;
  WindowGate gate;
  gate.park_token = 5;
  auto store = FencedStore::open(dir.path(), FencingMode::kCheckThenWrite, gate.options());
  // w1 (token 5) passes the check (no mark yet) and is parked inside the window ...
  auto stale = std::async(std::launch::async, [&] { return store->write(req("ledger", 0, 0, 5, "w1")); });
  gate.wait_parked();
  // ... while w2 (token 7) checks, writes and raises the mark ...
  auto fresh = store->write(req("ledger", 0, 0, 7, "w2"));
  ASSERT_TRUE(fresh.accepted) << fresh.error;
  EXPECT_EQ(store->high_water().at("ledger"), 7);
  // ... then w1 writes without checking again: accepted, below the mark.
  gate.release();
  auto r = stale.get();
  EXPECT_EQ(r.status, WriteStatus::kAccepted) << r.error;
  EXPECT_EQ(r.high_water, 7);
  auto rb = store->readback();
  EXPECT_EQ(rb.fencing, "check-then-write");
  EXPECT_EQ(log_tokens(rb, "ledger"), (std::vector<std::int64_t>{7, 5})) << "the stale-write-accepted evidence";
  EXPECT_EQ(rb.high_water.at("ledger"), 7);
  ASSERT_EQ(rb.chunks.size(), 1u);
  EXPECT_EQ(rb.chunks[0].token, 5);  // the stale holder overwrote the newer one
  EXPECT_TRUE(rb.rejections.empty());
  EXPECT_EQ(gate.passed, (std::vector<std::int64_t>{5, 7}));
}

TEST(FencedStoreCheckThenWrite, ATokenAlreadyBelowTheMarkAtTheCheckIsRejected) {
  TempDir dir;
  WindowGate gate;
  auto store = FencedStore::open(dir.path(), FencingMode::kCheckThenWrite, gate.options());
  ASSERT_TRUE(store->write(req("ledger", 0, 0, 7, "w2")).accepted);
  auto r = store->write(req("ledger", 0, 1, 5, "w1"));
  EXPECT_EQ(r.status, WriteStatus::kRejected);
  EXPECT_EQ(r.high_water, 7);
  EXPECT_EQ(gate.passed, (std::vector<std::int64_t>{7})) << "a rejected write never enters the window";
}

TEST(FencedStoreCheckThenWrite, CountersRaceTheSameWay) {
  TempDir dir;
  WindowGate gate;
  gate.park_token = 5;
  auto store = FencedStore::open(dir.path(), FencingMode::kCheckThenWrite, gate.options());
  // Both holders read 0; w1 (5) is parked after its check; w2 (7) writes 1; w1 writes 1 too.
  auto stale = std::async(std::launch::async, [&] { return store->write_counter(counter("hits", 1, 5, "w1")); });
  gate.wait_parked();
  ASSERT_TRUE(store->write_counter(counter("hits", 1, 7, "w2")).accepted);
  gate.release();
  EXPECT_TRUE(stale.get().accepted);
  EXPECT_EQ(store->read_counter("hits").value, 1) << "two acknowledged increments, one counted";
}

TEST(FencedStoreCheckThenWrite, PerKeyModeHasNoWindow) {
  TempDir dir;
  WindowGate gate;
  gate.park_token = 5;
  auto store = FencedStore::open(dir.path(), FencingMode::kPerKey, gate.options());
  ASSERT_TRUE(store->write(req("ledger", 0, 0, 5)).accepted);
  EXPECT_TRUE(gate.passed.empty()) << "the seam is check-then-write's only";
}

// ---------------------------------------------------------------------------------------------
// Counters

TEST(FencedStoreCounters, FencedReadModifyWriteIsExact) {
  TempDir dir;
  auto store = FencedStore::open(dir.path(), FencingMode::kPerKey);
  int acknowledged = 0;
  // w1 (token 5) reads 0 and is about to write 1; w2 (token 7) reads 0, writes 1, reads 1, writes 2.
  const auto w1_read = store->read_counter("hits");
  EXPECT_EQ(w1_read.value, 0);
  EXPECT_EQ(w1_read.high_water, 0);
  const auto w2_read = store->read_counter("hits");
  auto w2 = store->write_counter(counter("hits", w2_read.value + 1, 7, "w2"));
  ASSERT_TRUE(w2.accepted) << w2.error;
  acknowledged += w2.accepted;
  auto w2b = store->write_counter(counter("hits", store->read_counter("hits").value + 1, 7, "w2"));
  acknowledged += w2b.accepted;
  // w1's stale read-modify-write is fenced: no lost update.
  auto w1 = store->write_counter(counter("hits", w1_read.value + 1, 5, "w1"));
  EXPECT_EQ(w1.status, WriteStatus::kRejected);
  EXPECT_EQ(w1.high_water, 7);
  acknowledged += w1.accepted;
  EXPECT_EQ(store->read_counter("hits").value, acknowledged);
  EXPECT_EQ(store->read_counter("hits").high_water, 7);

  const StoreSnapshot snap = store->snapshot();
  EXPECT_EQ(snap.counters, (std::map<std::string, std::int64_t>{{"hits", 2}}));
  // Each accepted counter write is in the log as a counter write with its new value (no slot).
  ASSERT_EQ(snap.readback.log.size(), 2u);
  EXPECT_EQ(snap.readback.log[0].kind, WriteKind::kCounter);
  EXPECT_EQ(snap.readback.log[0].value, 1);
  EXPECT_EQ(snap.readback.log[0].segment, kNoSlot);
  EXPECT_EQ(snap.readback.log[0].chunk, kNoSlot);
  EXPECT_EQ(snap.readback.log[1].kind, WriteKind::kCounter);
  EXPECT_EQ(snap.readback.log[1].value, 2);
  EXPECT_EQ(snap.readback.log[1].token, 7);
  EXPECT_EQ(snap.readback.log[1].client, "w2");
  ASSERT_EQ(snap.readback.rejections.size(), 1u);
  EXPECT_EQ(snap.readback.rejections[0].kind, WriteKind::kCounter);
  EXPECT_EQ(snap.readback.rejections[0].value, 1);
  EXPECT_EQ(snap.readback.rejections[0].chunk, kNoSlot);
  EXPECT_EQ(snap.readback.rejections[0].token, 5);
  EXPECT_EQ(snap.readback.rejections[0].high_water, 7);
  EXPECT_TRUE(snap.readback.chunks.empty()) << "counters are not chunk slots";
  EXPECT_EQ(snap.readback.high_water.at("hits"), 7);
}

TEST(FencedStoreCounters, WithoutFencingTheSameInterleavingLosesAnIncrement) {
  TempDir dir;
  auto store = FencedStore::open(dir.path(), FencingMode::kNone);
  const auto w1_read = store->read_counter("hits");
  const auto w2_read = store->read_counter("hits");
  int acknowledged = 0;
  acknowledged += store->write_counter(counter("hits", w2_read.value + 1, 7, "w2")).accepted;
  acknowledged += store->write_counter(counter("hits", w1_read.value + 1, 5, "w1")).accepted;
  EXPECT_EQ(acknowledged, 2);
  EXPECT_EQ(store->read_counter("hits").value, 1) << "counter-drift: 2 acknowledged, 1 counted";
}

TEST(FencedStoreCounters, CountersAndChunksShareTheKeysMark) {
  TempDir dir;
  auto store = FencedStore::open(dir.path(), FencingMode::kPerKey);
  ASSERT_TRUE(store->write(req("ledger", 0, 0, 9)).accepted);
  EXPECT_EQ(store->write_counter(counter("ledger", 1, 8, "w1")).status, WriteStatus::kRejected);
  ASSERT_TRUE(store->write_counter(counter("ledger", 1, 10, "w1")).accepted);
  EXPECT_EQ(store->write(req("ledger", 0, 1, 9)).status, WriteStatus::kRejected);
}

TEST(FencedStoreCounters, BadRequestsThrowAndChangeNothing) {
  TempDir dir;
  auto store = FencedStore::open(dir.path(), FencingMode::kPerKey);
  EXPECT_THROW((void)store->write_counter(counter("hits", -1, 1, "w1")), std::invalid_argument);
  EXPECT_THROW((void)store->write_counter(counter("a b", 1, 1, "w1")), std::invalid_argument);
  EXPECT_THROW((void)store->write_counter(counter("hits", 1, -2, "w1")), std::invalid_argument);
  EXPECT_THROW((void)store->write_counter(counter("hits", 1, 1, "")), std::invalid_argument);
  EXPECT_THROW((void)store->read_counter(""), std::invalid_argument);
  EXPECT_EQ(store->stats().last_seq, 0);
}

TEST(FencedStoreCounters, AReadNeverShowsAValueACrashCouldTakeBack) {
  TempDir dir;
  std::mutex m;
  std::condition_variable cv;
  bool flusher_waiting = false;
  bool open = false;
  StoreOptions o;
  o.before_sync = [&](std::int64_t) {
    std::unique_lock l(m);
    flusher_waiting = true;
    cv.notify_all();
    cv.wait(l, [&] { return open; });
  };
  auto store = FencedStore::open(dir.path(), FencingMode::kPerKey, o);
  auto write = std::async(std::launch::async, [&] { return store->write_counter(counter("hits", 1, 3, "w1")); });
  {
    std::unique_lock l(m);
    cv.wait(l, [&] { return flusher_waiting; });  // applied in memory, its flush held
  }
  auto read = std::async(std::launch::async, [&] { return store->read_counter("hits"); });
  EXPECT_EQ(read.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  EXPECT_EQ(write.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  {
    std::lock_guard l(m);
    open = true;
  }
  cv.notify_all();
  EXPECT_TRUE(write.get().accepted);
  EXPECT_EQ(read.get().value, 1);
}

// ---------------------------------------------------------------------------------------------
// Side effects

TEST(FencedStoreEffects, AFencedEffectBelowTheMarkIsRejectedAndAnEffectNeverRaisesTheMark) {
  TempDir dir;
  auto store = FencedStore::open(dir.path(), FencingMode::kPerKey);
  ASSERT_TRUE(store->write(req("ledger", 0, 0, 7, "w2")).accepted);
  auto stale = store->post_effect(effect("ledger", "w1:seg0", 5, "w1", EffectMode::kFenced));
  EXPECT_EQ(stale.status, EffectStatus::kRejected);
  EXPECT_FALSE(stale.applied);
  EXPECT_EQ(stale.high_water, 7);
  EXPECT_EQ(stale.seq, 2) << "a refused effect is recorded too";
  EXPECT_NE(stale.error.find("below the high-water mark 7"), std::string::npos) << stale.error;
  auto fresh = store->post_effect(effect("ledger", "w2:seg0", 9, "w2", EffectMode::kFenced));
  EXPECT_EQ(fresh.status, EffectStatus::kApplied);
  EXPECT_TRUE(fresh.applied);
  EXPECT_EQ(fresh.seq, 3);
  EXPECT_EQ(store->high_water().at("ledger"), 7) << "judged by the mark, never raising it";
  EXPECT_TRUE(store->write(req("ledger", 0, 1, 7, "w2")).accepted);

  const StoreSnapshot snap = store->snapshot();
  ASSERT_EQ(snap.effects.size(), 2u);
  EXPECT_EQ(snap.effects[0].id, "w1:seg0");
  EXPECT_FALSE(snap.effects[0].applied);
  EXPECT_EQ(snap.effects[0].token, 5);
  EXPECT_EQ(snap.effects[0].client, "w1");
  EXPECT_EQ(snap.effects[0].seq, 2);
  EXPECT_EQ(snap.effects[1].id, "w2:seg0");
  EXPECT_TRUE(snap.effects[1].applied);
  EXPECT_EQ(snap.readback.log.size(), 2u) << "effects are not writes";
  EXPECT_EQ(store->stats().effects_applied, 1);
  EXPECT_EQ(store->stats().effects_skipped, 1);
}

TEST(FencedStoreEffects, UnfencedEffectsApplyDuplicatesAndStaleTokens) {
  TempDir dir;
  auto store = FencedStore::open(dir.path(), FencingMode::kPerKey);
  ASSERT_TRUE(store->write(req("ledger", 0, 0, 7, "w2")).accepted);
  for (std::int64_t token : {5, 5, 9}) {
    auto r = store->post_effect(effect("ledger", "w1:seg0", token, "w1", EffectMode::kUnfenced));
    EXPECT_EQ(r.status, EffectStatus::kApplied) << r.error;
  }
  const StoreSnapshot snap = store->snapshot();
  ASSERT_EQ(snap.effects.size(), 3u);
  for (const auto& e : snap.effects) {
    EXPECT_EQ(e.id, "w1:seg0");
    EXPECT_TRUE(e.applied) << "duplicate-effect: the same id applied 3 times";
    EXPECT_EQ(e.mode, EffectMode::kUnfenced);
  }
}

TEST(FencedStoreEffects, IdempotentEffectsApplyOncePerKeyAndId) {
  TempDir dir;
  auto store = FencedStore::open(dir.path(), FencingMode::kPerKey);
  auto first = store->post_effect(effect("ledger", "w1:seg0", 5, "w1", EffectMode::kIdempotent));
  EXPECT_EQ(first.status, EffectStatus::kApplied);
  auto again = store->post_effect(effect("ledger", "w1:seg0", 9, "w1", EffectMode::kIdempotent));
  EXPECT_EQ(again.status, EffectStatus::kDuplicate);
  EXPECT_FALSE(again.applied);
  EXPECT_NE(again.error.find("already applied"), std::string::npos) << again.error;
  EXPECT_EQ(store->post_effect(effect("ledger", "w1:seg1", 9, "w1", EffectMode::kIdempotent)).status,
            EffectStatus::kApplied);
  EXPECT_EQ(store->post_effect(effect("other", "w1:seg0", 9, "w1", EffectMode::kIdempotent)).status,
            EffectStatus::kApplied)
      << "ids are per key";
  std::vector<bool> applied;
  for (const auto& e : store->snapshot().effects) applied.push_back(e.applied);
  EXPECT_EQ(applied, (std::vector<bool>{true, false, true, true}));
}

TEST(FencedStoreEffects, FencedEffectsTakeTheCheckThenWriteWindow) {
  TempDir dir;
  WindowGate gate;
  gate.park_token = 5;
  auto store = FencedStore::open(dir.path(), FencingMode::kCheckThenWrite, gate.options());
  auto stale = std::async(std::launch::async,
                          [&] { return store->post_effect(effect("ledger", "w1:seg0", 5, "w1", EffectMode::kFenced)); });
  gate.wait_parked();
  ASSERT_TRUE(store->write(req("ledger", 0, 0, 7, "w2")).accepted);
  gate.release();
  EXPECT_EQ(stale.get().status, EffectStatus::kApplied) << "checked before the mark rose, applied after";
}

TEST(FencedStoreEffects, EffectIdsAreCheckedAndBadRequestsThrow) {
  EXPECT_EQ(effect_id_problem("w1:seg2"), "");
  EXPECT_EQ(effect_id_problem(""), "effect id is empty");
  EXPECT_EQ(effect_id_problem("a b"), "effect id 'a b' has a character outside [A-Za-z0-9_.:-] at offset 1");
  EXPECT_EQ(effect_id_problem(std::string(257, 'e')),
            "effect id '" + std::string(40, 'e') + "...' is 257 bytes, over the 256-byte limit");
  TempDir dir;
  auto store = FencedStore::open(dir.path(), FencingMode::kPerKey);
  EXPECT_THROW((void)store->post_effect(effect("ledger", "a/b", 1, "w1", EffectMode::kFenced)), std::invalid_argument);
  EXPECT_THROW((void)store->post_effect(effect("led ger", "x", 1, "w1", EffectMode::kFenced)), std::invalid_argument);
  EXPECT_THROW((void)store->post_effect(effect("ledger", "x", -1, "w1", EffectMode::kFenced)), std::invalid_argument);
  EXPECT_EQ(store->stats().last_seq, 0);
}

// ---------------------------------------------------------------------------------------------
// Durability of counters and effects

TEST(FencedStoreModesDurability, ReopenRebuildsEffectsCountersAndMarks) {
  TempDir dir;
  StoreSnapshot before;
  {
    auto store = FencedStore::open(dir.path(), FencingMode::kPerKey);
    ASSERT_TRUE(store->write(req("ledger", 0, 0, 4)).accepted);
    ASSERT_TRUE(store->write_counter(counter("hits", 1, 4, "w1")).accepted);
    ASSERT_TRUE(store->write_counter(counter("hits", 2, 6, "w2")).accepted);
    ASSERT_FALSE(store->write_counter(counter("hits", 2, 5, "w1")).accepted);
    ASSERT_TRUE(store->post_effect(effect("ledger", "w1:seg0", 4, "w1", EffectMode::kIdempotent)).applied);
    ASSERT_FALSE(store->post_effect(effect("ledger", "w1:seg0", 4, "w1", EffectMode::kIdempotent)).applied);
    ASSERT_FALSE(store->post_effect(effect("ledger", "w0:seg0", 3, "w0", EffectMode::kFenced)).applied);
    ASSERT_TRUE(store->post_effect(effect("ledger", "w0:seg0", 3, "w0", EffectMode::kUnfenced)).applied);
    before = store->snapshot();
  }
  auto store = FencedStore::open(dir.path(), FencingMode::kPerKey);
  EXPECT_EQ(store->recovery().records, 7);
  EXPECT_EQ(store->recovery().problem, "");
  const StoreSnapshot after = store->snapshot();
  EXPECT_EQ(after.counters, before.counters);
  EXPECT_EQ(after.counters.at("hits"), 2);
  ASSERT_EQ(after.effects.size(), before.effects.size());
  for (std::size_t i = 0; i < after.effects.size(); ++i) {
    EXPECT_EQ(after.effects[i].key, before.effects[i].key);
    EXPECT_EQ(after.effects[i].id, before.effects[i].id);
    EXPECT_EQ(after.effects[i].token, before.effects[i].token);
    EXPECT_EQ(after.effects[i].client, before.effects[i].client);
    EXPECT_EQ(after.effects[i].seq, before.effects[i].seq);
    EXPECT_EQ(after.effects[i].applied, before.effects[i].applied);
    EXPECT_EQ(after.effects[i].mode, before.effects[i].mode);
  }
  ASSERT_EQ(after.readback.log.size(), before.readback.log.size());
  for (std::size_t i = 0; i < after.readback.log.size(); ++i) {
    EXPECT_EQ(after.readback.log[i].seq, before.readback.log[i].seq);
    EXPECT_EQ(after.readback.log[i].segment, before.readback.log[i].segment);
    EXPECT_EQ(after.readback.log[i].chunk, before.readback.log[i].chunk);
  }
  EXPECT_EQ(after.readback.high_water, before.readback.high_water);
  // Behaviour survives too: the idempotent id is still taken, the counter's mark still fences,
  // and seq goes on from the last record.
  EXPECT_EQ(store->post_effect(effect("ledger", "w1:seg0", 9, "w1", EffectMode::kIdempotent)).status,
            EffectStatus::kDuplicate);
  EXPECT_EQ(store->write_counter(counter("hits", 3, 5, "w1")).status, WriteStatus::kRejected);
  auto next = store->write_counter(counter("hits", 3, 6, "w2"));
  EXPECT_TRUE(next.accepted);
  EXPECT_EQ(next.seq, 9);
}

TEST(FencedStoreModesDurability, ATornEffectOrCounterRecordIsDroppedAndTheCompleteOnesKept) {
  for (const bool torn_effect : {true, false}) {
    SCOPED_TRACE(torn_effect ? "effect" : "counter");
    TempDir dir;
    std::uintmax_t size_before_last = 0;
    {
      auto store = FencedStore::open(dir.path(), FencingMode::kPerKey);
      ASSERT_TRUE(store->write_counter(counter("hits", 1, 2, "w1")).accepted);
      ASSERT_TRUE(store->post_effect(effect("ledger", "w1:seg0", 2, "w1", EffectMode::kFenced)).applied);
      size_before_last = std::filesystem::file_size(store->log_path());
      if (torn_effect)
        ASSERT_TRUE(store->post_effect(effect("ledger", "w1:seg1", 2, "w1", EffectMode::kFenced)).applied);
      else
        ASSERT_TRUE(store->write_counter(counter("hits", 2, 2, "w1")).accepted);
    }
    const auto path = dir.path() / "store.log";
    const std::string all = read_file(path);
    write_file(path, all.substr(0, all.size() - 3));  // cut the last record short
    auto store = FencedStore::open(dir.path(), FencingMode::kPerKey);
    EXPECT_EQ(store->recovery().records, 2);
    EXPECT_EQ(store->recovery().kept_bytes, size_before_last);
    EXPECT_NE(store->recovery().problem.find("torn record"), std::string::npos) << store->recovery().problem;
    const StoreSnapshot snap = store->snapshot();
    EXPECT_EQ(snap.counters.at("hits"), 1);
    ASSERT_EQ(snap.effects.size(), 1u);
    EXPECT_EQ(snap.effects[0].id, "w1:seg0");
  }
}

TEST(FencedStoreModesDurability, ALogInTheFirstFormatStillReplays) {
  // The first format's record, byte for byte: u8 version 1, i64 seq, token, segment, chunk,
  // u16 key_len, key, u16 client_len, client, u32 data_len, data. It is record type 1 now.
  TempDir dir;
  std::string payload;
  payload.push_back(1);
  put_le(payload, std::uint64_t{1});   // seq
  put_le(payload, std::uint64_t{34});  // token
  put_le(payload, std::uint64_t{2});   // segment
  put_le(payload, std::uint64_t{3});   // chunk
  put_le(payload, std::uint16_t{6});
  payload += "ledger";
  put_le(payload, std::uint16_t{2});
  payload += "w1";
  put_le(payload, std::uint32_t{4});
  payload += "data";
  write_file(dir.path() / "store.log", "fcstlog1" + sealed(payload));
  auto store = FencedStore::open(dir.path(), FencingMode::kPerKey);
  EXPECT_EQ(store->recovery().records, 1);
  EXPECT_EQ(store->recovery().problem, "");
  const auto rb = store->readback();
  ASSERT_EQ(rb.chunks.size(), 1u);
  EXPECT_EQ(rb.chunks[0].key, "ledger");
  EXPECT_EQ(rb.chunks[0].segment, 2);
  EXPECT_EQ(rb.chunks[0].chunk, 3);
  EXPECT_EQ(rb.chunks[0].token, 34);
  EXPECT_EQ(rb.chunks[0].data, "data");
  EXPECT_EQ(rb.high_water.at("ledger"), 34);
  EXPECT_EQ(store->write_counter(counter("hits", 1, 1, "w1")).seq, 2);
}

TEST(FencedStoreModesDurability, AnUnknownRecordTypeIsRefusedNotTrimmed) {
  // Its CRC matches: a complete record no crash could have torn (a newer format's, or another
  // writer's). The store refuses to start rather than cut it away; --repair-log skips it.
  TempDir dir;
  {
    auto store = FencedStore::open(dir.path(), FencingMode::kPerKey);
    ASSERT_TRUE(store->write_counter(counter("hits", 1, 1, "w1")).accepted);
  }
  std::string payload;
  payload.push_back(9);
  put_le(payload, std::uint64_t{2});
  const auto path = dir.path() / "store.log";
  const std::string damaged = read_file(path) + sealed(payload);
  write_file(path, damaged);
  try {
    (void)FencedStore::open(dir.path(), FencingMode::kPerKey);
    FAIL() << "the store started on a log ending in an unknown record type";
  } catch (const StoreLogDamaged& e) {
    EXPECT_NE(std::string(e.what()).find("unknown record type 9"), std::string::npos) << e.what();
    EXPECT_EQ(e.record(), 2);
  }
  EXPECT_EQ(read_file(path), damaged);
  StoreOptions repair;
  repair.repair_log = true;
  auto store = FencedStore::open(dir.path(), FencingMode::kPerKey, repair);
  EXPECT_TRUE(store->recovery().repaired);
  EXPECT_EQ(store->recovery().lost_records, 1);
  EXPECT_EQ(store->read_counter("hits").value, 1);
  EXPECT_EQ(store->write_counter(counter("hits", 2, 1, "w1")).seq, 3);
}
