// fencecheck bench — reading a run's history (issue 16): nlohmann-json, today's parser
// (event_from_json_line), against a simdjson ondemand parser written here that fills the same
// fencecheck::Event, on a history.jsonl written by the real writer (save_history_jsonl) from the
// checker benchmark's synthetic history (synthetic_history.h), and on its .zst form.
//
// Usage: bench_history_parse [events] [--reps R] [--dir DIR] [--only TEXT]
//   events  at least this many events (default 10^6; the generator adds fewer than 20)
//   --reps  how many times each pass runs; the median is reported (default 3)
//   --dir   keep the generated history-<events>.jsonl(.zst) in DIR and reuse them when present
//           (default: a temporary directory under $FENCECHECK_BENCH_TMP, removed at exit)
//   --only  run only the passes whose name contains TEXT (e.g. "simdjson", for a profiler)
//
// Correctness first: every line of the file is parsed by both parsers and the two Events must be
// equal field for field; then a list of malformed and unusual lines must give equal Events or the
// same exception message from both. Any difference exits 1 naming the line and the field.
//
// Passes, each on one thread, timed with CLOCK_PROCESS_CPUTIME_ID (CPU seconds of this process)
// and CLOCK_MONOTONIC (wall seconds):
//   split (memory)          the file already in memory, cut at '\n' (memchr): the floor of any parser
//   read+split plain        for_each_history_line on history.jsonl (page cache warm)
//   read+split .zst         for_each_history_line on history.jsonl.zst (zstd decompression)
//   nlohmann (memory)       event_from_json_line on every line of the in-memory file
//   simdjson (memory)       the ondemand parser below on every line of the in-memory file
//   .zst + nlohmann         for_each_history_line(.zst) and event_from_json_line: a reader's full cost
//   .zst + simdjson         the same with the ondemand parser (each line copied into a padded buffer)
// Figures: events per CPU second and MB (10^6 bytes of plain JSON lines, '\n' included) per CPU
// second, the median of the runs, with every run's CPU seconds.
// Memory: the whole file (about 140 bytes per event), and while generating it the synthetic
// history (about 400 bytes per event: 4 GB at 10^7).
#include <time.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <simdjson.h>

#include "bench_util.h"
#include "fencecheck/harness/history.h"
#include "fencecheck/proto/event.h"
#include "synthetic_history.h"

namespace fb = fencecheck::bench;
namespace fh = fencecheck::harness;
using fencecheck::Event;
using fencecheck::EventKind;

namespace {

// ---- The simdjson ondemand parser -------------------------------------------------------------

/// An Event field with its JSON name: an optional integer (event.cpp's get_opt calls) or a string
/// (its get_str calls); the other member pointer is null. t_ns, src_ns and kind are apart.
struct Field {
  std::string_view name;
  std::optional<std::int64_t> Event::*integer = nullptr;
  std::string Event::*text = nullptr;
};
constexpr std::array<Field, 18> kFields{{
    {"token", &Event::token},       {"high_water", &Event::high_water},   {"lease_id", &Event::lease_id},
    {"revision", &Event::revision}, {"segment", &Event::segment},         {"chunk", &Event::chunk},
    {"duration_ns", &Event::duration_ns}, {"ttl_ms", &Event::ttl_ms},     {"protocol", &Event::protocol},
    {"line_no", &Event::line_no},   {"source", nullptr, &Event::source},  {"lock", nullptr, &Event::lock},
    {"lock_key", nullptr, &Event::lock_key}, {"key", nullptr, &Event::key}, {"fault", nullptr, &Event::fault},
    {"target", nullptr, &Event::target}, {"detail", nullptr, &Event::detail}, {"line", nullptr, &Event::line},
}};
/// Field numbers for the "seen" bit mask: kFields' positions, then these three.
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
/// Every kind's wire name at its enumerator's number (kind_name, the one table of names).
const std::array<std::string_view, 24> kKindNames = [] {
  static_assert(static_cast<int>(EventKind::kProtocolError) == 23, "EventKind gained an enumerator: resize kKindNames");
  std::array<std::string_view, 24> names{};
  for (std::size_t i = 0; i < names.size(); ++i) names[i] = fencecheck::kind_name(static_cast<EventKind>(i));
  return names;
}();

/// The position of `text` in `names`; -1 when absent. Length, first and last character first: a
/// full compare (memcmp) only for the likely one. The linear search with a plain == (every
/// candidate of the same length memcmp'd) was 15 % of this parser's time.
template <std::size_t N>
int position(const std::array<std::string_view, N>& names, std::string_view text) {
  for (std::size_t i = 0; i < N; ++i) {
    const std::string_view n = names[i];
    if (n.size() == text.size() && !n.empty() && n.front() == text.front() && n.back() == text.back() && n == text)
      return static_cast<int>(i);
  }
  return -1;
}

/// Parses history lines into Events with simdjson's ondemand API. Same contract as
/// event_from_json_line: a line the fast path takes (one JSON object, every key an Event field at
/// most once, integers that fit int64_t, strings, a known kind, nothing after the object) is
/// parsed here; any other line (malformed, null, an unknown or repeated key, a wrong type) goes to
/// event_from_json_line, which returns its Event or throws its std::invalid_argument. So the
/// messages are nlohmann's by construction, and only the fast path needs proving (main's checks).
/// Not thread-safe: one per thread.
class OndemandEventParser {
 public:
  /// `line` must be followed by at least simdjson::SIMDJSON_PADDING readable bytes up to
  /// line.data() + capacity (a line inside a larger buffer is: the next lines are its padding).
  Event parse(std::string_view line, std::size_t capacity) {
    Event e;
    if (fast(line, capacity, e)) return e;
    ++fallbacks_;
    return fencecheck::event_from_json_line(line);
  }
  /// Any line: copied into a padded buffer of this parser's first.
  Event parse(std::string_view line) {
    padded_.assign(line);
    padded_.resize(line.size() + simdjson::SIMDJSON_PADDING, ' ');
    return parse(std::string_view(padded_.data(), line.size()), padded_.size());
  }
  /// Lines that went to event_from_json_line so far.
  [[nodiscard]] std::int64_t fallbacks() const { return fallbacks_; }

 private:
  /// True when the line is on the fast path, with `e` filled; false (e partly filled) otherwise.
  bool fast(std::string_view line, std::size_t capacity, Event& e) {
    namespace od = simdjson::ondemand;
    od::document doc;
    if (parser_.iterate(line.data(), line.size(), capacity).get(doc) != simdjson::SUCCESS) return false;
    od::object object;
    if (doc.get_object().get(object) != simdjson::SUCCESS) return false;
    std::uint32_t seen = 0;
    for (auto item : object) {
      od::field field;
      std::string_view key;
      if (std::move(item).get(field) != simdjson::SUCCESS || field.unescaped_key().get(key) != simdjson::SUCCESS)
        return false;
      const int n = position(kFieldNames, key);
      if (n < 0 || (seen & (1U << n)) != 0) return false;
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
      std::string_view text;
      if (value.get_string().get(text) != simdjson::SUCCESS) return false;
      if (n == kKind) {
        const int kind = position(kKindNames, text);
        if (kind < 0) return false;
        e.kind = static_cast<EventKind>(kind);
      } else {
        e.*(f->text) = text;
      }
    }
    if ((seen & (1U << kKind)) == 0) return false;
    // Nothing after the object: simdjson 3.0 has no document::at_end(); raw_json() (from the
    // object's '{' to the next token) reaches the line's end only when no token follows. The
    // unusual lines "{...} x" and "{...}{}" in main's check prove it.
    std::string_view whole;
    if (doc.raw_json().get(whole) != simdjson::SUCCESS) return false;
    return whole.data() + whole.size() == line.data() + line.size();
  }

  simdjson::ondemand::parser parser_;
  std::string padded_;
  std::int64_t fallbacks_ = 0;
};

// The implementation this translation unit's ondemand code was compiled for (simdjson's
// builtin_implementation() would name the shared library's, compiled without -march).
#define FC_TEXT(x) #x
#define FC_EXPANDED_TEXT(x) FC_TEXT(x)
constexpr const char* kOndemandBuiltin = FC_EXPANDED_TEXT(SIMDJSON_BUILTIN_IMPLEMENTATION);

// ---- Equality, field for field -----------------------------------------------------------------

/// The first field in which a and b differ, as "name: <a> vs <b>"; nullopt when they are equal.
std::optional<std::string> first_difference(const Event& a, const Event& b) {
  const auto show = [](const std::optional<std::int64_t>& v) { return v ? std::to_string(*v) : std::string("absent"); };
  if (a.t_ns != b.t_ns) return "t_ns: " + std::to_string(a.t_ns) + " vs " + std::to_string(b.t_ns);
  if (a.src_ns != b.src_ns) return "src_ns: " + std::to_string(a.src_ns) + " vs " + std::to_string(b.src_ns);
  if (a.kind != b.kind)
    return "kind: " + std::string(fencecheck::kind_name(a.kind)) + " vs " + std::string(fencecheck::kind_name(b.kind));
  for (const Field& f : kFields) {
    if (f.integer != nullptr && a.*f.integer != b.*f.integer)
      return std::string(f.name) + ": " + show(a.*f.integer) + " vs " + show(b.*f.integer);
    if (f.text != nullptr && a.*f.text != b.*f.text)
      return std::string(f.name) + ": '" + a.*f.text + "' vs '" + b.*f.text + "'";
  }
  return std::nullopt;
}

/// What a parser made of one line: the Event, or the message of the exception it threw.
struct Outcome {
  std::optional<Event> event;
  std::string error;
};
Outcome outcome(const std::function<Event()>& parse) {
  try {
    return {parse(), {}};
  } catch (const std::exception& e) {
    return {std::nullopt, e.what()};
  }
}

/// The two outcomes' first difference (event vs exception, the message, a field); nullopt if equal.
std::optional<std::string> compare(const Outcome& a, const Outcome& b) {
  if (a.event.has_value() != b.event.has_value())
    return a.event ? "nlohmann parsed it, simdjson threw: " + b.error : "nlohmann threw: " + a.error + "; simdjson parsed it";
  if (!a.event) return a.error == b.error ? std::nullopt : std::optional<std::string>("messages: " + a.error + " | " + b.error);
  return first_difference(*a.event, *b.event);
}

/// Malformed and unusual lines the writer never produces but a reader must treat as nlohmann does.
std::vector<std::string> unusual_lines() {
  return {
      R"({"kind":"log"})",
      R"(  {"t_ns":1,"src_ns":2,"source":"w1","kind":"write.ok","token":3,"high_water":3}  )",
      R"({"kind":"log","detail":"q\"b\\s\/\n\t\u00e9\ud83d\ude00"})",
      R"({"kind":"log","t_ns":-0,"src_ns":-9223372036854775808,"token":9223372036854775807})",
      R"({"kind":"log","token":9223372036854775808})",
      R"({"kind":"log","token":18446744073709551616})",
      R"({"kind":"log","token":1.0})",
      R"({"kind":"log","token":1e3})",
      R"({"kind":"log","token":01})",
      R"({"kind":"log","token":-})",
      R"({"kind":"log","token":"5"})",
      R"({"kind":"log","token":true})",
      R"({"kind":"log","token":null,"detail":null})",
      R"({"kind":"log","detail":5})",
      R"({"kind":"log","source":{"a":1}})",
      R"({"kind":"log","kind":"pause"})",
      R"({"kind":"log","token":1,"token":2})",
      R"({"kind":"log","extra":[1,{"a":2}],"token":4})",
      R"({"kind":"log","extra":01})",
      R"({"kind":"log","t\u005fns":5})",
      R"({"kind":"log","detail":"\ud800"})",
      R"({"kind":"log","detail":"\udc00x"})",
      R"({"kind":"log","detail":"\u0000"})",
      "{\"kind\":\"log\",\"detail\":\"\x01\"}",
      "{\"kind\":\"log\",\"detail\":\"\xff\"}",
      "\xEF\xBB\xBF{\"kind\":\"log\"}",
      R"({"kind":"log",})",
      R"({"kind":"log" "t_ns":1})",
      R"({"kind":"log"} x)",
      R"({"kind":"log"}{})",
      R"({"kind":"log")",
      R"({"kind":5})",
      R"({"kind":null})",
      R"({"kind":"nope"})",
      R"({"t_ns":1})",
      R"({})",
      R"([])",
      R"("log")",
      "",
      "   ",
      "nonsense",
  };
}

// ---- Timing ------------------------------------------------------------------------------------

double clock_s(clockid_t clock) {
  timespec ts{};
  ::clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

/// One pass's runs.
struct Pass {
  std::string name;
  std::vector<double> cpu_s, wall_s;  ///< per run, seconds
  std::int64_t events = 0;            ///< events (lines) a run handles
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

/// The 1-minute load average (/proc/loadavg), as text.
std::string loadavg() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

/// A sink the optimiser cannot drop: every pass folds what it parsed into it.
volatile std::uint64_t g_sink = 0;
std::uint64_t fold(const Event& e) {
  return static_cast<std::uint64_t>(e.t_ns) + static_cast<std::uint64_t>(e.kind) + e.source.size() +
         static_cast<std::uint64_t>(e.token.value_or(0)) + e.lock_key.size() + e.detail.size();
}

/// Calls fn(line, capacity) for each '\n'-terminated line of `text`, without its '\n' (the
/// writer's lines have no '\r'); capacity = bytes readable from the line's start (to text's end
/// plus its padding).
template <class Fn>
std::int64_t for_each_line(const std::string& text, std::size_t padding, Fn&& fn) {
  std::int64_t lines = 0;
  const char* p = text.data();
  const char* end = p + (text.size() - padding);
  while (p < end) {
    const auto* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
    const char* stop = nl != nullptr ? nl : end;
    fn(std::string_view(p, static_cast<std::size_t>(stop - p)), static_cast<std::size_t>(end + padding - p));
    ++lines;
    p = stop + 1;
  }
  return lines;
}

int usage() {
  std::fprintf(stderr, "usage: bench_history_parse [events] [--reps R] [--dir DIR] [--only TEXT]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t target = 1'000'000;
  int reps = 3;
  std::string dir_arg, only;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else if (a == "--dir" && i + 1 < argc) {
      dir_arg = argv[++i];
    } else if (!a.empty() && a[0] != '-') {
      target = std::atoll(a.c_str());
    } else {
      return usage();
    }
  }
  if (target <= 0) return usage();

  std::optional<fb::TempDir> temp;
  std::filesystem::path dir;
  if (dir_arg.empty()) {
    temp.emplace("history-parse");
    dir = temp->path();
  } else {
    dir = dir_arg;
    std::filesystem::create_directories(dir);
  }
  const std::filesystem::path plain = dir / ("history-" + std::to_string(target) + ".jsonl");
  std::filesystem::path zst = plain;
  zst += ".zst";
  std::printf("load average at start: %s\n", loadavg().c_str());
  if (!std::filesystem::exists(plain) || !std::filesystem::exists(zst)) {
    const double t0 = clock_s(CLOCK_MONOTONIC);
    {
      const fb::Synthetic s = fb::make_history(target);
      fh::save_history_jsonl(plain, s.history);
    }
    // compress_history replaces its input: compress a copy.
    std::filesystem::path copy = dir / "to-compress.jsonl";
    std::filesystem::copy_file(plain, copy, std::filesystem::copy_options::overwrite_existing);
    const fh::CompressedHistory c = fh::compress_history(copy, 1);
    std::filesystem::rename(c.path, zst);
    std::printf("generated %s and its .zst (level 1) in %.1f s wall\n", plain.c_str(), clock_s(CLOCK_MONOTONIC) - t0);
  }

  // The file in memory, with simdjson's padding after it.
  const std::size_t padding = simdjson::SIMDJSON_PADDING;
  std::string text;
  {
    std::ifstream in(plain, std::ios::binary);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (!in && !in.eof()) {
      std::fprintf(stderr, "cannot read %s\n", plain.c_str());
      return 1;
    }
  }
  const auto bytes = static_cast<double>(text.size());
  text.append(padding, ' ');
  const auto zst_bytes = static_cast<double>(std::filesystem::file_size(zst));
  const std::int64_t events = for_each_line(text, padding, [](std::string_view, std::size_t) {});
  std::printf("file: %lld events, %.1f MB plain (%.1f bytes/event), %.1f MB .zst (%.2fx)\n",
              static_cast<long long>(events), bytes / 1e6, bytes / static_cast<double>(events), zst_bytes / 1e6,
              bytes / zst_bytes);
  // Stage 1 (finding the structure) is chosen at run time from the CPU; the ondemand iteration
  // (numbers, strings) is compiled into this program for the CPU its flags allow (the builtin).
  std::printf("simdjson %d.%d.%d: stage 1 %s (run-time choice), ondemand %s (compiled in)\n",
              simdjson::SIMDJSON_VERSION_MAJOR, simdjson::SIMDJSON_VERSION_MINOR, simdjson::SIMDJSON_VERSION_REVISION,
              simdjson::get_active_implementation()->name().c_str(), kOndemandBuiltin);

  // Correctness: every line, then the unusual ones.
  OndemandEventParser ondemand;
  {
    const double t0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    std::int64_t number = 0;
    bool bad = false;
    for_each_line(text, padding, [&](std::string_view line, std::size_t capacity) {
      ++number;
      if (bad) return;
      const Outcome a = outcome([&] { return fencecheck::event_from_json_line(line); });
      const Outcome b = outcome([&] { return ondemand.parse(line, capacity); });
      if (const auto diff = compare(a, b)) {
        std::fprintf(stderr, "MISMATCH at %s:%lld: %s\n  line: %.*s\n", plain.c_str(), static_cast<long long>(number),
                     diff->c_str(), static_cast<int>(line.size()), line.data());
        bad = true;
      }
    });
    if (bad) return 1;
    std::printf("check: %lld lines, simdjson's Event equal to nlohmann's field for field on every line "
                "(%lld lines left the fast path); %.1f CPU s\n",
                static_cast<long long>(number), static_cast<long long>(ondemand.fallbacks()),
                clock_s(CLOCK_PROCESS_CPUTIME_ID) - t0);
    const std::int64_t before = ondemand.fallbacks();
    int n = 0;
    for (const std::string& line : unusual_lines()) {
      ++n;
      const Outcome a = outcome([&] { return fencecheck::event_from_json_line(line); });
      const Outcome b = outcome([&] { return ondemand.parse(line); });
      if (const auto diff = compare(a, b)) {
        std::fprintf(stderr, "MISMATCH on unusual line %d: %s\n  line: %s\n", n, diff->c_str(), line.c_str());
        return 1;
      }
    }
    std::printf("check: %d unusual lines (malformed, escapes, nulls, repeated and unknown keys, out-of-range "
                "numbers), same Event or same message from both; %lld of them left the fast path\n",
                n, static_cast<long long>(ondemand.fallbacks() - before));
  }

  // The passes, run round-robin `reps` times so that a neighbour's load spreads over all of them.
  std::vector<Pass> passes;
  std::vector<std::function<std::int64_t()>> bodies;
  const auto add = [&](std::string name, std::function<std::int64_t()> body) {
    if (name.find(only) == std::string::npos) return;
    passes.push_back({std::move(name), {}, {}, 0});
    bodies.push_back(std::move(body));
  };
  add("split (memory)", [&] {
    std::uint64_t sum = 0;
    const std::int64_t n = for_each_line(text, padding, [&](std::string_view line, std::size_t) { sum += line.size(); });
    g_sink = g_sink + sum;
    return n;
  });
  const auto read_lines = [&](const std::filesystem::path& path, const std::function<void(std::string_view)>& fn) {
    std::int64_t n = 0;
    fh::for_each_history_line(path, [&](std::string_view line, std::size_t) {
      fn(line);
      ++n;
    });
    return n;
  };
  add("read+split plain", [&] {
    std::uint64_t sum = 0;
    const std::int64_t n = read_lines(plain, [&](std::string_view line) { sum += line.size(); });
    g_sink = g_sink + sum;
    return n;
  });
  add("read+split .zst", [&] {
    std::uint64_t sum = 0;
    const std::int64_t n = read_lines(zst, [&](std::string_view line) { sum += line.size(); });
    g_sink = g_sink + sum;
    return n;
  });
  add("nlohmann (memory)", [&] {
    std::uint64_t sum = 0;
    const std::int64_t n = for_each_line(text, padding, [&](std::string_view line, std::size_t) {
      sum += fold(fencecheck::event_from_json_line(line));
    });
    g_sink = g_sink + sum;
    return n;
  });
  add("simdjson (memory)", [&] {
    std::uint64_t sum = 0;
    const std::int64_t n = for_each_line(text, padding, [&](std::string_view line, std::size_t capacity) {
      sum += fold(ondemand.parse(line, capacity));
    });
    g_sink = g_sink + sum;
    return n;
  });
  add(".zst + nlohmann", [&] {
    std::uint64_t sum = 0;
    const std::int64_t n = read_lines(zst, [&](std::string_view line) { sum += fold(fencecheck::event_from_json_line(line)); });
    g_sink = g_sink + sum;
    return n;
  });
  add(".zst + simdjson", [&] {
    std::uint64_t sum = 0;
    const std::int64_t n = read_lines(zst, [&](std::string_view line) { sum += fold(ondemand.parse(line)); });
    g_sink = g_sink + sum;
    return n;
  });
  const std::int64_t fallbacks_before = ondemand.fallbacks();
  for (int r = 0; r < reps; ++r) {
    for (std::size_t i = 0; i < passes.size(); ++i) {
      const double c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID), w0 = clock_s(CLOCK_MONOTONIC);
      passes[i].events = bodies[i]();
      passes[i].cpu_s.push_back(clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0);
      passes[i].wall_s.push_back(clock_s(CLOCK_MONOTONIC) - w0);
    }
  }

  std::printf("\n%d runs per pass, median; MB = 10^6 bytes of plain JSON lines; one thread\n", reps);
  std::printf("%-20s %10s %12s %12s %14s %10s  %s\n", "pass", "events", "CPU s", "wall s", "events/CPU s",
              "MB/CPU s", "CPU s of each run");
  for (const Pass& p : passes) {
    const double cpu = median(p.cpu_s), wall = median(p.wall_s);
    std::string runs;
    for (double c : p.cpu_s) runs += (runs.empty() ? "" : " ") + std::to_string(c).substr(0, 6);
    std::printf("%-20s %10lld %12.3f %12.3f %12.2f M %10.1f  %s\n", p.name.c_str(), static_cast<long long>(p.events), cpu,
                wall, static_cast<double>(p.events) / cpu / 1e6, bytes / 1e6 / cpu, runs.c_str());
    if (p.events != events) {
      std::fprintf(stderr, "pass %s saw %lld lines, the file has %lld\n", p.name.c_str(),
                   static_cast<long long>(p.events), static_cast<long long>(events));
      return 1;
    }
  }
  std::printf("load average at end: %s; lines off the fast path in the passes: %lld\n", loadavg().c_str(),
              static_cast<long long>(ondemand.fallbacks() - fallbacks_before));
  return 0;
}
