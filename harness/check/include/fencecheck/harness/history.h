// fencecheck — the run's history: every event (worker, harness, lock service) in the order the
// orchestrator received it. An event's index in the history is its id: anomalies and figures cite
// evidence by index. Saved in the run directory as JSON lines (history.jsonl), one
// fencecheck::Event per line (fencecheck/proto/event.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fencecheck/proto/event.h"

namespace fencecheck::harness {

/// Events in receive order; index = event id. A value type, not synchronised: the orchestrator
/// appends under its own lock and hands the finished history to the checkers by const reference.
struct History {
  std::vector<Event> events;

  /// Appends and returns the new event's index.
  std::size_t add(Event e) {
    events.push_back(std::move(e));
    return events.size() - 1;
  }
  void push_back(Event e) { events.push_back(std::move(e)); }
  [[nodiscard]] std::size_t size() const { return events.size(); }
  [[nodiscard]] bool empty() const { return events.empty(); }
  [[nodiscard]] const Event& operator[](std::size_t i) const { return events[i]; }
  [[nodiscard]] const Event& at(std::size_t i) const { return events.at(i); }
  [[nodiscard]] auto begin() const { return events.begin(); }
  [[nodiscard]] auto end() const { return events.end(); }
};

/// A history file that cannot be read or parsed. what() is "file:line: message" (or
/// "file: message" when line is 0, e.g. the file cannot be opened).
class HistoryError : public std::runtime_error {
 public:
  HistoryError(std::string file, std::size_t line, std::string message);
  [[nodiscard]] const std::string& file() const noexcept { return file_; }
  [[nodiscard]] std::size_t line() const noexcept { return line_; }
  [[nodiscard]] const std::string& message() const noexcept { return message_; }

 private:
  std::string file_;
  std::size_t line_ = 0;
  std::string message_;
};

/// The names a run directory's history has: written as kHistoryFile while the run goes, and
/// replaced at its end by kCompressedHistoryFile when compress_history() runs (RunOptions).
inline constexpr const char* kHistoryFile = "history.jsonl";
inline constexpr const char* kCompressedHistoryFile = "history.jsonl.zst";

/// The history file of a run directory as it is on disk: history.jsonl, or history.jsonl.zst when
/// only that one exists. Neither: history.jsonl (the name an error about a missing history should
/// give). Never throws.
[[nodiscard]] std::filesystem::path history_file(const std::filesystem::path& run_dir);

/// Calls `fn(line, number)` for each line of a history file, in order, without its '\n' (or
/// "\r\n"); `number` is 1-based. The file is read as zstd (one or more frames, RFC 8878) when its
/// name ends in ".zst", else as plain text; a plain path that does not exist is read from its
/// ".zst" sibling when that exists. Each line handed to `fn` is followed by kLinePadding readable
/// bytes (event.h), so event_from_padded_line can parse it where it lies. Memory: one line and
/// one 128 KiB buffer, whatever the size.
/// Throws HistoryError: cannot open or read ("file: ..."), not zstd or corrupt ("file:line: the
/// compressed history is damaged: <zstd's reason>", line = the lines read before), truncated
/// mid-frame. Exceptions from `fn` pass through.
void for_each_history_line(const std::filesystem::path& path,
                           const std::function<void(std::string_view line, std::size_t number)>& fn);

/// Calls `fn(index, event)` for each event of a history file, in order, holding one at a time:
/// lines read as for_each_history_line reads them, blank lines skipped (they do not shift the
/// indices: `index` is the event's History index, 0-based). Returns how many lines the simdjson
/// fast path did not take (event_from_padded_line returned false: 0 for a file fencecheck wrote).
/// Throws HistoryError as load_history_jsonl does; exceptions from `fn` pass through.
std::size_t for_each_history_event(const std::filesystem::path& path,
                                   const std::function<void(std::size_t index, Event&& event)>& fn);

/// As for_each_history_event, but parses only the lines `wanted(index, line)` accepts; the others
/// are counted (their indices stay) and skipped unparsed. For reading again a file already read
/// whole once (its bad lines found then), when only some events matter: parsing is most of the
/// cost of a pass (docs/performance.md). Throws as for_each_history_event, for the lines parsed.
std::size_t for_each_history_event_if(const std::filesystem::path& path,
                                      const std::function<bool(std::size_t index, std::string_view line)>& wanted,
                                      const std::function<void(std::size_t index, Event&& event)>& fn);

/// What a quick look (no parse) at a history line says of one of its top-level fields, for
/// skipping lines unparsed on a pass that wants only some: kUnsure whenever the look cannot be
/// sure, never a wrong answer otherwise (on a line that is a valid event).
struct LineField {
  enum What {
    kUnsure,   ///< parse the line to know: it has an escape ('\'), the key twice, anything nested
               ///< (a second '{', any '['; not looked for with first_only), a value that is not a
               ///< plain string or integer (null, ...), or it is cut short
    kAbsent,   ///< the key is not in the line
    kString,   ///< its value is the string `text` (between the quotes, no escapes)
    kInteger,  ///< its value is the number `text` ('-' and digits; std::from_chars reads it when it
               ///< fits int64_t, and a caller must treat any other as unsure: the parser wraps
               ///< values up to UINT64_MAX)
  };
  What what = kUnsure;
  std::string_view text;  ///< a view into the line
};
/// Looks for the key `name` (a field name of event.h) in `line`: one search per occurrence of
/// "<name>" (without a backslash in the line every '"' delimits a string, so "<name>" followed by
/// ':' is the key). With `first_only`, for a line the fast path parsed before (every key at the
/// top level, at most once: for_each_history_event's count of the others is 0), the look stops at
/// the key's first occurrence instead of making sure there is no other. Pure; `text` views `line`.
[[nodiscard]] LineField scan_line_field(std::string_view line, std::string_view name, bool first_only = false);

/// One line looked at for several fields (scan_line_field's rules, the same answers): the checks
/// that concern the whole line (a backslash; without first_only, anything nested) are made once,
/// when it is constructed, not once per field. The figures' second pass looks at up to three
/// fields of most holdings lines. Views `line`, which must outlive it. Thread-compatible (const
/// after construction).
class LineLook {
 public:
  explicit LineLook(std::string_view line, bool first_only = false);
  /// scan_line_field(line, name, first_only). A name of more than 62 bytes (no field of event.h)
  /// is kUnsure.
  [[nodiscard]] LineField field(std::string_view name) const;

 private:
  std::string_view line_;
  bool first_only_ = false;
  bool unsure_ = false;  // a backslash, or something nested: every field is kUnsure
};

/// Whether a history line may be an event of one of `kinds`: false only when scan_line_field is
/// sure its "kind" is a string naming none of them (kind_name). One search for "kind", not one
/// per kind. A cheap test before parsing, never wrong the other way: a line it calls false is not
/// of those kinds, or is not a valid event at all. Pure.
[[nodiscard]] bool line_may_be_kind(std::string_view line, std::span<const EventKind> kinds);

/// Appends `e` to `out` in a compact binary form, for holding many events in little memory
/// (analyze_history_file's evidence caught on the way). Every field is kept exactly: its kind (one
/// byte), which optionals are present and which strings are not empty (two bytes each), then the
/// integers as zigzag LEB128 varints and the strings as a varint length and their bytes (any
/// bytes). A lock.grant of a bench history takes about 50 bytes, against about 140 for its JSON
/// line and about 450 for the Event. Returns the bytes appended. std::bad_alloc. Pure apart from
/// `out`.
std::size_t pack_event(const Event& e, std::string& out);
/// The Event that pack_event() appended at the start of `bytes` (bytes after it are ignored).
/// Throws std::invalid_argument when `bytes` is cut short or holds no packed event (a caller's bug: only
/// pack_event's output is read). Pure.
[[nodiscard]] Event unpack_event(std::string_view bytes);

/// Reads a JSON-lines history, plain or zstd-compressed (as for_each_history_line): one event per
/// line, blank lines skipped (they do not shift the indices of later events). Throws HistoryError
/// naming the file and 1-based line of the first bad line, and why (not JSON, unknown kind, a
/// field of the wrong type).
[[nodiscard]] History load_history_jsonl(const std::filesystem::path& path);

/// What compress_history() did.
struct CompressedHistory {
  std::filesystem::path path;    ///< the .zst file written
  std::uintmax_t plain_bytes = 0;       ///< size of the history.jsonl it replaced
  std::uintmax_t compressed_bytes = 0;  ///< size of the .zst
};

/// Compresses a plain history file into `<path>.zst` (one zstd frame with its content checksum,
/// at `level`, 1..19; level 1, the default, made a 1000-worker run's history 8.3x smaller in
/// 0.06 s, smaller and faster than level 3's 7.3x, docs/performance.md),
/// makes it durable (fsync of the file, rename from a temporary name, fsync of the directory),
/// and only then removes the plain file. Memory: bounded buffers, whatever the size. On any error
/// the plain file is left as it was, the temporary removed, and HistoryError thrown naming the
/// file and the reason. Not thread-safe against a writer still appending to `path`.
CompressedHistory compress_history(const std::filesystem::path& path, int level = 1);

/// Writes one compact JSON event per line ('\n'-terminated), replacing the file. Throws
/// HistoryError when the file cannot be written.
void save_history_jsonl(const std::filesystem::path& path, const History& history);

}  // namespace fencecheck::harness
