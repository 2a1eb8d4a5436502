// Unit tests for the store's log recovery (issue 14, failing input 1) and for answers after a
// failed fdatasync. A damaged log — damage followed by intact records — is refused with the file,
// the byte offset and the record named, and nothing on disk changes; only an incomplete final
// record (a torn tail) is trimmed; --repair-log (StoreOptions::repair_log) keeps every readable
// record, never lowers a high-water mark, and reports what was lost.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fault_fs.h"
#include "fencecheck/proto/chunk.h"
#include "fencecheck/resources/store.h"
#include "temp_dir.h"

using namespace fencecheck;
using fencecheck::testing::CrashMode;
using fencecheck::testing::FaultFs;
using fencecheck::testing::TempDir;

namespace {

WriteRequest req(const std::string& key, std::int64_t chunk, std::int64_t token, const std::string& client = "w1") {
  return WriteRequest{key, 0, chunk, FencingToken(token), client,
                      encode_chunk(ChunkHeader{client, token, key, 0, chunk}, 64)};
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_file(const std::filesystem::path& p, const std::string& data) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << data;
}

// Issue 14's log: 40 records carrying tokens 100..139 for one key ("ledger", chunks 0..39).
// starts[i] / ends[i]: byte offsets of record i (0-based; record i has seq i + 1).
struct IssueLog {
  std::string bytes;
  std::vector<std::size_t> starts;
  std::vector<std::size_t> ends;
};

IssueLog make_issue_log(const std::filesystem::path& dir) {
  IssueLog log;
  auto store = FencedStore::open(dir, FencingMode::kPerKey);
  for (int i = 0; i < 40; ++i) {
    log.starts.push_back(static_cast<std::size_t>(std::filesystem::file_size(store->log_path())));
    EXPECT_TRUE(store->write(req("ledger", i, 100 + i)).accepted);
    log.ends.push_back(static_cast<std::size_t>(std::filesystem::file_size(store->log_path())));
  }
  store->close();
  log.bytes = read_file(dir / "store.log");
  return log;
}

// One of the issue's damages: the damaged bytes, and where the store must say the damage is.
struct Damage {
  std::string name;
  std::string bytes;
  std::size_t offset = 0;     // byte offset of the first unreadable record
  std::int64_t record = 0;    // its 1-based position
  std::int64_t lost = 0;      // records a repair loses (seqs missing)
};

std::vector<Damage> issue_damages(const IssueLog& log) {
  std::vector<Damage> out;
  const auto flip = [&](std::string name, std::size_t at) {
    Damage d{std::move(name), log.bytes, log.starts[20], 21, 1};
    d.bytes[at] = static_cast<char>(d.bytes[at] ^ 0x01);
    out.push_back(std::move(d));
  };
  flip("a byte inside record 20's payload", log.starts[20] + 8 + 20);
  for (std::size_t b = 0; b < 4; ++b) flip("byte " + std::to_string(b) + " of record 20's length field", log.starts[20] + b);
  for (std::size_t b = 0; b < 4; ++b) flip("byte " + std::to_string(b) + " of record 20's CRC field", log.starts[20] + 4 + b);
  {
    Damage d{"record 21 deleted whole", log.bytes, log.starts[21], 22, 1};
    d.bytes.erase(log.starts[21], log.ends[21] - log.starts[21]);
    out.push_back(std::move(d));
  }
  {
    // 4 KiB of zeros in the middle of the file.
    const std::size_t from = log.bytes.size() / 2 - 2048;
    const std::size_t to = from + 4096;
    Damage d{"4 KiB zeroed in the middle", log.bytes, 0, 0, 0};
    std::fill(d.bytes.begin() + static_cast<std::ptrdiff_t>(from), d.bytes.begin() + static_cast<std::ptrdiff_t>(to), '\0');
    for (std::size_t i = 0; i < log.starts.size(); ++i) {
      const bool hit = log.starts[i] < to && log.ends[i] > from;
      if (hit && d.record == 0) {
        d.record = static_cast<std::int64_t>(i) + 1;
        d.offset = log.starts[i];
      }
      if (hit) ++d.lost;
    }
    EXPECT_GT(log.bytes.size(), to + 2 * (log.ends[0] - log.starts[0])) << "the log is too short for intact records after the zeros";
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace

TEST(StoreLogDamage, TheIssueLogIsWhatTheIssueDescribes) {
  TempDir dir;
  const IssueLog log = make_issue_log(dir.path());
  ASSERT_EQ(log.starts.size(), 40u);
  auto store = FencedStore::open(dir.path(), FencingMode::kPerKey);
  EXPECT_EQ(store->recovery().records, 40);
  EXPECT_EQ(store->high_water().at("ledger"), 139);
}

// Each of the issue's damages: refused, naming file + offset + record, nothing changed on disk.
TEST(StoreLogDamage, DamageFollowedByIntactRecordsIsRefusedAndNothingChanges) {
  TempDir dir;
  const IssueLog log = make_issue_log(dir.path());
  const auto path = dir.path() / "store.log";
  for (const Damage& d : issue_damages(log)) {
    SCOPED_TRACE(d.name);
    write_file(path, d.bytes);
    try {
      (void)FencedStore::open(dir.path(), FencingMode::kPerKey);
      ADD_FAILURE() << "the store started on a damaged log";
    } catch (const StoreLogDamaged& e) {
      const std::string what = e.what();
      EXPECT_EQ(e.offset(), d.offset);
      EXPECT_EQ(e.record(), d.record);
      EXPECT_EQ(e.log().string(), path.string());
      EXPECT_NE(what.find(path.string()), std::string::npos) << what;
      EXPECT_NE(what.find("byte offset " + std::to_string(d.offset)), std::string::npos) << what;
      EXPECT_NE(what.find("record #" + std::to_string(d.record)), std::string::npos) << what;
      EXPECT_NE(what.find("--repair-log"), std::string::npos) << what;
    }
    EXPECT_EQ(read_file(path), d.bytes) << "the refused open changed the log";
    EXPECT_FALSE(std::filesystem::exists(dir.path() / "store.log.damaged.1"));
  }
}

// With repair: every readable record kept, the mark stays 139, token 125 is rejected; the
// repaired log then opens without repair, and the damaged file is kept beside it.
TEST(StoreLogDamage, RepairKeepsEveryReadableRecordAndTheMarkNeverFalls) {
  const IssueLog pristine = [] {
    TempDir d;
    return make_issue_log(d.path());
  }();
  for (const Damage& d : issue_damages(pristine)) {
    SCOPED_TRACE(d.name);
    TempDir dir;
    const auto path = dir.path() / "store.log";
    write_file(path, d.bytes);
    StoreOptions repair;
    repair.repair_log = true;
    {
      auto store = FencedStore::open(dir.path(), FencingMode::kPerKey, repair);
      const RecoveryReport& rec = store->recovery();
      EXPECT_TRUE(rec.repaired);
      ASSERT_FALSE(rec.damage.empty());
      EXPECT_EQ(rec.damage[0].offset, d.offset);
      EXPECT_EQ(rec.damage[0].record, d.record);
      EXPECT_EQ(rec.lost_records, d.lost) << rec.summary();
      EXPECT_NE(rec.summary().find(std::to_string(d.lost) + " record(s) lost"), std::string::npos) << rec.summary();
      EXPECT_EQ(store->high_water().at("ledger"), 139);
      const ReadBack rb = store->readback();
      EXPECT_EQ(static_cast<std::int64_t>(rb.log.size()), 40 - d.lost);
      EXPECT_EQ(rb.log.back().token, 139);
      EXPECT_EQ(rb.log.back().seq, 40);
      auto stale = store->write(req("ledger", 99, 125, "stale"));
      EXPECT_EQ(stale.status, WriteStatus::kRejected) << stale.error;
      EXPECT_EQ(stale.high_water, 139);
      auto next = store->write(req("ledger", 40, 140));
      ASSERT_TRUE(next.accepted) << next.error;
      EXPECT_EQ(next.seq, 41);
      EXPECT_EQ(read_file(rec.damaged_copy), d.bytes);
    }
    auto store = FencedStore::open(dir.path(), FencingMode::kPerKey);  // no repair needed now
    EXPECT_FALSE(store->recovery().repaired);
    EXPECT_EQ(store->recovery().problem, "");
    EXPECT_EQ(store->recovery().lost_records, d.lost);  // the gap record says so
    EXPECT_EQ(store->high_water().at("ledger"), 140);
    EXPECT_EQ(store->readback().log.size(), static_cast<std::size_t>(41 - d.lost));
    EXPECT_FALSE(std::filesystem::exists(dir.path() / "store.log.repair"));
  }
}

TEST(StoreLogDamage, ATornFinalRecordIsStillTrimmedAndTheStoreStarts) {
  TempDir dir;
  const IssueLog log = make_issue_log(dir.path());
  const auto path = dir.path() / "store.log";
  // Every cut inside the last record, and a bad CRC on a last record reaching end of file.
  std::vector<std::string> torn;
  for (std::size_t cut = log.starts[39] + 1; cut < log.ends[39]; cut += 7) torn.push_back(log.bytes.substr(0, cut));
  std::string bad_crc = log.bytes;
  bad_crc[log.ends[39] - 1] = static_cast<char>(bad_crc[log.ends[39] - 1] ^ 0x40);
  torn.push_back(bad_crc);
  torn.push_back(log.bytes + std::string(4096, '\0'));  // a zero-filled tail (size grew, data did not land)
  for (const std::string& bytes : torn) {
    SCOPED_TRACE("log of " + std::to_string(bytes.size()) + " bytes");
    write_file(path, bytes);
    auto store = FencedStore::open(dir.path(), FencingMode::kPerKey);
    const std::size_t want = bytes.size() > log.bytes.size() ? log.bytes.size() : log.starts[39];
    EXPECT_EQ(store->recovery().records, bytes.size() > log.bytes.size() ? 40 : 39);
    EXPECT_EQ(store->recovery().kept_bytes, want);
    EXPECT_EQ(store->recovery().truncated_bytes, bytes.size() - want);
    EXPECT_FALSE(store->recovery().problem.empty());
    EXPECT_EQ(std::filesystem::file_size(path), want);
    EXPECT_EQ(store->high_water().at("ledger"), bytes.size() > log.bytes.size() ? 139 : 138);
  }
}

TEST(StoreLogDamage, ACompleteRecordThatDoesNotDecodeIsRefusedNotTrimmed) {
  // Its CRC matches, so no crash tore it: another writer's (or a newer format's) record.
  TempDir dir;
  const IssueLog log = make_issue_log(dir.path());
  std::string payload(1, '\x09');  // record type 9
  payload += std::string(8, '\x29');
  std::string rec;
  for (std::uint32_t v : {static_cast<std::uint32_t>(payload.size()), crc32(payload)})
    for (int i = 0; i < 4; ++i) rec.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  const auto path = dir.path() / "store.log";
  write_file(path, log.bytes + rec + payload);
  EXPECT_THROW((void)FencedStore::open(dir.path(), FencingMode::kPerKey), StoreLogDamaged);
  EXPECT_EQ(read_file(path).size(), log.bytes.size() + 8 + payload.size());
}

// A power cut at every step of a repair (copy, temp file, fdatasync, rename, directory fsync)
// leaves the old damaged log (refused again, repairable again) or the repaired one; never a log
// with fewer readable records or a lower mark.
TEST(StoreLogDamage, ACrashAtAnyStepOfARepairLosesNothing) {
  TempDir dir;
  const IssueLog log = make_issue_log(dir.path());
  const Damage d = issue_damages(log).front();  // the flipped payload byte
  const std::filesystem::path vdir = "/virtual/repair";
  int old_log = 0;
  int new_log = 0;
  for (std::int64_t step = 1;; ++step) {
    SCOPED_TRACE("crash at mutating operation " + std::to_string(step) + " of the repair");
    auto files = std::make_shared<FaultFs>(CrashMode::kTearLastWrite, static_cast<std::uint64_t>(step));
    files->put(vdir / "store.log", d.bytes);
    StoreOptions repair;
    repair.repair_log = true;
    repair.file_system = files;
    files->arm(step);
    bool finished = false;
    try {
      auto store = FencedStore::open(vdir, FencingMode::kPerKey, repair);
      finished = true;  // the repair needed fewer operations than `step`
    } catch (const StoreLogDamaged&) {
      FAIL() << "repair refused";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("Input/output error"), std::string::npos) << e.what();
    }
    files->restart();
    StoreOptions plain;
    plain.file_system = files;
    try {
      auto store = FencedStore::open(vdir, FencingMode::kPerKey, plain);
      ++new_log;
      EXPECT_EQ(store->high_water().at("ledger"), 139);
      EXPECT_EQ(store->readback().log.size(), 39u);
    } catch (const StoreLogDamaged&) {
      ++old_log;
      EXPECT_EQ(files->content(vdir / "store.log"), d.bytes);
      auto store = FencedStore::open(vdir, FencingMode::kPerKey, repair);
      EXPECT_EQ(store->high_water().at("ledger"), 139);
    }
    if (finished) break;
    ASSERT_LT(step, 50) << "the repair never finished";
  }
  EXPECT_GT(old_log, 0);
  EXPECT_GT(new_log, 0);
}

// ---------------------------------------------------------------------------------------------
// After a failed fdatasync every answer is an error (wait_durable's result is acted on).

TEST(StoreFailedSync, ReadsAndReadBackAreErrorsOnceAnFdatasyncFailed) {
  auto files = std::make_shared<FaultFs>(CrashMode::kDropUnsynced, 1);
  StoreOptions options;
  options.file_system = files;
  auto store = FencedStore::open("/virtual/store", FencingMode::kPerKey, options);
  ASSERT_TRUE(store->write_counter(CounterWriteRequest{"hits", 1, FencingToken(5), "w1"}).accepted);
  EXPECT_EQ(store->read_counter("hits").value, 1);
  EXPECT_EQ(store->snapshot().counters.at("hits"), 1);

  files->set_fail_sync(true);
  // A reader waiting for the value the failing flush carries must not get it.
  auto write = std::async(std::launch::async, [&] {
    return store->write_counter(CounterWriteRequest{"hits", 2, FencingToken(5), "w1"});
  });
  const WriteResult w = write.get();
  EXPECT_EQ(w.status, WriteStatus::kFailed);
  EXPECT_NE(w.error.find("fdatasync"), std::string::npos) << w.error;
  EXPECT_TRUE(store->stats().failed);
  try {
    (void)store->read_counter("hits");
    ADD_FAILURE() << "read_counter answered after a failed fdatasync";
  } catch (const StoreFailed& e) {
    EXPECT_NE(std::string(e.what()).find("fdatasync"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)store->snapshot(), StoreFailed);
  EXPECT_THROW((void)store->readback(), StoreFailed);
  // Writes were already refused; they still are.
  EXPECT_EQ(store->write(req("ledger", 0, 9)).status, WriteStatus::kFailed);
}
