// fencecheck — event_from_json_line on simdjson's ondemand API (issue 16: reading a history at
// >= 2 M events per CPU second; nlohmann-json alone reads about 0.5 M, docs/performance.md).
//
// The fast path takes the plain line, the only kind fencecheck's writer produces: one JSON object,
// every key an Event field at most once, integers that fit int64_t, strings, a known kind, nothing
// but white space after the object. Any other line (malformed, a null, an unknown or repeated
// key, a wrong type, an integer past int64, anything after the object) goes to the reference,
// detail::event_from_json_line_nlohmann (event.cpp), which returns its Event or throws its
// std::invalid_argument. So results and messages are the reference's by construction, and only
// the fast path needs proving: tests/proto/event_parse_test.cpp runs both on unusual, corpus and
// mutated lines; tests/fuzz/worker_line_fuzz.cpp on whatever the fuzzer makes.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include <simdjson.h>

#include "fencecheck/proto/event.h"

namespace fencecheck {
namespace {

/// An Event field with its JSON name: an optional integer or a string (the other member pointer
/// is null). t_ns, src_ns and kind are apart (kTNs, kSrcNs, kKind).
struct Field {
  std::string_view name;
  std::optional<std::int64_t> Event::*integer = nullptr;
  std::string Event::*text = nullptr;
};
constexpr std::array<Field, 18> kFields{{
    {"token", &Event::token},
    {"high_water", &Event::high_water},
    {"lease_id", &Event::lease_id},
    {"revision", &Event::revision},
    {"segment", &Event::segment},
    {"chunk", &Event::chunk},
    {"duration_ns", &Event::duration_ns},
    {"ttl_ms", &Event::ttl_ms},
    {"protocol", &Event::protocol},
    {"line_no", &Event::line_no},
    {"source", nullptr, &Event::source},
    {"lock", nullptr, &Event::lock},
    {"lock_key", nullptr, &Event::lock_key},
    {"key", nullptr, &Event::key},
    {"fault", nullptr, &Event::fault},
    {"target", nullptr, &Event::target},
    {"detail", nullptr, &Event::detail},
    {"line", nullptr, &Event::line},
}};
/// Field numbers (bits of the "seen" mask): kFields' positions, then these three.
constexpr int kTNs = 18, kSrcNs = 19, kKind = 20;
/// Every JSON key of an Event, at its field number.
constexpr std::array<std::string_view, 21> kFieldNames = [] {
  std::array<std::string_view, 21> names{};
  for (std::size_t i = 0; i < kFields.size(); ++i) names[i] = kFields[i].name;
  names[kTNs] = "t_ns";
  names[kSrcNs] = "src_ns";
  names[kKind] = "kind";
  return names;
}();
constexpr std::size_t kKinds = static_cast<std::size_t>(EventKind::kProtocolError) + 1;
/// Every kind's wire name at its enumerator's number (kind_name stays the one table of names).
const std::array<std::string_view, kKinds>& kind_names() {
  static const std::array<std::string_view, kKinds> names = [] {
    std::array<std::string_view, kKinds> n{};
    for (std::size_t i = 0; i < n.size(); ++i) n[i] = kind_name(static_cast<EventKind>(i));
    return n;
  }();
  return names;
}

/// The position of `text` in `names`; -1 when absent. Length, first and last character first, a
/// full compare only for the likely one: a linear search comparing every candidate of the same
/// length was 15 % of this parser's time (perf, bench_history_parse).
template <std::size_t N>
int position(const std::array<std::string_view, N>& names, std::string_view text) {
  for (std::size_t i = 0; i < N; ++i) {
    const std::string_view n = names[i];
    if (n.size() == text.size() && !n.empty() && n.front() == text.front() && n.back() == text.back() && n == text)
      return static_cast<int>(i);
  }
  return -1;
}

/// The longest field name ("duration_ns").
constexpr std::size_t kLongestName = [] {
  std::size_t n = 0;
  for (std::string_view name : kFieldNames) n = std::max(n, name.size());
  return n;
}();

/// The first `n` (0-8) bytes at p as a little-endian word, the rest zero.
std::uint64_t word_of(const char* p, std::size_t n) {
  std::uint64_t w = 0;
  std::memcpy(&w, p, 8);
  return n >= 8 ? w : w & ((std::uint64_t{1} << (8 * n)) - 1);
}
/// Each field name as two words (word_of), for field_number's compare without memcmp calls
/// (position()'s memcmp was about 2 % of a history read, perf).
struct NameWords {
  std::uint64_t low = 0, high = 0;
  std::size_t size = 0;
};
const std::array<NameWords, kFieldNames.size()>& name_words() {
  static const auto words = [] {
    std::array<NameWords, kFieldNames.size()> w{};
    for (std::size_t i = 0; i < kFieldNames.size(); ++i) {
      char buf[16] = {};
      std::memcpy(buf, kFieldNames[i].data(), kFieldNames[i].size());
      const std::size_t n = kFieldNames[i].size();
      w[i] = NameWords{word_of(buf, std::min<std::size_t>(n, 8)), n > 8 ? word_of(buf + 8, n - 8) : 0, n};
    }
    return w;
  }();
  return words;
}

/// The field number of the key whose raw JSON text starts at `raw` (just after its opening
/// quote); -1 for any other key, or a key with an escape (the reference then decides: "t\u005fns"
/// is t_ns). Reads up to 16 bytes from `raw`, all inside the key or its padded document.
/// Comparing the raw text, where unescaped_key() copied every key into simdjson's string buffer
/// first, was about a tenth of the parse (perf, bench_stream_check).
int field_number(const char* raw) {
  std::size_t n = 0;
  while (n <= kLongestName && raw[n] != '"') {
    if (raw[n] == '\\') return -1;
    ++n;
  }
  if (n > kLongestName || n == 0) return -1;
  // 16 bytes from raw are readable: the key's own, then the rest of the padded document.
  static_assert(kLongestName < 16);
  const std::uint64_t low = word_of(raw, std::min<std::size_t>(n, 8));
  const std::uint64_t high = n > 8 ? word_of(raw + 8, n - 8) : 0;
  const auto& words = name_words();
  for (std::size_t i = 0; i < words.size(); ++i)
    if (words[i].size == n && words[i].low == low && words[i].high == high) return static_cast<int>(i);
  return -1;
}

/// A string value's text when its raw token needs no unescaping: no backslash and no control
/// character between its quotes (get_string() would return these same bytes); nullopt otherwise,
/// for get_string() to decide. simdjson's stage 1 has checked the document's UTF-8 already.
std::optional<std::string_view> plain_string(std::string_view token) {
  while (!token.empty() && (token.back() == ' ' || token.back() == '\t' || token.back() == '\n' || token.back() == '\r'))
    token.remove_suffix(1);
  if (token.size() < 2 || token.front() != '"' || token.back() != '"') return std::nullopt;
  token = token.substr(1, token.size() - 2);
  for (const char c : token)
    if (c == '\\' || static_cast<unsigned char>(c) < 0x20) return std::nullopt;
  return token;
}

/// One thread's parser and padded copy of the line (simdjson reads up to SIMDJSON_PADDING bytes
/// past a document's end). Both keep the size of the longest line they have seen.
struct LineParser {
  simdjson::ondemand::parser parser;
  std::string padded;
};
LineParser& line_parser() {
  thread_local LineParser p;
  return p;
}

/// True with `e` filled when `line` (followed by readable bytes up to line.data() + capacity) is
/// on the fast path; false, `e` partly filled, otherwise. `e` must be as reset_event() leaves it.
bool parse_fast(simdjson::ondemand::parser& parser, std::string_view line, std::size_t capacity, Event& e) {
  namespace od = simdjson::ondemand;
  od::document doc;
  if (parser.iterate(line.data(), line.size(), capacity).get(doc) != simdjson::SUCCESS) return false;
  od::object object;
  if (doc.get_object().get(object) != simdjson::SUCCESS) return false;
  std::uint32_t seen = 0;
  for (auto item : object) {
    od::field field;
    if (std::move(item).get(field) != simdjson::SUCCESS) return false;
    const int n = field_number(field.key().raw());
    if (n < 0 || (seen & (1U << n)) != 0) return false;  // unknown (ignored, but its value must be JSON) or repeated
    seen |= 1U << n;
    od::value value = field.value();
    const Field* f = n < kTNs ? &kFields[static_cast<std::size_t>(n)] : nullptr;
    if (n == kTNs || n == kSrcNs || (f != nullptr && f->integer != nullptr)) {
      std::int64_t v = 0;
      if (value.get_int64().get(v) != simdjson::SUCCESS) return false;
      if (n == kTNs)
        e.t_ns = v;
      else if (n == kSrcNs)
        e.src_ns = v;
      else
        e.*(f->integer) = v;
      continue;
    }
    // The raw token only peeks; the value must still be consumed: a value left unconsumed is
    // skipped leniently, and "{"a":"b":"c"}" would pass (EventParse.MutatedLines found it).
    std::string_view text;
    if (const auto plain = plain_string(value.raw_json_token())) {
      simdjson::ondemand::raw_json_string consumed;
      if (value.get_raw_json_string().get(consumed) != simdjson::SUCCESS) return false;
      text = *plain;
    } else if (value.get_string().get(text) != simdjson::SUCCESS) {
      return false;
    }
    if (n == kKind) {
      const int kind = position(kind_names(), text);
      if (kind < 0) return false;
      e.kind = static_cast<EventKind>(kind);
    } else {
      e.*(f->text) = text;
    }
  }
  if ((seen & (1U << kKind)) == 0) return false;
  // Nothing after the object: simdjson 3.0 has no document::at_end(); raw_json() (from the
  // object's '{' to the next token) reaches the line's end only when no token follows. The
  // unusual lines "{...} x" and "{...}{}" (tests/support/event_parsers.h) show it is needed.
  std::string_view whole;
  if (doc.raw_json().get(whole) != simdjson::SUCCESS) return false;
  return whole.data() + whole.size() == line.data() + line.size();
}

/// `e` as a default-constructed Event, its strings keeping their capacity.
void reset_event(Event& e) {
  e.t_ns = 0;
  e.src_ns = 0;
  e.kind = EventKind::kLog;
  for (const Field& f : kFields) {
    if (f.integer != nullptr) (e.*(f.integer)).reset();
    if (f.text != nullptr) (e.*(f.text)).clear();
  }
}

}  // namespace

namespace detail {

bool event_from_json_line_fast(std::string_view line, Event& out) {
  LineParser& p = line_parser();
  p.padded.assign(line.data(), line.size());
  p.padded.resize(line.size() + simdjson::SIMDJSON_PADDING, ' ');
  reset_event(out);
  return parse_fast(p.parser, std::string_view(p.padded.data(), line.size()), p.padded.size(), out);
}

}  // namespace detail

Event event_from_json_line(std::string_view line) {
  Event e;
  if (detail::event_from_json_line_fast(line, e)) return e;
  return detail::event_from_json_line_nlohmann(line);
}

static_assert(kLinePadding >= simdjson::SIMDJSON_PADDING, "event_from_padded_line promises simdjson its padding");

bool event_from_padded_line(std::string_view line, Event& out) {
  reset_event(out);
  if (parse_fast(line_parser().parser, line, line.size() + kLinePadding, out)) return true;
  out = detail::event_from_json_line_nlohmann(line);
  return false;
}

}  // namespace fencecheck
