// fencecheck — what a fenced resource returns when the harness reads it back after a run.
// Produced by fencecheck-store's GET /v1/readback (and, later, other resource adapters);
// consumed by the checkers. JSON shape (docs/architecture.md):
//   {"resource":"store","fencing":"per-key",
//    "chunks":[{"key":"ledger","segment":1,"chunk":2,"token":34,"client":"w2","seq":17,"data_b64":"..."}],
//    "log":[{"seq":17,"key":"ledger","segment":1,"chunk":2,"token":34,"client":"w2"},
//           {"seq":18,"key":"hits","kind":"counter","value":5,"token":34,"client":"w2"}],
//    "rejections":[{"key":"ledger","segment":1,"chunk":2,"token":33,"client":"w1","high_water":34},
//                  {"key":"hits","kind":"counter","value":5,"token":33,"client":"w1","high_water":34}],
//    "high_water":{"ledger":34},
//    "effects":[{"key":"ledger","id":"seg1","token":34,"client":"w2","seq":18,"applied":true,"mode":"fenced"}],
//    "counters":{"hits":12}}
// "effects" and "counters" (docs/catalogue-plan.md, "Store modes and read-back additions") are
// optional: a read-back without them (an older store, a resource without side effects or
// counters) parses with both empty, and to_json() omits them when empty, so the JSON of a
// read-back without effects and counters is byte-for-byte what it was before they existed.
// Log and rejection entries are chunk writes unless "kind" says "counter": a counter write has
// "value" (the counter's new value) and no "segment" or "chunk" (issue 14; a chunk write carries
// no "kind", so chunk-only read-backs are unchanged). Read-backs written before that (runs kept on
// disk) showed a counter write as "chunk":-1 with the value in "segment": readback_from_json()
// still reads those, as counter writes.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace fencecheck {

/// The current content of one chunk slot (the last accepted write to key/segment/chunk).
struct StoredChunk {
  std::string key;
  std::int64_t segment = 0;
  std::int64_t chunk = 0;
  std::int64_t token = 0;   ///< token the accepted write carried
  std::string client;       ///< writer id the request named
  std::int64_t seq = 0;     ///< store-wide acceptance order, 1-based
  std::string data;         ///< raw bytes as written (base64 on the wire)
};

/// What a logged or refused write set: a chunk slot, or a counter (the store's counter job).
enum class WriteKind {
  kChunk,    ///< key/segment/chunk; JSON: "segment", "chunk" (no "kind")
  kCounter,  ///< counter `key` set to `value`; JSON: "kind":"counter", "value"; segment = chunk = -1
};

/// Sentinel segment and chunk of a counter write (no slot): never a valid index (those are >= 0),
/// so code matching writes by (key, segment, chunk) never takes a counter write for a chunk.
inline constexpr std::int64_t kNoSlot = -1;

/// One accepted write, in the order the resource accepted (and made durable) it.
struct AcceptedWrite {
  std::int64_t seq = 0;
  std::string key;
  std::int64_t segment = 0;  ///< chunk writes; kNoSlot for a counter write
  std::int64_t chunk = 0;    ///< chunk writes; kNoSlot for a counter write
  std::int64_t token = 0;
  std::string client;
  WriteKind kind = WriteKind::kChunk;
  std::int64_t value = 0;    ///< counter writes: the counter's new value (0 for chunk writes)
};

/// One write the resource refused because of its fencing check.
struct RejectedWrite {
  std::string key;
  std::int64_t segment = 0;  ///< chunk writes; kNoSlot for a counter write
  std::int64_t chunk = 0;    ///< chunk writes; kNoSlot for a counter write
  std::int64_t token = 0;
  std::string client;
  std::int64_t high_water = 0;  ///< the high-water mark the token was compared against
  WriteKind kind = WriteKind::kChunk;
  std::int64_t value = 0;    ///< counter writes: the value refused (0 for chunk writes)
};

/// One side-effect request ("webhook", "payout") the resource recorded, applied or not.
struct EffectRecord {
  std::string key;       ///< the resource key the effect belongs to
  std::string id;        ///< the effect's identity as the client sent it, e.g. "seg1" or "w1:seg1"
  std::int64_t token = 0;  ///< the fencing token the request carried
  std::string client;    ///< requester id
  std::int64_t seq = 0;  ///< the resource's store-wide order (the same sequence as the log's seqs)
  bool applied = false;  ///< performed; false: refused by the fence or ignored as a duplicate
  std::string mode;      ///< "fenced" | "unfenced" | "idempotent"; "" when the resource did not say
};

/// Rows of keys the run did not write, which the harness read or counted and then dropped before
/// any checker saw them (issue 34, "Your real rows are judged": a team's own rows in a shared
/// table, e.g. a shard `us-2` no worker touched, are never judged). JSON, in readback.json and
/// verdict.json: {"keys":{"us-2":{"read_back":3,"high_water":1}},"not_counted":["accept_log"]}.
/// Value type.
struct IgnoredRows {
  /// key -> the part of the read-back it was dropped from ("read_back" (chunks), "accept_log",
  /// "high_water", "rejections", "effects", "counters") -> rows dropped. Only keys with rows.
  std::map<std::string, std::map<std::string, std::int64_t>> keys;
  /// Parts whose rows of other keys were never read, so not counted either (a user's query that
  /// takes $keys filters them in the database): their number is not measured, never zero.
  std::vector<std::string> not_counted;

  [[nodiscard]] bool empty() const { return keys.empty() && not_counted.empty(); }
  /// Every row counted, all keys and parts.
  [[nodiscard]] std::int64_t rows() const;
  /// Adds `n` rows of `key` to `part`; n <= 0 adds nothing.
  void add(const std::string& key, const std::string& part, std::int64_t n = 1);
  /// Records that `part`'s rows of other keys were not read (once per part).
  void add_not_counted(const std::string& part);
  /// Adds every count and part of `other`.
  void merge(const IgnoredRows& other);
  /// One sentence for the text summary: "ignored 3 rows of 1 key the run did not write: us-2"
  /// (at most 5 keys named, then "and N more"), with "; rows of other keys not read (not
  /// counted) in accept_log" when some part was not counted; "" when empty(). Pure.
  [[nodiscard]] std::string summary() const;
};

/// {"keys":{...},"not_counted":[...]}: IgnoredRows's JSON; from_json throws std::invalid_argument
/// for another shape. Pure.
[[nodiscard]] nlohmann::json to_json(const IgnoredRows& ignored);
[[nodiscard]] IgnoredRows ignored_rows_from_json(const nlohmann::json& j);

/// Everything read back from a resource. Value type.
struct ReadBack {
  std::string resource;                          ///< "store", "postgres", ...
  std::string fencing;                           ///< the resource's fencing mode, e.g. "per-key", "none"
  std::vector<StoredChunk> chunks;               ///< sorted by key, segment, chunk
  std::vector<AcceptedWrite> log;                ///< sorted by seq
  std::vector<RejectedWrite> rejections;         ///< in rejection order
  std::map<std::string, std::int64_t> high_water;  ///< per key
  std::vector<EffectRecord> effects;             ///< every side-effect request, sorted by seq (optional)
  std::map<std::string, std::int64_t> counters;  ///< counter key -> final value (optional)
  /// Rows of keys the run did not write, dropped before the checkers (optional: JSON "ignored",
  /// omitted when empty, so a read-back without any is byte-for-byte what it was before).
  IgnoredRows ignored;
};

/// Drops every row of a key outside `run_keys` from a read-back (chunks, log, rejections,
/// high_water, effects, counters) and counts each in rb.ignored: what the harness does between
/// the resource's read-back and the checkers, for every kind, so that a resource's rows the run
/// did not write (a user's query that does not take $keys, a service that ignores ?keys=) are
/// never judged. The log's seq numbers are kept as they are (gaps where rows were dropped).
/// Pure apart from `rb`.
void drop_foreign_rows(ReadBack& rb, const std::set<std::string>& run_keys);


/// JSON conversions; from_json throws std::invalid_argument naming the missing or mistyped field
/// (or an unknown "kind"). Pure; thread-safe.
[[nodiscard]] nlohmann::json to_json(const ReadBack& rb);
[[nodiscard]] ReadBack readback_from_json(const nlohmann::json& j);

/// The text is not JSON at all (nlohmann's parse error, its message kept): a read-back's callers
/// name it "not valid JSON", unlike a JSON document that is not a read-back (std::invalid_argument).
struct ReadBackSyntaxError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// A read-back from its JSON text, in the read-back's memory rather than a whole document's: each
/// element of "chunks", "log", "rejections" and "effects" is converted as soon as the parser has
/// it and then dropped (nlohmann's parser callback). A long run's read-back holds tens of millions
/// of log entries; as a DOM each costs about 1 KB, as an AcceptedWrite 112. Each array is gathered
/// in blocks and moved into one exactly sized vector at the end, so the peak is the read-back plus
/// one block (32,768 elements), not a growing vector's up to threefold (bench/bench_readback_io).
/// The result, and the error for a text that is not a read-back, are exactly
/// readback_from_json(nlohmann::json::parse(text))'s (tests/proto/readback_test.cpp checks both
/// on every case, tests/fuzz/report_fuzz.cpp on whatever it finds): the first problem in the
/// order that function checks, not the first in the text.
/// `inspect`, when set, sees the top-level document with those four arrays emptied (a member
/// present as [] says it was there) before anything else is checked; it may throw.
/// Throws ReadBackSyntaxError for a text that is not JSON, std::invalid_argument as
/// readback_from_json() does.
/// Pure; thread-safe.
[[nodiscard]] ReadBack readback_from_json_text(std::string_view text,
                                               const std::function<void(const nlohmann::json&)>& inspect = {});

/// readback_from_json_text() over a file (readback.json of a run directory), read as it is parsed:
/// neither the text nor a DOM of it is held. Throws std::system_error (errno's code, its what()
/// naming the path) when the file cannot be opened or read (a directory: EISDIR), and otherwise
/// what readback_from_json_text() throws. Thread-safe.
[[nodiscard]] ReadBack read_readback_file(const std::filesystem::path& path);

/// Where read_readback_file() hands the accept log's entries instead of keeping them in
/// ReadBack::log: a checker that packs the log (harness/check's PackedLog) never holds it as
/// AcceptedWrites (112 bytes each; issue 16).
struct ReadBackLogSink {
  /// Each entry of "log", in the file's order, as soon as it is read and converted.
  std::function<void(AcceptedWrite&&)> add;
  /// "log" appears again: drop every entry add() got so far (the last member wins, as in a DOM).
  std::function<void()> clear;
};

/// A log sink that hands on only entries of `run_keys` to `inner` and counts the others (into
/// `ignored`, part "accept_log"; a clear() of the log drops the accept_log counts of `ignored`, as
/// the entries are dropped). `inner`, `run_keys` and `ignored` must outlive the sink's
/// use. Not thread-safe (one reader).
[[nodiscard]] ReadBackLogSink foreign_row_log_filter(const ReadBackLogSink& inner,
                                                     const std::set<std::string>& run_keys,
                                                     IgnoredRows& ignored);

/// read_readback_file(), with the log's entries handed to `log` (the ReadBack's log stays empty).
/// The same errors, in the same order: an entry that is not a log entry is thrown after the whole
/// file is read, as before; the entries before it have been handed over by then. Throws
/// std::invalid_argument when `log` lacks add or clear. Thread-safe if `log`'s functions are.
[[nodiscard]] ReadBack read_readback_file(const std::filesystem::path& path, const ReadBackLogSink& log);

/// readback_from_json_text() over an open stdio stream, read from where it is to its end (not
/// closed): a reply spilled to a temporary file as it arrived. `name` names the stream in errors.
/// The log's entries go to `log` when it is given (as read_readback_file with a sink does), else
/// to ReadBack::log; `inspect` as for readback_from_json_text(). Throws std::system_error for a
/// read error, std::invalid_argument for a sink without add or clear, and otherwise what
/// readback_from_json_text() throws. Thread-safe for distinct streams.
[[nodiscard]] ReadBack read_readback_stream(std::FILE* in, const std::string& name,
                                           const std::function<void(const nlohmann::json&)>& inspect = {},
                                           const ReadBackLogSink* log = nullptr);

/// How write_readback_json() spells the document.
struct ReadBackJsonStyle {
  int indent = 2;  ///< as nlohmann's dump(indent): -1 compact (an HTTP reply), 2 readback.json
  /// Write "counters":{} and "effects":[] even when empty (fencecheck-store's GET /v1/readback
  /// always has them, docs/catalogue-plan.md); to_json() leaves them out then.
  bool always_effects_and_counters = false;
};

/// Writes exactly to_json(rb).dump(style.indent, ' ', false, nlohmann::json::error_handler_t::replace)
/// (no final newline; with always_effects_and_counters, that document with both members set), one
/// element at a time: a long run's read-back without its DOM in memory (several hundred bytes per
/// log entry). Stream errors are the stream's (check `out` after). Thread-safe for distinct streams.
void write_readback_json(std::ostream& out, const ReadBack& rb, const ReadBackJsonStyle& style = {});

/// The accept log's entries from wherever a caller keeps them: called once with `each`, it calls
/// each(entry) for every entry, in log order.
using LogEntries = std::function<void(const std::function<void(const AcceptedWrite&)>& each)>;

/// write_readback_json() with the log's entries taken from `log` instead of rb.log (which is not
/// read): the same bytes as that function given a read-back whose log holds those entries. For a
/// caller that keeps the log packed (harness/check's PackedLog), never as AcceptedWrites.
void write_readback_json(std::ostream& out, const ReadBack& rb, const ReadBackJsonStyle& style, const LogEntries& log);

}  // namespace fencecheck
