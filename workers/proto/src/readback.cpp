#include "fencecheck/proto/readback.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <iterator>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>

#include <nlohmann/json.hpp>

#include "fencecheck/proto/base64.h"

namespace fencecheck {
namespace {

template <typename T>
T field(const nlohmann::json& j, const char* name, const char* where) {
  auto it = j.find(name);
  if (it == j.end()) throw std::invalid_argument(std::string(where) + ": missing field '" + name + "'");
  // An integer field takes JSON integers in its range only: nlohmann's get<int64_t>() converts a
  // float (1e20) or an unsigned above 2^63-1 with undefined behaviour (found by
  // tests/fuzz/report_fuzz.cpp: tests/fuzz/regressions/report/readback-token-beyond-int64).
  if constexpr (std::is_same_v<T, std::int64_t>) {
    if (!it->is_number_integer() || (it->is_number_unsigned() && it->get<std::uint64_t>() > INT64_MAX))
      throw std::invalid_argument(std::string(where) + ": field '" + name + "' must be an integer in -2^63..2^63-1");
  }
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    throw std::invalid_argument(std::string(where) + ": field '" + name + "' has the wrong type");
  }
}

// An optional member that maps keys to integers ("high_water", "counters"), each in int64's range:
// a value above 2^63-1 is refused as the arrays' fields are, not wrapped around by get<int64_t>().
void integer_map(const nlohmann::json& j, const char* name, const char* what, std::map<std::string, std::int64_t>& out) {
  auto it = j.find(name);
  if (it == j.end()) return;
  if (!it->is_object())
    throw std::invalid_argument(std::string("read-back: '") + name + "' must be an object of key -> " + what);
  for (auto& [k, v] : it->items()) {
    if (!v.is_number_integer()) throw std::invalid_argument(std::string("read-back: ") + name + "['" + k + "'] must be an integer");
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > INT64_MAX)
      throw std::invalid_argument(std::string("read-back: ") + name + "['" + k + "'] must be an integer in -2^63..2^63-1");
    out[k] = v.get<std::int64_t>();
  }
}

// "resource" and "fencing": a string when present, "" when not.
std::string optional_string(const nlohmann::json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end()) return {};
  if (!it->is_string()) throw std::invalid_argument(std::string("read-back: field '") + name + "' must be a string");
  return it->get<std::string>();
}

const nlohmann::json& array_field(const nlohmann::json& j, const char* name) {
  static const nlohmann::json empty = nlohmann::json::array();
  auto it = j.find(name);
  if (it == j.end()) return empty;
  if (!it->is_array()) throw std::invalid_argument(std::string("read-back: '") + name + "' must be an array");
  return *it;
}

// A log entry's or a rejection's slot: "segment" and "chunk" for a chunk write, "kind":"counter"
// and "value" for a counter write.
template <typename W>
void put_target(nlohmann::json& j, const W& w) {
  if (w.kind == WriteKind::kCounter) {
    j["kind"] = "counter";
    j["value"] = w.value;
  } else {
    j["segment"] = w.segment;
    j["chunk"] = w.chunk;
  }
}

// The inverse of put_target, also reading the form of read-backs written before counter writes
// had fields of their own: no "kind", "chunk" -1 and the value in "segment".
template <typename W>
void get_target(const nlohmann::json& j, W& w, const char* where) {
  const std::string kind = j.contains("kind") ? field<std::string>(j, "kind", where) : "chunk";
  if (kind == "counter") {
    w.kind = WriteKind::kCounter;
    w.value = field<std::int64_t>(j, "value", where);
    w.segment = w.chunk = kNoSlot;
    return;
  }
  if (kind != "chunk")
    throw std::invalid_argument(std::string(where) + ": field 'kind' is \"" + kind + "\"; expected \"chunk\" or \"counter\"");
  w.segment = field<std::int64_t>(j, "segment", where);
  w.chunk = field<std::int64_t>(j, "chunk", where);
  if (!j.contains("kind") && w.chunk == kNoSlot) {  // an older read-back's counter write
    w.kind = WriteKind::kCounter;
    w.value = w.segment;
    w.segment = kNoSlot;
  }
}


// One element of each array, as to_json() writes it and readback_from_json() reads it: the one
// place each shape is spelled, shared by the whole-document and the streamed paths.
nlohmann::json chunk_json(const StoredChunk& c) {
  return {{"key", c.key},       {"segment", c.segment}, {"chunk", c.chunk},
          {"token", c.token},   {"client", c.client},   {"seq", c.seq},
          {"data_b64", base64_encode(c.data)}};
}

nlohmann::json log_json(const AcceptedWrite& w) {
  nlohmann::json e{{"seq", w.seq}, {"key", w.key}};
  put_target(e, w);
  e["token"] = w.token;
  e["client"] = w.client;
  return e;
}

nlohmann::json rejection_json(const RejectedWrite& r) {
  nlohmann::json e{{"key", r.key}};
  put_target(e, r);
  e["token"] = r.token;
  e["client"] = r.client;
  e["high_water"] = r.high_water;
  return e;
}

nlohmann::json effect_json(const EffectRecord& e) {
  nlohmann::json ej{{"key", e.key},       {"id", e.id},   {"token", e.token},
                    {"client", e.client}, {"seq", e.seq}, {"applied", e.applied}};
  if (!e.mode.empty()) ej["mode"] = e.mode;
  return ej;
}

// A chunk's bytes; bad base64 is named with its field.
std::string data_of(const nlohmann::json& c) {
  const std::string text = field<std::string>(c, "data_b64", "chunk");
  try {
    return base64_decode(text);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("chunk: field 'data_b64' is not base64: ") + e.what());
  }
}

StoredChunk chunk_from(const nlohmann::json& c) {
  return {field<std::string>(c, "key", "chunk"),    field<std::int64_t>(c, "segment", "chunk"),
          field<std::int64_t>(c, "chunk", "chunk"), field<std::int64_t>(c, "token", "chunk"),
          field<std::string>(c, "client", "chunk"), field<std::int64_t>(c, "seq", "chunk"),
          data_of(c)};
}

AcceptedWrite log_entry_from(const nlohmann::json& w) {
  AcceptedWrite a;
  a.seq = field<std::int64_t>(w, "seq", "log entry");
  a.key = field<std::string>(w, "key", "log entry");
  get_target(w, a, "log entry");
  a.token = field<std::int64_t>(w, "token", "log entry");
  a.client = field<std::string>(w, "client", "log entry");
  return a;
}

RejectedWrite rejection_from(const nlohmann::json& r) {
  RejectedWrite x;
  x.key = field<std::string>(r, "key", "rejection");
  get_target(r, x, "rejection");
  x.token = field<std::int64_t>(r, "token", "rejection");
  x.client = field<std::string>(r, "client", "rejection");
  x.high_water = field<std::int64_t>(r, "high_water", "rejection");
  return x;
}

EffectRecord effect_from(const nlohmann::json& e) {
  EffectRecord r{field<std::string>(e, "key", "effect"),    field<std::string>(e, "id", "effect"),
                 field<std::int64_t>(e, "token", "effect"), field<std::string>(e, "client", "effect"),
                 field<std::int64_t>(e, "seq", "effect"),   field<bool>(e, "applied", "effect"),
                 {}};
  if (e.contains("mode")) r.mode = field<std::string>(e, "mode", "effect");
  return r;
}

// The arrays, in the order readback_from_json() converts (and so refuses) them.
enum class Array : std::uint8_t { kChunks, kLog, kRejections, kEffects, kNone };

Array array_named(std::string_view name) {
  if (name == "chunks") return Array::kChunks;
  if (name == "log") return Array::kLog;
  if (name == "rejections") return Array::kRejections;
  if (name == "effects") return Array::kEffects;
  return Array::kNone;
}

const char* name_of(Array a) {
  switch (a) {
    case Array::kChunks: return "chunks";
    case Array::kLog: return "log";
    case Array::kRejections: return "rejections";
    case Array::kEffects: return "effects";
    case Array::kNone: break;
  }
  return "";
}

// A growing array in blocks of fixed size, moved into one exactly sized std::vector at the end.
// Growing a std::vector copies it each time it doubles, so its peak is up to three times what it
// ends with; here the peak is the elements once plus one block (each block is freed as soon as it
// has been moved, and the final vector's pages become resident only as they are filled).
template <typename T>
class Blocks {
 public:
  static constexpr std::size_t kBlock = 1 << 15;  // elements per block (about 3.5 MiB of AcceptedWrite)

  void push_back(T&& value) {
    if (blocks_.empty() || blocks_.back().size() == kBlock) {
      blocks_.emplace_back();
      blocks_.back().reserve(kBlock);
    }
    blocks_.back().push_back(std::move(value));
  }

  void clear() { blocks_.clear(); }

  void move_into(std::vector<T>& out) {
    std::size_t n = 0;
    for (const auto& b : blocks_) n += b.size();
    out.clear();
    out.reserve(n);
    for (auto& b : blocks_) {
      std::move(b.begin(), b.end(), std::back_inserter(out));
      std::vector<T>().swap(b);
    }
    blocks_.clear();
  }

 private:
  std::vector<std::vector<T>> blocks_;
};

// Converts one array element (or keeps the first error of its array, for later).
struct ElementSink {
  Blocks<StoredChunk> chunks;
  Blocks<AcceptedWrite> log;
  Blocks<RejectedWrite> rejections;
  Blocks<EffectRecord> effects;
  std::array<std::exception_ptr, 4> first_error{};
  const ReadBackLogSink* log_sink = nullptr;  // when set, the log's entries go there, not to `log`

  void clear(Array a) {
    switch (a) {
      case Array::kChunks: chunks.clear(); break;
      case Array::kLog:
        if (log_sink) log_sink->clear();
        else log.clear();
        break;
      case Array::kRejections: rejections.clear(); break;
      case Array::kEffects: effects.clear(); break;
      case Array::kNone: return;
    }
    first_error[static_cast<std::size_t>(a)] = nullptr;
  }

  void add(Array a, const nlohmann::json& element) {
    std::exception_ptr& error = first_error[static_cast<std::size_t>(a)];
    if (error) return;  // the whole-document path stops at an array's first bad element
    try {
      switch (a) {
        case Array::kChunks: chunks.push_back(chunk_from(element)); break;
        case Array::kLog:
          if (log_sink) log_sink->add(log_entry_from(element));
          else log.push_back(log_entry_from(element));
          break;
        case Array::kRejections: rejections.push_back(rejection_from(element)); break;
        case Array::kEffects: effects.push_back(effect_from(element)); break;
        case Array::kNone: break;
      }
    } catch (...) {
      error = std::current_exception();
    }
  }

  void rethrow(Array a) const {
    if (const std::exception_ptr& e = first_error[static_cast<std::size_t>(a)]) std::rethrow_exception(e);
  }

  void move_into(ReadBack& rb) {
    chunks.move_into(rb.chunks);
    log.move_into(rb.log);
    rejections.move_into(rb.rejections);
    effects.move_into(rb.effects);
  }
};

// The members that are not arrays of elements, and the arrays' own type, in readback_from_json()'s
// order; `sink` holds the arrays' elements (empty in `j`) and their first errors.
ReadBack finish(const nlohmann::json& j, ElementSink& sink) {
  if (!j.is_object()) throw std::invalid_argument("read-back is not a JSON object");
  ReadBack rb;
  rb.resource = optional_string(j, "resource");
  rb.fencing = optional_string(j, "fencing");
  for (Array a : {Array::kChunks, Array::kLog, Array::kRejections}) {
    (void)array_field(j, name_of(a));
    sink.rethrow(a);
  }
  integer_map(j, "high_water", "token", rb.high_water);
  (void)array_field(j, name_of(Array::kEffects));
  sink.rethrow(Array::kEffects);
  integer_map(j, "counters", "value", rb.counters);
  if (auto it = j.find("ignored"); it != j.end()) rb.ignored = ignored_rows_from_json(*it);
  sink.move_into(rb);
  return rb;
}

// The document without its arrays' elements: each element is converted as soon as it is parsed
// and dropped (nlohmann's parser callback), so the memory is the read-back's, not a DOM's.
template <typename Input>
ReadBack parse_streamed(Input&& input, const std::function<void(const nlohmann::json&)>& inspect,
                        const ReadBackLogSink* log_sink = nullptr) {
  using Event = nlohmann::json::parse_event_t;
  ElementSink sink;
  sink.log_sink = log_sink;
  Array current = Array::kNone;  // the array-valued top-level member being read, if any
  bool in_array = false;         // its value is an array (its elements are at depth 2)
  nlohmann::json top;
  try {
    top = nlohmann::json::parse(
        std::forward<Input>(input), [&](int depth, Event event, nlohmann::json& parsed) {
          if (depth == 1) {
            if (event == Event::key) {  // a top-level member; a repeated one replaces the first (as in a DOM)
              current = array_named(parsed.get_ref<const std::string&>());
              sink.clear(current);
              in_array = false;
            } else if (event == Event::array_start) {
              in_array = current != Array::kNone;
            } else if (event == Event::array_end || event == Event::object_start || event == Event::value) {
              in_array = false;
            }
            return true;
          }
          if (depth == 2 && in_array &&
              (event == Event::object_end || event == Event::array_end || event == Event::value)) {
            sink.add(current, parsed);
            return false;  // converted: not kept in the document
          }
          return true;
        });
  } catch (const nlohmann::json::exception& e) {
    throw ReadBackSyntaxError(e.what());
  }
  if (inspect) inspect(top);
  return finish(top, sink);
}

// `spaces` more after each line break of a dump(indent): a value dumped alone, placed deeper.
void put_indented(std::ostream& out, const std::string& dumped, std::size_t spaces) {
  const std::string pad(spaces, ' ');
  std::size_t from = 0;
  for (std::size_t nl = dumped.find('\n'); nl != std::string::npos; nl = dumped.find('\n', from)) {
    out.write(dumped.data() + from, static_cast<std::streamsize>(nl + 1 - from));
    out << pad;
    from = nl + 1;
  }
  out.write(dumped.data() + from, static_cast<std::streamsize>(dumped.size() - from));
}

}  // namespace

nlohmann::json to_json(const ReadBack& rb) {
  nlohmann::json j;
  j["resource"] = rb.resource;
  j["fencing"] = rb.fencing;
  auto& chunks = j["chunks"] = nlohmann::json::array();
  for (const auto& c : rb.chunks) chunks.push_back(chunk_json(c));
  auto& log = j["log"] = nlohmann::json::array();
  for (const auto& w : rb.log) log.push_back(log_json(w));
  auto& rej = j["rejections"] = nlohmann::json::array();
  for (const auto& r : rb.rejections) rej.push_back(rejection_json(r));
  j["high_water"] = rb.high_water;
  // Optional additions: omitted when empty so older consumers see the shape they know.
  if (!rb.effects.empty()) {
    auto& effects = j["effects"] = nlohmann::json::array();
    for (const auto& e : rb.effects) effects.push_back(effect_json(e));
  }
  if (!rb.counters.empty()) j["counters"] = rb.counters;
  if (!rb.ignored.empty()) j["ignored"] = to_json(rb.ignored);
  return j;
}

ReadBack readback_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw std::invalid_argument("read-back is not a JSON object");
  ReadBack rb;
  rb.resource = optional_string(j, "resource");
  rb.fencing = optional_string(j, "fencing");
  for (const auto& c : array_field(j, "chunks")) rb.chunks.push_back(chunk_from(c));
  for (const auto& w : array_field(j, "log")) rb.log.push_back(log_entry_from(w));
  for (const auto& r : array_field(j, "rejections")) rb.rejections.push_back(rejection_from(r));
  integer_map(j, "high_water", "token", rb.high_water);
  for (const auto& e : array_field(j, "effects")) rb.effects.push_back(effect_from(e));
  integer_map(j, "counters", "value", rb.counters);
  if (auto it = j.find("ignored"); it != j.end()) rb.ignored = ignored_rows_from_json(*it);
  return rb;
}

ReadBack readback_from_json_text(std::string_view text, const std::function<void(const nlohmann::json&)>& inspect) {
  return parse_streamed(text, inspect);
}

namespace {

void check_sink(const ReadBackLogSink* log) {
  if (log && (!log->add || !log->clear)) throw std::invalid_argument("read-back: a log sink needs both add and clear");
}

}  // namespace

ReadBack read_readback_stream(std::FILE* in, const std::string& name,
                              const std::function<void(const nlohmann::json&)>& inspect, const ReadBackLogSink* log) {
  check_sink(log);
  // A read error (a directory opens, then reads fail with EISDIR) looks like the end of the text
  // to the parser: it is named as what it is, not as a syntax error.
  auto read_error = [&] {
    if (std::ferror(in) != 0) throw std::system_error(errno, std::generic_category(), "cannot read " + name);
  };
  try {
    ReadBack rb = parse_streamed(in, inspect, log);
    read_error();
    return rb;
  } catch (const std::system_error&) {
    throw;
  } catch (...) {
    read_error();
    throw;
  }
}

namespace {

ReadBack read_file(const std::filesystem::path& path, const ReadBackLogSink* log_sink) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw std::system_error(errno, std::generic_category(), "cannot open " + path.string());
  return read_readback_stream(f.get(), path.string(), {}, log_sink);
}

}  // namespace

ReadBack read_readback_file(const std::filesystem::path& path) { return read_file(path, nullptr); }

ReadBack read_readback_file(const std::filesystem::path& path, const ReadBackLogSink& log) {
  check_sink(&log);  // before the file is opened: a bad sink is named whatever the file
  return read_file(path, &log);
}

namespace {

void write_json(std::ostream& out, const ReadBack& rb, const ReadBackJsonStyle& style, const LogEntries& log_entries) {
  // dump(indent) of the whole document, member by member in its (sorted) key order, element by
  // element, each element dumped alone and indented to its place.
  const int indent = style.indent;
  const bool pretty = indent >= 0;
  const std::string step(pretty ? static_cast<std::size_t>(indent) : 0, ' ');
  const std::string open_item = pretty ? "\n" + step + step : std::string();  // before an array element
  auto dump = [&](const nlohmann::json& j) { return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace); };
  bool first = true;
  auto member = [&](const char* name) {
    out << (first ? "{" : ",");
    if (pretty) out << '\n' << step;
    out << '"' << name << (pretty ? "\": " : "\":");
    first = false;
  };
  auto array = [&](const char* name, const auto& items, auto&& element_json) {
    member(name);
    if (items.empty()) {
      out << "[]";
      return;
    }
    out << '[';
    bool first_item = true;
    for (const auto& item : items) {
      if (!first_item) out << ',';
      first_item = false;
      out << open_item;
      put_indented(out, dump(element_json(item)), step.size() * 2);
    }
    if (pretty) out << '\n' << step;
    out << ']';
  };
  auto value = [&](const char* name, const nlohmann::json& v) {
    member(name);
    put_indented(out, dump(v), step.size());
  };
  // The log from `log_entries`, one entry at a time (rb.log's, or wherever the caller keeps them).
  auto log_array = [&] {
    member("log");
    bool any = false;
    log_entries([&](const AcceptedWrite& w) {
      out << (any ? "," : "[") << open_item;
      any = true;
      put_indented(out, dump(log_json(w)), step.size() * 2);
    });
    if (!any) {
      out << "[]";
      return;
    }
    if (pretty) out << '\n' << step;
    out << ']';
  };
  array("chunks", rb.chunks, chunk_json);
  if (!rb.counters.empty() || style.always_effects_and_counters) value("counters", rb.counters);
  if (!rb.effects.empty() || style.always_effects_and_counters) array("effects", rb.effects, effect_json);
  value("fencing", rb.fencing);
  value("high_water", rb.high_water);
  if (!rb.ignored.empty()) value("ignored", to_json(rb.ignored));
  log_array();
  array("rejections", rb.rejections, rejection_json);
  value("resource", rb.resource);
  if (pretty) out << '\n';
  out << '}';
}

}  // namespace

void write_readback_json(std::ostream& out, const ReadBack& rb, const ReadBackJsonStyle& style) {
  write_json(out, rb, style, [&](const std::function<void(const AcceptedWrite&)>& each) {
    for (const AcceptedWrite& w : rb.log) each(w);
  });
}

void write_readback_json(std::ostream& out, const ReadBack& rb, const ReadBackJsonStyle& style, const LogEntries& log) {
  write_json(out, rb, style, log);
}

// ---- Rows of keys the run did not write

std::int64_t IgnoredRows::rows() const {
  std::int64_t n = 0;
  for (const auto& [key, parts] : keys)
    for (const auto& [part, rows] : parts) n += rows;
  return n;
}

void IgnoredRows::add(const std::string& key, const std::string& part, std::int64_t n) {
  if (n > 0) keys[key][part] += n;
}

void IgnoredRows::add_not_counted(const std::string& part) {
  if (std::find(not_counted.begin(), not_counted.end(), part) == not_counted.end()) not_counted.push_back(part);
}

void IgnoredRows::merge(const IgnoredRows& other) {
  for (const auto& [key, parts] : other.keys)
    for (const auto& [part, rows] : parts) add(key, part, rows);
  for (const auto& part : other.not_counted) add_not_counted(part);
}

std::string IgnoredRows::summary() const {
  if (empty()) return {};
  std::string s;
  if (!keys.empty()) {
    const std::int64_t n = rows();
    s = "ignored " + std::to_string(n) + (n == 1 ? " row of " : " rows of ") + std::to_string(keys.size()) +
        (keys.size() == 1 ? " key" : " keys") + " the run did not write: ";
    std::size_t shown = 0;
    for (const auto& [key, parts] : keys) {
      if (shown == 5) {
        s += " and " + std::to_string(keys.size() - shown) + " more";
        break;
      }
      s += (shown++ ? ", " : "") + key;
    }
  }
  if (!not_counted.empty()) {
    s += s.empty() ? "rows of keys the run did not write were not read (not counted) in " : "; rows of other keys not read (not counted) in ";
    for (std::size_t i = 0; i < not_counted.size(); ++i) s += (i ? ", " : "") + not_counted[i];
  }
  return s;
}

nlohmann::json to_json(const IgnoredRows& ignored) {
  nlohmann::json keys = nlohmann::json::object();
  for (const auto& [key, parts] : ignored.keys) keys[key] = parts;
  return {{"keys", std::move(keys)}, {"not_counted", ignored.not_counted}};
}

IgnoredRows ignored_rows_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw std::invalid_argument("read-back: 'ignored' must be an object");
  IgnoredRows out;
  if (auto k = j.find("keys"); k != j.end()) {
    if (!k->is_object()) throw std::invalid_argument("read-back: ignored.keys must be an object of key -> {part: rows}");
    for (const auto& [key, parts] : k->items()) {
      if (!parts.is_object()) throw std::invalid_argument("read-back: ignored.keys['" + key + "'] must be an object");
      for (const auto& [part, rows] : parts.items()) {
        if (!rows.is_number_integer() || (rows.is_number_unsigned() && rows.get<std::uint64_t>() > INT64_MAX) ||
            rows.get<std::int64_t>() < 0)
          throw std::invalid_argument("read-back: ignored.keys['" + key + "']['" + part + "'] must be a row count");
        out.add(key, part, rows.get<std::int64_t>());
      }
    }
  }
  if (auto n = j.find("not_counted"); n != j.end()) {
    if (!n->is_array()) throw std::invalid_argument("read-back: ignored.not_counted must be an array of strings");
    for (const auto& part : *n) {
      if (!part.is_string()) throw std::invalid_argument("read-back: ignored.not_counted must be an array of strings");
      out.add_not_counted(part.get<std::string>());
    }
  }
  return out;
}

void drop_foreign_rows(ReadBack& rb, const std::set<std::string>& run_keys) {
  auto foreign = [&](const std::string& key) { return run_keys.count(key) == 0; };
  auto drop = [&](auto& rows, const char* part) {
    auto kept = std::remove_if(rows.begin(), rows.end(), [&](const auto& row) {
      if (!foreign(row.key)) return false;
      rb.ignored.add(row.key, part);
      return true;
    });
    rows.erase(kept, rows.end());
  };
  drop(rb.chunks, "read_back");
  drop(rb.log, "accept_log");
  drop(rb.rejections, "rejections");
  drop(rb.effects, "effects");
  auto drop_map = [&](std::map<std::string, std::int64_t>& m, const char* part) {
    for (auto it = m.begin(); it != m.end();) {
      if (foreign(it->first)) {
        rb.ignored.add(it->first, part);
        it = m.erase(it);
      } else {
        ++it;
      }
    }
  };
  drop_map(rb.high_water, "high_water");
  drop_map(rb.counters, "counters");
}

ReadBackLogSink foreign_row_log_filter(const ReadBackLogSink& inner, const std::set<std::string>& run_keys,
                                       IgnoredRows& ignored) {
  ReadBackLogSink out;
  out.add = [&inner, &run_keys, &ignored](AcceptedWrite&& w) {
    if (run_keys.count(w.key)) {
      inner.add(std::move(w));
    } else {
      ignored.add(w.key, "accept_log");
    }
  };
  out.clear = [&inner, &ignored] {
    for (auto it = ignored.keys.begin(); it != ignored.keys.end();) {
      it->second.erase("accept_log");
      it = it->second.empty() ? ignored.keys.erase(it) : std::next(it);
    }
    inner.clear();
  };
  return out;
}

}  // namespace fencecheck
