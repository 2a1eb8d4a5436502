// fencecheck — the resource's accept log packed for the checkers (issue 16: 10^8 events judged in
// under 1 GiB).
//
// A ReadBack holds its accept log as std::vector<AcceptedWrite>: 112 bytes per entry (two
// std::string and six 64-bit fields), 2,874 MiB for the 26.7 M entries of a 10^8-event run. The
// streamed checkers only read the log: PackedLog keeps it in about a tenth of that.
// - Keys and clients are interned: each entry keeps two small ids into two dictionaries (a run
//   has a few hundred of each).
// - Entries are packed in blocks of kBlock, by frame of reference (as column stores do: Goldstein,
//   Ramakrishnan, Shaft, "Compressing relations and indexes", ICDE 1998). Within a block each
//   field is stored as its distance from the block's minimum, in as few whole bytes as the block's
//   range needs: a field that does not vary (the kind, a chunk write's value) takes none. The seq
//   is stored as seq minus the entry's position, which varies only by the seqs the log does not
//   hold (rejections, effects).
// - Any entry is read back in O(1) (its block, then fixed-width fields), so positions into the log
//   are 4-byte numbers, and the index by write id (find()) holds only those.
// The values read back are exactly those pushed, for every int64 (the distances are taken modulo
// 2^64, in unsigned arithmetic).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/container_hash/hash.hpp>
#include <boost/unordered/unordered_flat_map.hpp>

#include "fencecheck/proto/readback.h"

namespace fencecheck::harness {

/// One accept-log entry as PackedLog gives it back: AcceptedWrite's fields, with the key and the
/// client as views into the log's dictionaries, and their ids in those dictionaries. The views
/// stay valid whatever is pushed or cleared later, for as long as the dictionaries live: those of
/// the PackedLog that gave them, or of the one it was moved into (a log moved-assigned over drops
/// its own, and the views it gave).
struct LoggedWrite {
  std::int64_t seq = 0;
  std::string_view key;
  std::int64_t segment = 0;
  std::int64_t chunk = 0;
  std::int64_t token = 0;
  std::string_view client;
  WriteKind kind = WriteKind::kChunk;
  std::int64_t value = 0;
  std::uint32_t key_id = 0;     ///< PackedLog::key_name(key_id) == key
  std::uint32_t client_id = 0;  ///< PackedLog::client_name(client_id) == client

  /// The entry as an AcceptedWrite (copies the strings).
  [[nodiscard]] AcceptedWrite to_accepted_write() const;
};

/// An accept log, packed (see the top of this file), read in log order or at any position, found
/// by write id (find()).
///
/// find() looks first at the entry after the last write it found (per thread): a history
/// acknowledges writes in about the order the resource logged them. For that it needs to know
/// which entries repeat an earlier one (a write logged twice), found on the first find() with one
/// read of the log through a Bloom filter (at least 16 bits an entry, rounded up to a power of two
/// of 64-byte blocks: 2-4 bytes an entry while it runs, then freed; packed_log.cpp says how).
/// Only a find() that the next entry does not answer builds the index by write id, a hash table
/// of positions; a history whose acknowledgements come out of log order builds it on its first
/// miss, so it pays for both.
///
/// Memory: a run's log takes about 6-8 bytes an entry (6.0 at 10^8 events in
/// bench/bench_stream_check, which prints it; a field whose values spread widely within 4,096
/// entries takes up to 8 bytes), plus the dictionaries, plus the repeats found (a few bytes each);
/// the index, when built, adds 5 bytes per slot of its hash table (about 6 per entry).
/// Thread-safety: push_back() and clear() need exclusive access; the readers may be called from
/// several threads at once (find() builds the repeats and the index once each, under
/// std::call_once), except that memory_bytes() must not run while another thread's find() may be
/// building them.
/// Errors: push_back() throws std::length_error past 2^32 - 2 entries (positions are 4 bytes) or
/// 2^32 - 1 distinct keys or clients; std::bad_alloc. A push_back() that throws leaves the log as
/// it was.
class PackedLog {
 public:
  /// Entries per block (the unit of packing): large enough that a block's own header is
  /// negligible, small enough that the ranges in it stay narrow.
  static constexpr std::size_t kBlock = 4096;

  PackedLog();
  /// The log of a read-back, in its order.
  explicit PackedLog(const std::vector<AcceptedWrite>& log);
  ~PackedLog();
  /// Moves the entries and dictionaries (views given out stay valid), not the index: the new
  /// owner builds its own on its first find(). The moved-from log is empty. std::bad_alloc.
  PackedLog(PackedLog&& other);
  PackedLog& operator=(PackedLog&& other);
  PackedLog(const PackedLog&) = delete;
  PackedLog& operator=(const PackedLog&) = delete;

  /// Appends one entry (after the last). Drops the index if one was built.
  void push_back(const AcceptedWrite& w);
  /// Removes every entry and the index (the dictionaries are kept: views given out stay valid).
  void clear();
  /// A sink for read_readback_file (readback.h) that packs the file's accept log into this one
  /// (push_back each entry; clear() at each "log" member, the first too, so a repeated member
  /// keeps only the last one's entries): the log is never held as AcceptedWrites. This PackedLog
  /// must outlive the read.
  [[nodiscard]] ReadBackLogSink sink();

  [[nodiscard]] std::size_t size() const { return packed_ + staged_.size(); }
  [[nodiscard]] bool empty() const { return size() == 0; }
  /// The entry at `position` (0-based, log order); position < size() (not checked).
  [[nodiscard]] LoggedWrite operator[](std::size_t position) const;

  /// The dictionary id of a key or a client, or nullopt when no entry names it.
  [[nodiscard]] std::optional<std::uint32_t> key_id(std::string_view key) const;
  [[nodiscard]] std::optional<std::uint32_t> client_id(std::string_view client) const;
  [[nodiscard]] const std::string& key_name(std::uint32_t id) const { return keys_.names[id]; }
  [[nodiscard]] const std::string& client_name(std::uint32_t id) const { return clients_.names[id]; }

  /// Where the write (client, token, key, segment, chunk) is logged: the position of its first
  /// entry in log order, and of its entry with the largest seq (the first of those). A write
  /// logged once has first == latest. Nullopt when the log has none.
  struct Found {
    std::uint32_t first = 0;
    std::uint32_t latest = 0;
  };
  [[nodiscard]] std::optional<Found> find(std::string_view client, std::int64_t token, std::string_view key,
                                          std::int64_t segment, std::int64_t chunk) const;

  /// Bytes held: the packed blocks, the entries not packed yet, the dictionaries and the index.
  [[nodiscard]] std::size_t memory_bytes() const;

  /// Reads the log in order, one LoggedWrite at a time (an input iterator: each step decodes).
  class const_iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = LoggedWrite;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = LoggedWrite;
    const_iterator() = default;
    const_iterator(const PackedLog* log, std::size_t at) : log_(log), at_(at) {}
    LoggedWrite operator*() const { return (*log_)[at_]; }
    const_iterator& operator++() {
      ++at_;
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator was = *this;
      ++at_;
      return was;
    }
    [[nodiscard]] std::size_t position() const { return at_; }
    friend bool operator==(const const_iterator& a, const const_iterator& b) { return a.at_ == b.at_; }

   private:
    const PackedLog* log_ = nullptr;
    std::size_t at_ = 0;
  };
  [[nodiscard]] const_iterator begin() const { return {this, 0}; }
  [[nodiscard]] const_iterator end() const { return {this, size()}; }

 private:
  // The fields of an entry, as unsigned 64-bit words, in this order.
  enum Field : std::size_t { kSeq, kSegment, kChunk, kToken, kValue, kKey, kClient, kKind, kFields };
  using Words = std::array<std::uint64_t, kFields>;
  struct Block {
    std::array<std::uint64_t, kFields> base{};  // each field's minimum in the block
    std::array<std::uint8_t, kFields> width{};  // bytes per field (0-8)
    std::array<std::uint8_t, kFields> offset{};  // the field's byte offset in an entry
    std::uint8_t stride = 0;                     // bytes per entry
    std::unique_ptr<std::uint8_t[]> bytes;       // stride * kBlock, plus 8 bytes of padding
  };
  struct Dictionary {
    std::deque<std::string> names;  // stable addresses: the map's keys and LoggedWrite view them
    boost::unordered_flat_map<std::string_view, std::uint32_t, boost::hash<std::string_view>> ids;
    std::uint32_t id(std::string_view name);
    [[nodiscard]] std::size_t memory_bytes() const;
  };
  // A write's identity as the index compares it: (client, key) ids and the integers, as words.
  struct Key {
    std::uint32_t client = 0;
    std::uint32_t key = 0;
    std::uint64_t token = 0;
    std::uint64_t segment = 0;
    std::uint64_t chunk = 0;
    friend bool operator==(const Key&, const Key&) = default;
  };
  class Index;
  class Repeats;

  void drop_index();
  void new_generation();
  Words words_of(const AcceptedWrite& w, std::size_t position);
  [[nodiscard]] Words words_at(std::size_t position) const;
  void pack_staged();
  const Index& index() const;
  const Repeats& repeats() const;
  [[nodiscard]] Key key_at(std::size_t position) const;
  [[nodiscard]] static std::uint64_t hash_of(const Key& k);

  std::vector<Block> blocks_;
  std::size_t packed_ = 0;    // entries in blocks_ (a multiple of kBlock)
  std::vector<Words> staged_;  // the entries after them, fewer than kBlock
  Dictionary keys_, clients_;
  mutable std::unique_ptr<Index> index_;
  mutable std::unique_ptr<std::once_flag> index_once_;
  mutable std::unique_ptr<Repeats> repeats_;
  mutable std::unique_ptr<std::once_flag> repeats_once_;
  // Which state of the entries this is, unique across every PackedLog of the process: find()'s
  // one-entry memo (per thread) is valid only for the generation it was filled at.
  std::uint64_t generation_ = 0;
};

}  // namespace fencecheck::harness
