// Fuzz target: the reference store's log replay (FencedStore::open, resources/store/store.cpp): a
// store log, valid or damaged anywhere, as fencecheck-store finds it on disk when it starts.
//
// Input: the bytes of <data_dir>/store.log (seeds: valid logs written by the real store, in
// tests/fuzz/corpus/store_log). Each input is opened by fresh FencedStores (per-key fencing) on an
// in-memory file system (tests/store/fault_fs.h, nothing lost: no crash is simulated here), once
// as fencecheck-store starts and once with --repair-log. The oracle reads the log with its own
// parser (this file; the format of store.h, the name rules of name_problem()/effect_id_problem()
// shared with the store) and checks the rules of store.h's "Recovery":
//   1. Plain open either
//      a. refuses with StoreLogDamaged (or std::runtime_error for a file that is not a store log)
//         and the file is byte for byte what it was; or
//      b. opens, and then the file is a prefix of the input whose records all read, in seq order;
//         whatever was cut holds no intact record at any byte offset (never delete a record it
//         could read) and does not start with a complete record (CRC valid): only a torn tail is
//         trimmed; and every key's mark is exactly the highest token of the kept chunk and
//         counter records.
//   2. --repair-log opens any file that starts with the magic, and then no key's mark is below the
//      token of any readable chunk or counter record (the records found walking the file front to
//      back, skipping each damaged region to the next intact record): no lowered mark, no lost
//      readable record. (An effect record is checked against its key's mark and never raises it.)
//   3. No key has a mark above the highest token of a CRC-valid record anywhere in the file (a
//      mark is never invented), and the read-back's marks are the store's.
//   4. The repaired log then opens plainly, clean (nothing trimmed), with the same marks.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <tuple>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include <spdlog/spdlog.h>

#include "fencecheck/proto/chunk.h"
#include "fencecheck/resources/store.h"
#include "../store/fault_fs.h"
#include "fuzz_support.h"

using fencecheck::fuzz::fuzz_fail;

namespace {

using Marks = std::map<std::string, std::int64_t>;

template <typename T>
T le(std::string_view s, std::size_t at) {
  T v{};
  for (std::size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(static_cast<T>(static_cast<unsigned char>(s[at + i])) << (8 * i));
  return v;
}

constexpr std::size_t kHeader = 8;  // u32 payload_len, u32 crc32
// The longest payload the store reads: a chunk record with the longest key, client and data.
constexpr std::size_t kMaxPayload = 1 + 8 * 4 + 2 + 2 + 4 + fencecheck::kMaxKeyBytes + fencecheck::kMaxClientBytes +
                                    fencecheck::kMaxChunkBytes;

/// One record as the oracle reads it at an offset.
struct Rec {
  bool complete = false;  // a whole header and payload, length 1..max, CRC valid
  bool ok = false;        // complete and the payload decodes (store.h's format and name rules)
  std::size_t end = 0;
  std::uint8_t type = 0;
  std::int64_t seq = 0, first_seq = 0, token = 0;
  std::string key;  // types 1..3
};

Rec read_rec(std::string_view all, std::size_t off) {
  Rec r;
  if (all.size() - off < kHeader) return r;
  const std::uint32_t len = le<std::uint32_t>(all, off);
  if (len == 0 || len > kMaxPayload || all.size() - off - kHeader < len) return r;
  const std::string_view p = all.substr(off + kHeader, len);
  if (fencecheck::crc32(p) != le<std::uint32_t>(all, off + 4)) return r;
  r.complete = true;
  r.end = off + kHeader + len;
  std::size_t at = 1;
  auto i64 = [&](std::int64_t& v) {
    if (p.size() < at + 8) return false;
    v = static_cast<std::int64_t>(le<std::uint64_t>(p, at));
    at += 8;
    return true;
  };
  auto str = [&](std::size_t w, std::string& v) {
    if (p.size() < at + w) return false;
    const std::size_t n = w == 2 ? le<std::uint16_t>(p, at) : le<std::uint32_t>(p, at);
    at += w;
    if (p.size() < at + n) return false;
    v.assign(p.substr(at, n));
    at += n;
    return true;
  };
  r.type = static_cast<std::uint8_t>(p[0]);
  std::string client, id, data;
  std::int64_t a = 0, b = 0;
  switch (r.type) {
    case 1:
      if (!i64(r.seq) || !i64(r.token) || !i64(a) || !i64(b) || !str(2, r.key) || !str(2, client) || !str(4, data))
        return r;
      if (a < 0 || b < 0) return r;
      break;
    case 2:
      if (!i64(r.seq) || !i64(r.token) || !i64(a) || !str(2, r.key) || !str(2, client) || a < 0) return r;
      break;
    case 3: {
      if (!i64(r.seq) || !i64(r.token) || p.size() < at + 2) return r;
      const auto mode = static_cast<std::uint8_t>(p[at]);
      const auto applied = static_cast<std::uint8_t>(p[at + 1]);
      at += 2;
      if (mode > 2 || applied > 1 || !str(2, r.key) || !str(2, client) || !str(2, id)) return r;
      if (!fencecheck::effect_id_problem(id).empty()) return r;
      break;
    }
    case 4:
      if (p.size() != 17 || !i64(r.seq) || !i64(r.first_seq)) return r;
      r.ok = r.first_seq >= 1 && r.seq >= r.first_seq;
      return r;
    default:
      return r;
  }
  if (at != p.size() || r.seq < 1 || r.token < 0) return r;
  if (!fencecheck::name_problem("key", r.key, fencecheck::kMaxKeyBytes).empty()) return r;
  if (!fencecheck::name_problem("client", client, fencecheck::kMaxClientBytes).empty()) return r;
  r.first_seq = r.seq;
  r.ok = true;
  return r;
}

/// The first offset >= from where a record reads (its seq not looked at), or npos.
std::size_t next_intact(std::string_view all, std::size_t from) {
  for (std::size_t p = from; p < all.size(); ++p)
    if (read_rec(all, p).ok) return p;
  return std::string_view::npos;
}

// Chunk and counter records raise their key's mark; an effect is checked against the mark and never
// raises it (FencedStore::post_effect), and a gap has no key.
void raise(Marks& m, const Rec& r) {
  if (r.type != 1 && r.type != 2) return;
  auto [it, fresh] = m.emplace(r.key, r.token);
  if (!fresh && r.token > it->second) it->second = r.token;
}

/// (type, key, token) of each chunk and counter record: what the read-back's log must list.
using Writes = std::multiset<std::tuple<int, std::string, std::int64_t>>;

void note(Writes& w, const Rec& r) {
  if (r.type == 1 || r.type == 2) w.emplace(r.type, r.key, r.token);
}

Writes readback_writes(const fencecheck::ReadBack& rb) {
  Writes w;
  for (const auto& a : rb.log) w.emplace(a.kind == fencecheck::WriteKind::kCounter ? 2 : 1, a.key, a.token);
  return w;
}

/// Every readable record: walk front to back, skipping each damaged region to the next intact
/// record (what --repair-log must keep). Their marks per key, and their writes.
std::pair<Marks, Writes> readable(std::string_view all) {
  Marks m;
  Writes w;
  for (std::size_t off = 8; off < all.size();) {
    const Rec r = read_rec(all, off);
    if (r.ok) {
      raise(m, r);
      note(w, r);
      off = r.end;
      continue;
    }
    off = next_intact(all, off);
  }
  return {m, w};
}

/// For every key, the highest token of any CRC-valid record at any offset: no mark may be above.
Marks any_marks(std::string_view all) {
  Marks m;
  for (std::size_t off = 0; off < all.size(); ++off)
    if (const Rec r = read_rec(all, off); r.ok) raise(m, r);
  return m;
}

std::string show(const Marks& m) {
  std::string out;
  for (const auto& [k, v] : m) out += (out.empty() ? "" : ", ") + k + "=" + std::to_string(v);
  return "{" + out + "}";
}

const std::filesystem::path kDir = "/fuzz-store";
const std::filesystem::path kLog = kDir / "store.log";

std::unique_ptr<fencecheck::FencedStore> open_on(const std::shared_ptr<fencecheck::testing::FaultFs>& fs, bool repair) {
  fencecheck::StoreOptions options;
  options.file_system = fs;
  options.repair_log = repair;
  return fencecheck::FencedStore::open(kDir, fencecheck::FencingMode::kPerKey, options);
}

/// open_on() that must succeed: a refusal is a finding, named with `what`.
std::unique_ptr<fencecheck::FencedStore> must_open(const std::shared_ptr<fencecheck::testing::FaultFs>& fs, bool repair,
                                                   const char* what) {
  try {
    return open_on(fs, repair);
  } catch (const std::exception& e) {
    fuzz_fail(std::string(what) + ": " + e.what());
  }
}

void check_marks_not_invented(const fencecheck::FencedStore& store, const Marks& bound, const char* how) {
  const Marks marks = store.high_water();
  for (const auto& [key, mark] : marks) {
    const auto it = bound.find(key);
    if (it == bound.end() || mark > it->second)
      fuzz_fail(std::string(how) + ": key '" + key + "' has the mark " + std::to_string(mark) +
                ", above every token logged for it (" + show(bound) + ")");
  }
  if (store.readback().high_water != marks) fuzz_fail(std::string(how) + ": the read-back's marks are not the store's");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);  // replay's warnings about damage are expected here
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const std::string_view all(input);
  const bool store_log = size >= 8 && all.substr(0, 8) == "fcstlog1";
  const Marks bound = any_marks(all);

  // 1. Plain open, as fencecheck-store starts.
  {
    auto fs = std::make_shared<fencecheck::testing::FaultFs>(fencecheck::testing::CrashMode::kDropUnsynced, 1);
    fs->put(kLog, input);
    std::unique_ptr<fencecheck::FencedStore> store;
    try {
      store = open_on(fs, false);
    } catch (const std::runtime_error& e) {
      if (std::strlen(e.what()) == 0) fuzz_fail("open() refused without a message");
      if (fs->content(kLog) != input) fuzz_fail(std::string("open() refused and changed the log: ") + e.what());
      if (store_log && dynamic_cast<const fencecheck::StoreLogDamaged*>(&e) == nullptr)
        fuzz_fail(std::string("a log with the magic refused with something else than StoreLogDamaged: ") + e.what());
    }
    if (store) {
      const std::string kept = fs->content(kLog);
      if (!store_log) {
        if (size >= 8 || input != std::string_view("fcstlog1").substr(0, size))
          fuzz_fail("a file that is not a store log was opened");
      } else {
        if (kept.size() > input.size() || input.compare(0, kept.size(), kept) != 0)
          fuzz_fail("open() left a log that is not a prefix of the input (" + std::to_string(kept.size()) + " bytes)");
        Marks prefix;
        Writes writes;
        std::int64_t last = 0;
        for (std::size_t off = 8; off < kept.size();) {
          const Rec r = read_rec(kept, off);
          if (!r.ok) fuzz_fail("the kept log has an unreadable record at offset " + std::to_string(off));
          if (r.first_seq != last + 1) fuzz_fail("the kept log's seqs jump at offset " + std::to_string(off));
          last = r.seq;
          raise(prefix, r);
          note(writes, r);
          off = r.end;
        }
        if (kept.size() < input.size()) {
          if (read_rec(all, kept.size()).complete)
            fuzz_fail("open() trimmed a complete record at offset " + std::to_string(kept.size()) + " as a torn tail");
          if (const auto p = next_intact(all, kept.size()); p != std::string_view::npos)
            fuzz_fail("open() trimmed " + std::to_string(input.size() - kept.size()) +
                      " bytes holding an intact record at offset " + std::to_string(p));
        }
        if (store->high_water() != prefix)
          fuzz_fail("after a plain open the marks are " + show(store->high_water()) + ", the kept records say " +
                    show(prefix));
        if (readback_writes(store->readback()) != writes)
          fuzz_fail("after a plain open the read-back's log does not list exactly the kept records' writes");
        check_marks_not_invented(*store, bound, "plain open");
      }
    }
  }

  // 2.-4. --repair-log.
  if (!store_log) return 0;
  auto fs = std::make_shared<fencecheck::testing::FaultFs>(fencecheck::testing::CrashMode::kDropUnsynced, 1);
  fs->put(kLog, input);
  auto store = must_open(fs, true, "--repair-log refused a log");
  const auto [readable_marks, readable_writes] = readable(all);
  const Marks marks = store->high_water();
  for (const auto& [key, token] : readable_marks) {
    const auto it = marks.find(key);
    if (it == marks.end() || it->second < token)
      fuzz_fail("after --repair-log key '" + key + "' has the mark " +
                (it == marks.end() ? std::string("(none)") : std::to_string(it->second)) +
                ", below the readable record with token " + std::to_string(token));
  }
  if (readback_writes(store->readback()) != readable_writes)
    fuzz_fail("after --repair-log the read-back's log does not list exactly the readable records' writes");
  check_marks_not_invented(*store, bound, "--repair-log");
  store.reset();
  store = must_open(fs, false, "the repaired log does not open plainly");
  if (store->recovery().truncated_bytes != 0) fuzz_fail("the repaired log had a torn tail");
  if (store->high_water() != marks) fuzz_fail("the repaired log reopens with other marks");
  return 0;
}
