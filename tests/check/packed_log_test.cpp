// PackedLog (packed_log.h): the accept log packed for the checkers. Every entry reads back exactly
// as pushed (every int64, across blocks), the index finds each write id's first and latest-seq
// entries as a map does, and a typical log takes a small fraction of its AcceptedWrites.
#include "fencecheck/harness/packed_log.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace fh = fencecheck::harness;
using fencecheck::AcceptedWrite;
using fencecheck::WriteKind;

namespace {

AcceptedWrite logged(std::int64_t seq, std::string client, std::int64_t token, std::string key, std::int64_t segment,
                     std::int64_t chunk) {
  AcceptedWrite w;
  w.seq = seq;
  w.client = std::move(client);
  w.token = token;
  w.key = std::move(key);
  w.segment = segment;
  w.chunk = chunk;
  return w;
}

template <typename Got>
void expect_same(const Got& got, const AcceptedWrite& want, std::size_t at) {
  EXPECT_EQ(got.seq, want.seq) << "entry " << at;
  EXPECT_EQ(got.key, want.key) << "entry " << at;
  EXPECT_EQ(got.segment, want.segment) << "entry " << at;
  EXPECT_EQ(got.chunk, want.chunk) << "entry " << at;
  EXPECT_EQ(got.token, want.token) << "entry " << at;
  EXPECT_EQ(got.client, want.client) << "entry " << at;
  EXPECT_EQ(got.kind, want.kind) << "entry " << at;
  EXPECT_EQ(got.value, want.value) << "entry " << at;
}

using Id = std::tuple<std::string, std::int64_t, std::string, std::int64_t, std::int64_t>;

/// Each write id's first position in `log` and the first of its largest seqs: what find() answers.
std::pair<std::map<Id, std::uint32_t>, std::map<Id, std::uint32_t>> first_and_latest(const std::vector<AcceptedWrite>& log) {
  std::map<Id, std::uint32_t> first_of, latest_of;
  for (std::uint32_t p = 0; p < log.size(); ++p) {
    const auto& w = log[p];
    const Id id{w.client, w.token, w.key, w.segment, w.chunk};
    first_of.try_emplace(id, p);
    auto [it, fresh] = latest_of.try_emplace(id, p);
    if (!fresh && w.seq > log[it->second].seq) it->second = p;
  }
  return {first_of, latest_of};
}

}  // namespace

TEST(PackedLog, ReadsBackEveryInt64ExactlyAcrossBlocks) {
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  const std::int64_t extremes[] = {kMin, kMin + 1, -1, 0, 1, 255, 256, 65'535, kMax - 1, kMax};
  std::vector<AcceptedWrite> log;
  std::mt19937_64 rng(16);
  // Blocks whose fields span everything from one value (0 bytes) to the whole int64 range (8).
  for (std::size_t i = 0; i < 3 * fh::PackedLog::kBlock + 17; ++i) {
    AcceptedWrite w = logged(static_cast<std::int64_t>(i) + 1, "w" + std::to_string(i % 5), 7, "k", 0, 0);
    const std::size_t block = i / fh::PackedLog::kBlock;
    if (block == 1) {  // every field anywhere in int64
      w.seq = extremes[rng() % 10];
      w.segment = static_cast<std::int64_t>(rng());
      w.chunk = extremes[rng() % 10];
      w.token = static_cast<std::int64_t>(rng() >> (rng() % 64));
      w.value = extremes[rng() % 10];
      w.kind = rng() % 2 ? WriteKind::kCounter : WriteKind::kChunk;
    } else if (block == 2) {  // narrow ranges, one byte or two
      w.segment = static_cast<std::int64_t>(rng() % 300) - 150;
      w.chunk = static_cast<std::int64_t>(rng() % 4);
      w.token = 1'000'000 + static_cast<std::int64_t>(rng() % 70'000);
    }
    w.key = "key-" + std::to_string(rng() % 40);
    log.push_back(w);
  }
  fh::PackedLog packed(log);
  ASSERT_EQ(packed.size(), log.size());
  for (std::size_t i = 0; i < log.size(); ++i) expect_same(packed[i], log[i], i);
  std::size_t n = 0;
  for (const fh::LoggedWrite w : packed) {
    EXPECT_EQ(packed.key_name(w.key_id), w.key);
    EXPECT_EQ(packed.client_name(w.client_id), w.client);
    expect_same(w.to_accepted_write(), log[n], n);
    ++n;
  }
  EXPECT_EQ(n, log.size());
  ASSERT_TRUE(packed.key_id(log[0].key));
  EXPECT_EQ(*packed.key_id(log[0].key), packed[0].key_id);
  EXPECT_FALSE(packed.key_id("no-such-key"));
  EXPECT_FALSE(packed.client_id("w5"));
  ASSERT_TRUE(packed.client_id("w4"));
  EXPECT_EQ(packed.client_name(*packed.client_id("w4")), "w4");
}

TEST(PackedLog, EntriesNotYetPackedReadBackAndAClearedLogStartsAgain) {
  fh::PackedLog packed;
  EXPECT_TRUE(packed.empty());
  EXPECT_FALSE(packed.find("w1", 3, "ledger", 0, 0));
  packed.push_back(logged(9, "w1", 3, "ledger", 0, 0));
  ASSERT_EQ(packed.size(), 1u);  // fewer than a block: staged, read as they are
  expect_same(packed[0], logged(9, "w1", 3, "ledger", 0, 0), 0);
  ASSERT_TRUE(packed.find("w1", 3, "ledger", 0, 0));
  // Pushing after a find() drops the index: the next find() sees the new entry.
  packed.push_back(logged(10, "w1", 3, "ledger", 0, 0));
  const auto f = packed.find("w1", 3, "ledger", 0, 0);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->first, 0u);
  EXPECT_EQ(f->latest, 1u);
  const std::string_view key = packed[0].key;
  packed.clear();
  EXPECT_TRUE(packed.empty());
  EXPECT_FALSE(packed.find("w1", 3, "ledger", 0, 0));
  EXPECT_EQ(key, "ledger");  // the dictionaries outlive clear(): views given out stay valid
  packed.push_back(logged(1, "w2", 4, "hits", 1, 1));
  expect_same(packed[0], logged(1, "w2", 4, "hits", 1, 1), 0);
}

TEST(PackedLog, FindsEachWriteIdByEveryFieldWithItsFirstAndLatestSeqEntries) {
  const fh::PackedLog log(std::vector<AcceptedWrite>{logged(1, "w1", 3, "ledger", 0, 0), logged(2, "w2", 4, "ledger", 0, 0),
                                                      logged(5, "w1", 3, "ledger", 0, 0), logged(3, "w1", 3, "ledger", 0, 0),
                                                      logged(4, "w1", 3, "ledger", 0, 1)});
  const auto w1 = log.find("w1", 3, "ledger", 0, 0);
  ASSERT_TRUE(w1);
  EXPECT_EQ(w1->first, 0u);
  EXPECT_EQ(w1->latest, 2u);  // seq 5
  const auto w2 = log.find("w2", 4, "ledger", 0, 0);
  ASSERT_TRUE(w2);
  EXPECT_EQ(w2->first, 1u);
  EXPECT_EQ(w2->latest, 1u);
  ASSERT_TRUE(log.find("w1", 3, "ledger", 0, 1));
  EXPECT_EQ(log.find("w1", 3, "ledger", 0, 1)->first, 4u);
  // One field off, each in turn: not in the log.
  for (const auto& [client, token, key, segment, chunk] :
       {Id{"w3", 3, "ledger", 0, 0}, Id{"w1", 4, "ledger", 0, 0}, Id{"w1", 3, "ledgers", 0, 0}, Id{"w1", 3, "ledger", 1, 0},
        Id{"w1", 3, "ledger", 0, 2}, Id{"", 3, "ledger", 0, 0}, Id{"w2", 3, "ledger", 0, 0}})
    EXPECT_FALSE(log.find(client, token, key, segment, chunk)) << client << " " << token << " " << key << " " << segment << " " << chunk;
}

TEST(PackedLog, AgreesWithAMapOnALongLogWithRepeatedIds) {
  std::vector<AcceptedWrite> log;
  std::mt19937_64 rng(16);
  for (int i = 0; i < 200'000; ++i)
    log.push_back(logged(static_cast<std::int64_t>(rng() % 1000), "w" + std::to_string(rng() % 7),
                         static_cast<std::int64_t>(rng() % 50), "k" + std::to_string(rng() % 13),
                         static_cast<std::int64_t>(rng() % 4), static_cast<std::int64_t>(rng() % 9)));
  const auto [first_of, latest_of] = first_and_latest(log);
  ASSERT_LT(first_of.size(), log.size());  // ids do repeat
  const fh::PackedLog packed(log);
  for (const auto& [id, p] : first_of) {
    const auto& [client, token, key, segment, chunk] = id;
    const auto f = packed.find(client, token, key, segment, chunk);
    ASSERT_TRUE(f);
    EXPECT_EQ(f->first, p);
    EXPECT_EQ(f->latest, latest_of.at(id));  // the first entry with the largest seq
  }
  EXPECT_FALSE(packed.find("w7", 0, "k0", 0, 0));
  EXPECT_FALSE(packed.find("w0", 50, "k0", 0, 0));
}

TEST(PackedLog, AskedInLogOrderItAnswersAsTheIndexDoesAtEveryRepeatedEntry) {
  // find() first looks at the entry after the last one it found (a history acknowledges writes in
  // about log order), and must still answer with a write's first entry when the entry there is a
  // second or later one of a write logged more than once, or another write.
  std::vector<AcceptedWrite> log;
  std::mt19937_64 rng(61);
  for (int i = 0; i < 50'000; ++i) {
    if (i > 0 && rng() % 5 == 0) {  // a retry: a write logged before, again (with a larger seq half the time)
      AcceptedWrite again = log[log.size() - 1 - rng() % std::min<std::size_t>(log.size(), 40)];
      again.seq = (rng() % 2 == 0) ? i : again.seq;
      log.push_back(again);
      continue;
    }
    log.push_back(logged(i, "w" + std::to_string(rng() % 5), static_cast<std::int64_t>(rng() % 30),
                         "k" + std::to_string(rng() % 7), static_cast<std::int64_t>(rng() % 3),
                         static_cast<std::int64_t>(rng() % 6)));
  }
  const auto [first_of, latest_of] = first_and_latest(log);
  const fh::PackedLog packed(log);
  std::size_t repeated = 0;
  for (std::uint32_t p = 0; p < log.size(); ++p) {
    const auto& w = log[p];
    const Id id{w.client, w.token, w.key, w.segment, w.chunk};
    if (first_of.at(id) != p) ++repeated;
    const auto f = packed.find(w.client, w.token, w.key, w.segment, w.chunk);
    ASSERT_TRUE(f) << "entry " << p;
    EXPECT_EQ(f->first, first_of.at(id)) << "entry " << p;
    EXPECT_EQ(f->latest, latest_of.at(id)) << "entry " << p;
    // A write never logged, asked between two logged ones, is not found.
    if (p % 97 == 0) EXPECT_FALSE(packed.find(w.client, w.token + 1000, w.key, w.segment, w.chunk));
  }
  EXPECT_GT(repeated, 5'000u);  // the repeated entries were asked for, not only first ones
}

TEST(PackedLog, SmallLogsWhoseRepeatFilterIsCrowdedStillFindEachWritesFirstAndLatestEntries) {
  // The repeats of a log are found through a Bloom filter of 16 bits an entry (one 512-bit block
  // for the smallest logs), whose false alarms are looked at again exactly: a crowded filter, with
  // many false alarms, must give the same answers as a map, asked in log order (the entry after the
  // last write found is looked at first) and in reverse (the index).
  std::mt19937_64 rng(512);
  for (int round = 0; round < 400; ++round) {
    std::vector<AcceptedWrite> log;
    const std::size_t n = 2 + rng() % 60;
    for (std::size_t i = 0; i < n; ++i)
      log.push_back(logged(static_cast<std::int64_t>(rng() % 50), "w" + std::to_string(rng() % 3),
                           static_cast<std::int64_t>(rng() % 4), "k" + std::to_string(rng() % 2), 0,
                           static_cast<std::int64_t>(rng() % 5)));
    const auto [first_of, latest_of] = first_and_latest(log);
    const fh::PackedLog packed(log);
    for (int order = 0; order < 2; ++order) {
      for (std::size_t i = 0; i < n; ++i) {
        const auto& w = log[order == 0 ? i : n - 1 - i];
        const Id id{w.client, w.token, w.key, w.segment, w.chunk};
        const auto f = packed.find(w.client, w.token, w.key, w.segment, w.chunk);
        ASSERT_TRUE(f) << "round " << round;
        EXPECT_EQ(f->first, first_of.at(id)) << "round " << round << " entry " << i;
        EXPECT_EQ(f->latest, latest_of.at(id)) << "round " << round << " entry " << i;
      }
    }
  }
}

TEST(PackedLog, ALogInSeqOrderTakesUnderATenthOfItsAcceptedWrites) {
  // The shape of a run's log (bench/synthetic_history.h): holders taking turns on 50 keys, four
  // chunk writes a holding, seqs in order with gaps for the rejections.
  std::vector<AcceptedWrite> log;
  std::int64_t seq = 0, token = 1;
  for (int holding = 0; holding < 50'000; ++holding) {
    token += 3;
    const std::string key = "key-" + std::to_string(holding % 50);
    const std::string worker = "w" + std::to_string(holding % 200);
    for (int c = 0; c < 4; ++c) log.push_back(logged(++seq, worker, token, key, holding / 50, c));
    if (holding % 64 == 0) ++seq;
  }
  const fh::PackedLog packed(log);
  const std::size_t before_index = packed.memory_bytes();
  EXPECT_LT(before_index, log.size() * 10);  // AcceptedWrite: 112 bytes, plus its strings' heap when long
  EXPECT_GT(before_index, log.size() * 4);   // the key, the client, the chunk, the seq, the segment and the token cannot all fit in less
  ASSERT_TRUE(packed.find("w0", 4, "key-0", 0, 0));
  EXPECT_LT(packed.memory_bytes() - before_index, log.size() * 12);  // the index: 5 bytes a slot
  for (std::size_t i = 0; i < log.size(); i += 997) expect_same(packed[i], log[i], i);
}

TEST(PackedLog, ReadsReadbackJsonsLogStraightIntoItselfAndARepeatedLogMemberStartsAgain) {
  fencecheck::ReadBack rb;
  rb.resource = "store";
  for (std::int64_t i = 1; i <= 10'000; ++i)
    rb.log.push_back(logged(i, "w" + std::to_string(i % 9), i / 4, "k" + std::to_string(i % 5), i % 7, i % 4));
  rb.high_water["k1"] = 2'500;
  const auto path = std::filesystem::temp_directory_path() / ("fencecheck-packed-log-" + std::to_string(::getpid()) + ".json");
  {
    std::ofstream out(path);
    fencecheck::write_readback_json(out, rb);
  }
  fh::PackedLog packed;
  const fencecheck::ReadBack back = fencecheck::read_readback_file(path, packed.sink());
  EXPECT_TRUE(back.log.empty());
  EXPECT_EQ(back.resource, "store");
  EXPECT_EQ(back.high_water, rb.high_water);
  ASSERT_EQ(packed.size(), rb.log.size());
  for (std::size_t i = 0; i < rb.log.size(); ++i) expect_same(packed[i], rb.log[i], i);
  // {"log":[...],"log":[one]}: the last member wins, as in the document.
  {
    std::ofstream out(path);
    out << R"({"log":[{"seq":1,"key":"a","segment":0,"chunk":0,"token":1,"client":"w"}],)"
        << R"("log":[{"seq":5,"key":"b","segment":1,"chunk":2,"token":3,"client":"v"}]})";
  }
  fh::PackedLog last;
  (void)fencecheck::read_readback_file(path, last.sink());
  ASSERT_EQ(last.size(), 1u);
  expect_same(last[0], logged(5, "v", 3, "b", 1, 2), 0);
  std::filesystem::remove(path);
}

TEST(PackedLog, AMovedLogFindsWithItsOwnIndexAndTheMovedFromOneIsEmpty) {
  fh::PackedLog a(std::vector<AcceptedWrite>{logged(1, "w1", 3, "ledger", 0, 0), logged(2, "w2", 4, "ledger", 0, 1)});
  ASSERT_TRUE(a.find("w2", 4, "ledger", 0, 1));  // the index is built for `a`
  const std::string_view client = a[1].client;
  fh::PackedLog b(std::move(a));
  const auto f = b.find("w2", 4, "ledger", 0, 1);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->first, 1u);
  EXPECT_EQ(client, "w2");                            // the dictionaries moved, not copied
  EXPECT_TRUE(a.empty());                             // NOLINT(bugprone-use-after-move): the moved-from state is specified
  EXPECT_FALSE(a.find("w2", 4, "ledger", 0, 1));      // NOLINT(bugprone-use-after-move)
  fh::PackedLog c;
  c = std::move(b);
  ASSERT_TRUE(c.find("w1", 3, "ledger", 0, 0));
  EXPECT_EQ(c.find("w1", 3, "ledger", 0, 0)->first, 0u);
  EXPECT_TRUE(b.empty());  // NOLINT(bugprone-use-after-move)
  b.push_back(logged(7, "w9", 1, "k", 0, 0));
  ASSERT_TRUE(b.find("w9", 1, "k", 0, 0));
}

TEST(PackedLog, AWriteRetriedWithItsLargestSeqFirstCostsTheIndexNothingMore) {
  // 50,000 writes each logged twice. In `first_largest` the first entry has the larger seq (the
  // latest-seq entry is the first: nothing to keep beyond the positions); in `second_largest` the
  // second has (one more position kept per write).
  std::vector<AcceptedWrite> first_largest, second_largest;
  for (std::int64_t i = 0; i < 50'000; ++i) {
    first_largest.push_back(logged(2 * i + 2, "w1", i, "k", 0, 0));
    first_largest.push_back(logged(2 * i + 1, "w1", i, "k", 0, 0));
    second_largest.push_back(logged(2 * i + 1, "w1", i, "k", 0, 0));
    second_largest.push_back(logged(2 * i + 2, "w1", i, "k", 0, 0));
  }
  const fh::PackedLog a(first_largest), b(second_largest);
  const std::size_t a_packed = a.memory_bytes(), b_packed = b.memory_bytes();
  const auto fa = a.find("w1", 7, "k", 0, 0), fb = b.find("w1", 7, "k", 0, 0);
  ASSERT_TRUE(fa);
  ASSERT_TRUE(fb);
  EXPECT_EQ(fa->first, 14u);
  EXPECT_EQ(fa->latest, 14u);
  EXPECT_EQ(fb->first, 14u);
  EXPECT_EQ(fb->latest, 15u);
  // The indexes: the same table of 50,000 positions; b's also keeps 50,000 (first, latest) pairs.
  EXPECT_LT((a.memory_bytes() - a_packed) + 50'000 * 8, b.memory_bytes() - b_packed);
}

TEST(PackedLog, AskingTheSameWriteTwiceGivesTheAnswerOfTheLogAsItIsNow) {
  // find() remembers its last answer (per thread) for the rules that ask one after the other:
  // every change of the log, and another log, must make it ask the index again.
  fh::PackedLog a(std::vector<AcceptedWrite>{logged(1, "w1", 3, "ledger", 0, 0)});
  ASSERT_TRUE(a.find("w1", 3, "ledger", 0, 0));
  EXPECT_EQ(a.find("w1", 3, "ledger", 0, 0)->first, 0u);
  EXPECT_FALSE(a.find("w1", 3, "ledger", 0, 1));  // another chunk: not the remembered write
  EXPECT_FALSE(a.find("w2", 3, "ledger", 0, 0));  // another client
  // A later entry of the same write with a larger seq: the latest entry moves.
  a.push_back(logged(5, "w1", 3, "ledger", 0, 0));
  ASSERT_TRUE(a.find("w1", 3, "ledger", 0, 0));
  EXPECT_EQ(a.find("w1", 3, "ledger", 0, 0)->latest, 1u);
  // Cleared and filled again, the write is at another position.
  a.clear();
  EXPECT_FALSE(a.find("w1", 3, "ledger", 0, 0));
  a.push_back(logged(1, "w0", 1, "other", 0, 0));
  a.push_back(logged(2, "w1", 3, "ledger", 0, 0));
  ASSERT_TRUE(a.find("w1", 3, "ledger", 0, 0));
  EXPECT_EQ(a.find("w1", 3, "ledger", 0, 0)->first, 1u);
  // Asked of a client the log did not know yet (no index built), then logged: found.
  EXPECT_FALSE(a.find("w7", 9, "k", 0, 0));
  a.push_back(logged(3, "w7", 9, "k", 0, 0));
  ASSERT_TRUE(a.find("w7", 9, "k", 0, 0));
  EXPECT_EQ(a.find("w7", 9, "k", 0, 0)->first, 2u);
  // Another log, with the same write elsewhere, answers for itself.
  fh::PackedLog b(std::vector<AcceptedWrite>{logged(1, "w0", 1, "other", 0, 0), logged(2, "w0", 2, "other", 0, 0),
                                             logged(3, "w1", 3, "ledger", 0, 0)});
  ASSERT_TRUE(b.find("w1", 3, "ledger", 0, 0));
  EXPECT_EQ(b.find("w1", 3, "ledger", 0, 0)->first, 2u);
  EXPECT_EQ(a.find("w1", 3, "ledger", 0, 0)->first, 1u);
  // A moved log: the new owner answers with its own positions, the moved-from one with none.
  fh::PackedLog c(std::move(b));
  EXPECT_FALSE(b.find("w1", 3, "ledger", 0, 0));  // NOLINT(bugprone-use-after-move): specified as empty
  ASSERT_TRUE(c.find("w1", 3, "ledger", 0, 0));
  EXPECT_EQ(c.find("w1", 3, "ledger", 0, 0)->first, 2u);
}
