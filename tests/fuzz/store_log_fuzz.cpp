// Fuzz target: the reference store's log replay (FencedStore::open, resources/src/store.cpp): a
// store log, valid or damaged anywhere, as fencecheck-store finds it on disk when it starts.
//
// Input: the bytes of <data_dir>/store.log (seeds: valid logs written by the real store, in
// tests/fuzz/corpus/store_log). Each input is opened by a fresh FencedStore (per-key fencing).
// Oracle today:
//   - no crash, no sanitizer report; open() either refuses with std::runtime_error or opens;
//   - when it opens: no key's high-water mark is above the highest token of a chunk or counter
//     record for that key with a valid CRC anywhere in the file (a mark is never invented), and
//     the read-back's marks are the store's marks.
//
// TODO(issue 14, after branch store-log merges): the stronger oracle. Damage followed by intact
// records must be refused (open throws, naming the file, the offset and the record); only an
// incomplete final record is trimmed; and the repair option keeps every readable record and each
// key's highest token ever logged: then assert, for every input, that no mark is below the highest
// token of any readable record for its key (no lowered mark) and that every readable record is in
// the read-back (no lost readable record). Today's replay truncates at the first damage, so that
// oracle fails by design (issue 14's first failing input) until store-log lands.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include <spdlog/spdlog.h>

#include "fencecheck/proto/chunk.h"
#include "fencecheck/resources/store.h"
#include "fuzz_support.h"

using fencecheck::fuzz::fuzz_fail;

namespace {

template <typename T>
T le(std::string_view s, std::size_t at) {
  T v{};
  for (std::size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(static_cast<T>(static_cast<unsigned char>(s[at + i])) << (8 * i));
  return v;
}

// For every key, the highest token of a chunk (type 1) or counter (type 2) record with a valid
// CRC at any offset of the file (store.h's format): an upper bound of what replay may find, from
// our own reading of the format, apart from the store's.
std::map<std::string, std::int64_t> highest_logged_tokens(std::string_view log) {
  std::map<std::string, std::int64_t> out;
  for (std::size_t off = 0; off + 8 + 17 <= log.size(); ++off) {
    const std::uint32_t len = le<std::uint32_t>(log, off);
    if (len < 17 || len > log.size() - off - 8) continue;
    const std::string_view p = log.substr(off + 8, len);
    const auto type = static_cast<unsigned char>(p[0]);
    if (type != 1 && type != 2) continue;
    if (fencecheck::crc32(p) != le<std::uint32_t>(log, off + 4)) continue;
    const std::size_t key_at = type == 1 ? 33 : 25;  // after seq, token (and segment, chunk | value)
    if (p.size() < key_at + 2) continue;
    const std::size_t key_len = le<std::uint16_t>(p, key_at);
    if (p.size() < key_at + 2 + key_len) continue;
    const std::string key(p.substr(key_at + 2, key_len));
    const auto token = static_cast<std::int64_t>(le<std::uint64_t>(p, 9));
    auto [it, fresh] = out.emplace(key, token);
    if (!fresh && token > it->second) it->second = token;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);  // replay's warnings about damage are expected here
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view log(reinterpret_cast<const char*>(data), size);
  const auto dir = fencecheck::fuzz::fresh_dir("store");
  fencecheck::fuzz::write_file(dir / "store.log", log);

  std::unique_ptr<fencecheck::FencedStore> store;
  try {
    store = fencecheck::FencedStore::open(dir, fencecheck::FencingMode::kPerKey);
  } catch (const std::runtime_error& e) {
    if (std::strlen(e.what()) == 0) fuzz_fail("open() refused without a message");
    return 0;
  }
  const auto bound = highest_logged_tokens(log);
  const auto marks = store->high_water();
  for (const auto& [key, mark] : marks) {
    const auto it = bound.find(key);
    if (it == bound.end()) fuzz_fail("key '" + key + "' has a mark " + std::to_string(mark) + " but no record in the log");
    if (mark > it->second)
      fuzz_fail("key '" + key + "' has the mark " + std::to_string(mark) + ", above the highest token in the log (" +
                std::to_string(it->second) + ")");
  }
  const fencecheck::ReadBack rb = store->readback();
  if (rb.high_water != marks) fuzz_fail("the read-back's marks are not the store's marks");
  return 0;
}
