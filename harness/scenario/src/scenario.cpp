#include "fencecheck/harness/scenario.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <system_error>
#include <utility>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "fencecheck/proto/chunk.h"

namespace fencecheck::harness {

// ---------------------------------------------------------------------------------------------
// Errors

namespace {

std::string located(const std::string& file, int line, int column, const std::string& message) {
  if (line <= 0) return file + ": " + message;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " + message;
}

}  // namespace

ScenarioError::ScenarioError(std::string file, int line, int column, std::string message)
    : std::runtime_error(located(file, line, column, message)),
      file_(std::move(file)),
      line_(line),
      column_(column),
      message_(std::move(message)) {}

// ---------------------------------------------------------------------------------------------
// Name tables. `implemented` false: the name is reserved and recognised, but the loader refuses it
// with "not implemented yet" so a plan never promises what the harness cannot do.

namespace {

template <typename E>
struct Row {
  E value;
  std::string_view name;
  bool implemented;
};

constexpr std::array<Row<LockServiceKind>, 1> kLockServiceKinds{{{LockServiceKind::kEtcd, "etcd", true}}};
constexpr std::array<Row<ResourceKind>, 1> kResourceKinds{{{ResourceKind::kStore, "store", true}}};
constexpr std::array<Row<FencingMode>, 2> kFencingModes{{
    {FencingMode::kPerKey, "per-key", true},
    {FencingMode::kNone, "none", true},
}};
constexpr std::array<Row<NetworkMode>, 2> kNetworkModes{{
    {NetworkMode::kHost, "host", true},
    {NetworkMode::kNamespaces, "namespaces", false},
}};
constexpr std::array<Row<FaultKind>, 1> kFaultKinds{{{FaultKind::kSigstop, "sigstop", true}}};
constexpr std::array<Row<Outcome>, 2> kOutcomes{{{Outcome::kSafe, "safe", true}, {Outcome::kAnomaly, "anomaly", true}}};

template <typename E, std::size_t N>
std::string_view name_in(const std::array<Row<E>, N>& table, E v) {
  for (const auto& r : table)
    if (r.value == v) return r.name;
  return "?";
}

template <typename E, std::size_t N>
std::vector<std::string_view> implemented_names(const std::array<Row<E>, N>& table) {
  std::vector<std::string_view> out;
  for (const auto& r : table)
    if (r.implemented) out.push_back(r.name);
  return out;
}

std::string join(const std::vector<std::string_view>& items, std::string_view sep = ", ") {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += items[i];
  }
  return out;
}

std::string quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

}  // namespace

std::string_view to_string(LockServiceKind k) { return name_in(kLockServiceKinds, k); }
std::string_view to_string(ResourceKind k) { return name_in(kResourceKinds, k); }
std::string_view to_string(FencingMode m) { return name_in(kFencingModes, m); }
std::string_view to_string(NetworkMode m) { return name_in(kNetworkModes, m); }
std::string_view to_string(FaultKind k) { return name_in(kFaultKinds, k); }
std::string_view to_string(Outcome o) { return name_in(kOutcomes, o); }

std::vector<std::string_view> known_fault_kinds() { return implemented_names(kFaultKinds); }
std::vector<std::string_view> known_fencing_modes() { return implemented_names(kFencingModes); }

const std::vector<std::string>& known_anomalies() {
  static const std::vector<std::string> names{
      "interleaved-segment", "stale-write-accepted", "duplicate-effect",   "counter-drift",
      "foreign-release",     "token-regression",     "fenced-out",         "rejection-storm",
      "cross-key-rejection", "lost-acknowledged-write", "corrupt-chunk",
  };
  return names;
}

bool is_known_anomaly(std::string_view name) {
  const auto& all = known_anomalies();
  return std::find(all.begin(), all.end(), name) != all.end();
}

bool is_worker_event(EventKind kind) {
  switch (kind) {
    case EventKind::kAcquireInvoke:
    case EventKind::kAcquireOk:
    case EventKind::kAcquireFail:
    case EventKind::kKeepaliveFail:
    case EventKind::kLeaseLost:
    case EventKind::kWriteInvoke:
    case EventKind::kWriteOk:
    case EventKind::kWriteFail:
    case EventKind::kWriteInfo:
    case EventKind::kPause:
    case EventKind::kReleaseInvoke:
    case EventKind::kReleaseOk:
    case EventKind::kReleaseFail:
    case EventKind::kJobDone:
      return true;
    default:
      return false;
  }
}

// ---------------------------------------------------------------------------------------------
// Durations

namespace {

struct Unit {
  std::string_view name;
  std::int64_t ns;
};
// Longest suffix first so "ms" is not read as "m" + "s".
constexpr std::array<Unit, 5> kUnits{{{"ns", 1}, {"us", 1'000}, {"ms", 1'000'000}, {"s", 1'000'000'000},
                                      {"m", 60'000'000'000}}};

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool looks_numeric(std::string_view s) {
  if (!s.empty() && (s.front() == '-' || s.front() == '+')) s.remove_prefix(1);
  auto dot = s.find('.');
  if (dot == std::string_view::npos) return all_digits(s);
  return all_digits(s.substr(0, dot)) && all_digits(s.substr(dot + 1));
}

}  // namespace

std::optional<Duration> parse_duration(std::string_view text, std::string* error) {
  auto fail = [&](std::string why) -> std::optional<Duration> {
    if (error) *error = std::move(why);
    return std::nullopt;
  };
  if (text.empty()) return fail("empty");
  if (looks_numeric(text)) return fail("no unit");
  const Unit* unit = nullptr;
  std::string_view number;
  for (const auto& u : kUnits) {
    // Try two-letter units before "s" and "m".
    if (text.size() > u.name.size() && text.substr(text.size() - u.name.size()) == u.name) {
      std::string_view n = text.substr(0, text.size() - u.name.size());
      if (looks_numeric(n)) {
        unit = &u;
        number = n;
        break;
      }
    }
  }
  if (!unit) return fail("not a duration");
  if (number.front() == '-') return fail("negative");
  if (number.front() == '+') number.remove_prefix(1);
  auto dot = number.find('.');
  std::string_view whole = number.substr(0, dot);
  std::string_view frac = dot == std::string_view::npos ? std::string_view{} : number.substr(dot + 1);
  if (whole.empty() && frac.empty()) return fail("not a duration");
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  std::int64_t w = 0;
  if (!whole.empty()) {
    auto [p, ec] = std::from_chars(whole.data(), whole.data() + whole.size(), w);
    if (ec != std::errc() || p != whole.data() + whole.size()) return fail("too large");
  }
  if (w > kMax / unit->ns) return fail("too large");
  std::int64_t ns = w * unit->ns;
  // The fraction must come out as whole nanoseconds.
  std::int64_t scale = unit->ns;
  for (char c : frac) {
    int digit = c - '0';
    if (scale % 10 != 0) {
      if (digit != 0) return fail("finer than a nanosecond");
      continue;
    }
    scale /= 10;
    if (ns > kMax - digit * scale) return fail("too large");
    ns += digit * scale;
  }
  return Duration(ns);
}

std::string format_duration(Duration d) {
  std::int64_t ns = d.count();
  if (ns == 0) return "0s";
  for (auto it = kUnits.rbegin(); it != kUnits.rend(); ++it) {
    // 120s reads better than 2m only when it is not whole minutes; prefer s for under 10 minutes.
    if (it->name == "m" && ns < 600'000'000'000) continue;
    if (ns % it->ns == 0) return std::to_string(ns / it->ns) + std::string(it->name);
  }
  return std::to_string(ns) + "ns";
}

// ---------------------------------------------------------------------------------------------
// The parser

const WorkerSpec* Scenario::find_worker(std::string_view id) const {
  for (const auto& w : workers_)
    if (w.id == id) return &w;
  return nullptr;
}

namespace detail {

namespace {

/// 1-based line/column of a yaml-cpp mark; (1,1) for a null mark (an empty document).
std::pair<int, int> position(const YAML::Mark& m) {
  if (m.is_null() || m.line < 0) return {1, 1};
  return {m.line + 1, m.column + 1};
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string describe(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
      return "nothing (null)";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Scalar:
      return quote(n.Scalar());
    default:
      return "an undefined node";
  }
}

}  // namespace

/// A value found in the YAML, with where it is and how to name it in messages.
struct Value {
  YAML::Node node;
  YAML::Mark mark;   // the value's own mark, or its key's when the value is null
  std::string path;  // "lease_ttl", "job.segments", "workers[1].start_after.event"
};

class ScenarioParser {
 public:
  explicit ScenarioParser(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const YAML::Mark& mark, const std::string& path, const std::string& message) const {
    auto [line, col] = position(mark);
    throw ScenarioError(file_, line, col, path.empty() ? message : path + ": " + message);
  }
  [[noreturn]] void fail(const Value& v, const std::string& message) const { fail(v.mark, v.path, message); }

  /// A mapping's fields, checked for unknown and duplicate keys on construction.
  class Map {
   public:
    Map(const ScenarioParser& p, const Value& v, std::vector<std::string_view> allowed)
        : p_(p), self_(v), allowed_(std::move(allowed)) {
      if (!v.node.IsMap()) p.fail(v, "expected a mapping, got " + describe(v.node));
      for (auto it = v.node.begin(); it != v.node.end(); ++it) {
        // Copies: yaml-cpp's iterator hands out a temporary pair, references into it dangle.
        const YAML::Node k = it->first;
        if (!k.IsScalar()) p.fail(k.Mark(), v.path, "a key must be a plain name, got " + describe(k));
        const std::string& name = k.Scalar();
        if (std::find(allowed_.begin(), allowed_.end(), name) == allowed_.end()) {
          std::string msg = "unknown key " + quote(name);
          std::string_view best;
          std::size_t best_d = 3;
          for (auto a : allowed_) {
            std::size_t d = edit_distance(name, a);
            if (d < best_d) best_d = d, best = a;
          }
          if (!best.empty()) msg += " (did you mean " + quote(best) + "?)";
          msg += "; allowed keys: " + join(allowed_);
          p.fail(k.Mark(), v.path, msg);
        }
        if (fields_.count(name)) p.fail(k.Mark(), v.path, "duplicate key " + quote(name));
        const YAML::Node val = it->second;
        YAML::Mark m = val.IsNull() ? k.Mark() : val.Mark();
        fields_.emplace(name, Value{val, m, v.path.empty() ? name : v.path + "." + name});
      }
    }

    /// The field, or nullopt when absent or null (an empty value means "not set").
    [[nodiscard]] std::optional<Value> get(std::string_view key) const {
      auto it = fields_.find(std::string(key));
      if (it == fields_.end() || it->second.node.IsNull()) return std::nullopt;
      return it->second;
    }
    [[nodiscard]] Value require(std::string_view key) const {
      auto it = fields_.find(std::string(key));
      if (it == fields_.end())
        p_.fail(self_.mark, self_.path, "missing required field " + quote(key));
      if (it->second.node.IsNull()) p_.fail(it->second, "missing value (required)");
      return it->second;
    }
    [[nodiscard]] bool has(std::string_view key) const { return get(key).has_value(); }
    [[nodiscard]] const Value& self() const { return self_; }

   private:
    const ScenarioParser& p_;
    Value self_;
    std::vector<std::string_view> allowed_;
    std::map<std::string, Value> fields_;
  };

  // ---- scalar readers

  std::string string(const Value& v) const {
    if (!v.node.IsScalar()) fail(v, "expected a string, got " + describe(v.node));
    return v.node.Scalar();
  }

  std::int64_t integer(const Value& v, std::int64_t min, std::int64_t max) const {
    if (!v.node.IsScalar()) fail(v, "expected an integer, got " + describe(v.node));
    const std::string& s = v.node.Scalar();
    if (v.node.Tag() == "!") fail(v, "expected an integer, got the quoted string " + quote(s));
    std::int64_t out = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    if (s.empty() || ptr != s.data() + s.size() || (ec != std::errc() && ec != std::errc::result_out_of_range))
      fail(v, "expected an integer, got " + quote(s));
    if (ec == std::errc::result_out_of_range || out < min || out > max) {
      std::string range = max == std::numeric_limits<std::int64_t>::max()
                              ? "at least " + std::to_string(min)
                              : "between " + std::to_string(min) + " and " + std::to_string(max);
      fail(v, "expected an integer " + range + ", got " + s);
    }
    return out;
  }

  std::uint64_t unsigned64(const Value& v) const {
    if (!v.node.IsScalar()) fail(v, "expected an unsigned integer, got " + describe(v.node));
    const std::string& s = v.node.Scalar();
    if (v.node.Tag() == "!") fail(v, "expected an unsigned integer, got the quoted string " + quote(s));
    if (!all_digits(s)) fail(v, "expected an unsigned integer (0 .. 18446744073709551615), got " + quote(s));
    std::uint64_t out = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    if (ec != std::errc() || ptr != s.data() + s.size())
      fail(v, "expected an unsigned integer (0 .. 18446744073709551615), got " + quote(s));
    return out;
  }

  /// A positive duration with a unit.
  Duration duration(const Value& v) const {
    static const std::string kLike = "expected a duration like \"2s\" or \"500ms\"";
    if (!v.node.IsScalar()) fail(v, kLike + ", got " + describe(v.node));
    const std::string& s = v.node.Scalar();
    std::string why;
    auto d = parse_duration(s, &why);
    if (!d) {
      if (why == "no unit")
        fail(v, kLike + ", got " + quote(s) + " (no unit; units: ns, us, ms, s, m)");
      if (why == "negative") fail(v, "expected a positive duration, got " + quote(s));
      if (why == "too large") fail(v, "duration " + quote(s) + " is too large");
      if (why == "finer than a nanosecond") fail(v, "duration " + quote(s) + " is finer than a nanosecond");
      fail(v, kLike + ", got " + quote(s));
    }
    if (d->count() == 0) fail(v, "expected a positive duration, got " + quote(s));
    return *d;
  }

  double percentage(const Value& v) const {
    static const std::string kLike = "expected a percentage like \"10%\"";
    if (!v.node.IsScalar()) fail(v, kLike + ", got " + describe(v.node));
    const std::string& s = v.node.Scalar();
    if (s.size() < 2 || s.back() != '%') fail(v, kLike + ", got " + quote(s));
    std::string_view num(s.data(), s.size() - 1);
    if (!looks_numeric(num) || num.front() == '+') fail(v, kLike + ", got " + quote(s));
    double pct = 0;
    if (auto [ptr, ec] = std::from_chars(num.data(), num.data() + num.size(), pct);
        ec != std::errc() || ptr != num.data() + num.size())
      fail(v, kLike + ", got " + quote(s));  // locale-independent, unlike stod
    if (!(pct > 0.0) || pct > 100.0) fail(v, "expected a percentage above 0% and at most 100%, got " + quote(s));
    return pct / 100.0;
  }

  template <typename E, std::size_t N>
  E choice(const Value& v, const std::array<Row<E>, N>& table, std::string_view what) const {
    std::string s = string(v);
    std::vector<std::string_view> ok = implemented_names(table);
    for (const auto& r : table) {
      if (r.name != s) continue;
      if (!r.implemented)
        fail(v, std::string(what) + " " + quote(s) + " is not implemented yet; use one of: " + join(ok));
      return r.value;
    }
    fail(v, "unknown " + std::string(what) + " " + quote(s) + "; expected one of: " + join(ok));
  }

  std::vector<Value> list(const Value& v, bool allow_empty) const {
    if (!v.node.IsSequence()) fail(v, "expected a list, got " + describe(v.node));
    if (!allow_empty && v.node.size() == 0) fail(v, "expected a non-empty list");
    std::vector<Value> out;
    std::size_t i = 0;
    for (const auto& item : v.node) {
      YAML::Mark m = item.IsNull() ? v.mark : item.Mark();
      out.push_back(Value{item, m, v.path + "[" + std::to_string(i++) + "]"});
    }
    return out;
  }

  // ---- the scenario

  Scenario parse(const YAML::Node& root) {
    Scenario s;
    s.source_ = file_;
    Value top{root, root.Mark(), ""};
    if (root.IsNull()) fail(top, "the scenario is empty: expected a mapping with at least name, lease_ttl, resource, job, workers and expect");
    Map m(*this, top,
          {"name", "description", "seed", "lease_ttl", "timeout", "lock_service", "resource", "network", "job",
           "workers", "faults", "expect"});

    Value name = m.require("name");
    s.name_ = string(name);
    if (!is_safe_name(s.name_, 128))
      fail(name, "expected 1-128 characters of [A-Za-z0-9_.-], got " + quote(s.name_));
    s.name_line_ = position(name.mark).first;
    s.name_column_ = position(name.mark).second;

    if (auto v = m.get("description")) s.description_ = string(*v);
    if (auto v = m.get("seed")) s.seed_ = unsigned64(*v);

    Value ttl = m.require("lease_ttl");
    Duration ttl_d = duration(ttl);
    if (ttl_d.count() % 1'000'000'000 != 0)
      fail(ttl, "etcd leases are whole seconds: expected a whole number of seconds like \"2s\", got " +
                    quote(ttl.node.Scalar()));
    s.lease_ttl_ = std::chrono::duration_cast<std::chrono::seconds>(ttl_d);

    if (auto v = m.get("timeout")) s.timeout_ = duration(*v);
    const std::string timeout_text = format_duration(s.timeout_);

    // lock_service
    if (auto v = m.get("lock_service")) {
      Map ls(*this, *v, {"kind", "endpoints", "lock"});
      s.lock_service_.kind = choice(ls.require("kind"), kLockServiceKinds, "lock service kind");
      if (auto e = ls.get("endpoints")) {
        for (const Value& item : list(*e, false)) {
          std::string url = string(item);
          if (!valid_endpoint(url))
            fail(item, "expected an endpoint URL like \"http://127.0.0.1:2379\", got " + quote(url));
          s.lock_service_.endpoints.push_back(url);
        }
      }
      if (auto l = ls.get("lock")) {
        std::string lock = string(*l);
        if (!valid_lock_name(lock))
          fail(*l, "expected a lock name of 1-256 characters of [A-Za-z0-9_.-/], got " + quote(lock));
        s.lock_service_.lock = lock;
      }
    }
    if (s.lock_service_.lock.empty()) s.lock_service_.lock = "fencecheck/" + s.name_;

    // resource
    {
      Map r(*this, m.require("resource"), {"kind", "fencing"});
      s.resource_.kind = choice(r.require("kind"), kResourceKinds, "resource kind");
      if (auto f = r.get("fencing")) s.resource_.fencing = choice(*f, kFencingModes, "fencing mode");
    }

    if (auto v = m.get("network")) s.network_ = choice(*v, kNetworkModes, "network mode");

    // job
    {
      Map j(*this, m.require("job"), {"key", "segments", "chunks", "chunk_bytes", "chunk_interval"});
      Value key = j.require("key");
      s.job_.key = string(key);
      if (!is_safe_name(s.job_.key, 256))
        fail(key, "expected a resource key of 1-256 characters of [A-Za-z0-9_.-], got " + quote(s.job_.key));
      if (auto v = j.get("segments")) s.job_.segments = integer(*v, 1, 1'000'000);
      if (auto v = j.get("chunks")) s.job_.chunks = integer(*v, 1, 1'000'000);
      if (auto v = j.get("chunk_bytes")) s.job_.chunk_bytes = integer(*v, 1, 1 << 20);
      if (auto v = j.get("chunk_interval")) s.job_.chunk_interval = duration(*v);
    }

    // workers: ids first (so start_after may name a later worker), then references.
    std::vector<Value> worker_values = list(m.require("workers"), false);
    std::vector<Map> worker_maps;
    worker_maps.reserve(worker_values.size());
    std::map<std::string, std::size_t> worker_index;
    for (const Value& wv : worker_values) {
      worker_maps.emplace_back(*this, wv, std::vector<std::string_view>{"id", "start_after", "start_delay"});
      Value id = worker_maps.back().require("id");
      WorkerSpec w;
      w.id = string(id);
      if (!is_safe_name(w.id, 64))
        fail(id, "a worker id must be 1-64 characters of [A-Za-z0-9_.-], got " + quote(w.id));
      if (w.id == "harness" || w.id == "lock" || w.id == "resource")
        fail(id, "worker id " + quote(w.id) + " is reserved for the harness's own event sources (harness, lock, resource)");
      if (worker_index.count(w.id)) fail(id, "duplicate worker id " + quote(w.id));
      worker_index.emplace(w.id, s.workers_.size());
      s.workers_.push_back(std::move(w));
    }
    auto worker_list = [&] {
      std::vector<std::string_view> ids;
      for (const auto& w : s.workers_) ids.push_back(w.id);
      return join(ids);
    };
    auto known_worker = [&](const Value& v) {
      std::string id = string(v);
      if (!worker_index.count(id))
        fail(v, "unknown worker " + quote(id) + "; workers are: " + worker_list());
      return id;
    };
    std::vector<std::optional<Value>> start_after_values(s.workers_.size());
    for (std::size_t i = 0; i < s.workers_.size(); ++i) {
      const Map& wm = worker_maps[i];
      WorkerSpec& w = s.workers_[i];
      auto after = wm.get("start_after");
      auto delay = wm.get("start_delay");
      if (after && delay)
        fail(delay->mark, wm.self().path, "give either start_after or start_delay, not both");
      if (after) {
        w.start_after = std::get<EventTrigger>(event_trigger(*after, known_worker, /*allow_at=*/false).first);
        start_after_values[i] = after;
      }
      if (delay) {
        w.start_delay = duration(*delay);
        if (*w.start_delay >= s.timeout_)
          fail(*delay, "starts at " + format_duration(*w.start_delay) + ", not before the run timeout " + timeout_text);
      }
    }
    // start_after must not form a cycle: a worker waiting (transitively) on itself never starts.
    for (std::size_t i = 0; i < s.workers_.size(); ++i) {
      std::vector<std::string> chain{s.workers_[i].id};
      std::size_t cur = i;
      while (s.workers_[cur].start_after) {
        cur = worker_index.at(s.workers_[cur].start_after->worker);
        chain.push_back(s.workers_[cur].id);
        if (cur == i) {
          std::string path;
          for (std::size_t k = 0; k < chain.size(); ++k) path += (k ? " -> " : "") + chain[k];
          fail(*start_after_values[i], "start_after forms a cycle (" + path + "): no worker in it would ever start");
        }
        if (chain.size() > s.workers_.size() + 1) break;  // a cycle not through i; found from its own members
      }
    }

    // faults
    if (auto fv = m.get("faults")) {
      for (const Value& item : list(*fv, true)) {
        Map f(*this, item, {"kind", "target", "trigger", "duration"});
        FaultSpec spec;
        spec.kind = choice(f.require("kind"), kFaultKinds, "fault kind");
        spec.target = known_worker(f.require("target"));
        auto [trigger, trigger_value] = event_trigger(f.require("trigger"), known_worker, /*allow_at=*/true);
        spec.trigger = trigger;
        Value dur = f.require("duration");
        spec.duration = duration(dur);
        if (const auto* at = std::get_if<TimeTrigger>(&spec.trigger)) {
          if (at->at >= s.timeout_)
            fail(trigger_value, "fires at " + format_duration(at->at) + ", not before the run timeout " + timeout_text);
          if (at->at + spec.duration > s.timeout_)
            fail(dur, "the fault window " + format_duration(at->at) + " + " + format_duration(spec.duration) +
                          " ends at " + format_duration(at->at + spec.duration) + ", past the run timeout " +
                          timeout_text);
        } else if (spec.duration >= s.timeout_) {
          fail(dur, "the fault lasts " + format_duration(spec.duration) + ", which ends past the run timeout " +
                        timeout_text);
        }
        s.faults_.push_back(std::move(spec));
      }
    }

    // expect
    {
      Map e(*this, m.require("expect"),
            {"outcome", "anomalies", "min_rejected_writes", "min_expiries_during_work", "pause_tolerance"});
      s.expect_.outcome = choice(e.require("outcome"), kOutcomes, "outcome");
      if (auto a = e.get("anomalies")) {
        if (s.expect_.outcome == Outcome::kSafe)
          fail(*a, "anomalies can only be listed with outcome: anomaly (outcome is safe)");
        std::vector<std::string_view> known(known_anomalies().begin(), known_anomalies().end());
        for (const Value& item : list(*a, false)) {
          std::string name_s = string(item);
          if (!is_known_anomaly(name_s))
            fail(item, "unknown anomaly " + quote(name_s) + "; known anomalies: " + join(known));
          if (std::find(s.expect_.anomalies.begin(), s.expect_.anomalies.end(), name_s) != s.expect_.anomalies.end())
            fail(item, "anomaly " + quote(name_s) + " is listed twice");
          s.expect_.anomalies.push_back(name_s);
        }
      } else if (s.expect_.outcome == Outcome::kAnomaly) {
        fail(e.self().mark, e.self().path,
             "outcome anomaly needs \"anomalies\": the list of anomalies the run must show");
      }
      if (auto v = e.get("min_rejected_writes"))
        s.expect_.min_rejected_writes = integer(*v, 0, std::numeric_limits<std::int64_t>::max());
      if (auto v = e.get("min_expiries_during_work"))
        s.expect_.min_expiries_during_work = integer(*v, 0, std::numeric_limits<std::int64_t>::max());
      if (auto v = e.get("pause_tolerance")) {
        s.expect_.pause_tolerance = percentage(*v);
        bool any_sigstop = std::any_of(s.faults_.begin(), s.faults_.end(),
                                       [](const FaultSpec& f) { return f.kind == FaultKind::kSigstop; });
        if (!any_sigstop) fail(*v, "pause_tolerance needs at least one sigstop fault to compare pauses with");
      }
    }
    return s;
  }

 private:
  static bool valid_endpoint(const std::string& url) {
    std::string_view rest(url);
    if (rest.substr(0, 7) == "http://") rest.remove_prefix(7);
    else if (rest.substr(0, 8) == "https://") rest.remove_prefix(8);
    else return false;
    if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
    auto colon = rest.rfind(':');
    if (colon == std::string_view::npos || colon == 0) return false;
    std::string_view host = rest.substr(0, colon), port = rest.substr(colon + 1);
    if (!all_digits(port) || port.size() > 5) return false;
    int p = std::stoi(std::string(port));
    if (p < 1 || p > 65535) return false;
    return std::none_of(host.begin(), host.end(), [](char c) { return c == '/' || c == ' ' || c == '@'; });
  }

  static bool valid_lock_name(const std::string& s) {
    if (s.empty() || s.size() > 256) return false;
    return std::all_of(s.begin(), s.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
             c == '-' || c == '/';
    });
  }

  /// {worker, event, count} (or, for faults, {at}). Returns the trigger and the value it came from.
  template <typename KnownWorker>
  std::pair<FaultTrigger, Value> event_trigger(const Value& v, KnownWorker&& known_worker, bool allow_at) const {
    std::vector<std::string_view> keys{"worker", "event", "count"};
    if (allow_at) keys.push_back("at");
    Map t(*this, v, keys);
    if (allow_at && t.has("at")) {
      if (t.has("worker") || t.has("event") || t.has("count"))
        fail(t.get("at")->mark, v.path, "give either worker + event (+ count) or at, not both");
      Value at = *t.get("at");
      return {TimeTrigger{duration(at)}, at};
    }
    if (allow_at && !t.has("worker") && !t.has("event"))
      fail(v, "expected either worker + event (+ count), or at");
    EventTrigger e;
    e.worker = known_worker(t.require("worker"));
    Value ev = t.require("event");
    std::string name = string(ev);
    auto kind = kind_from_name(name);
    if (!kind) fail(ev, "unknown event kind " + quote(name) + "; " + worker_event_list());
    if (!is_worker_event(*kind))
      fail(ev, "event " + quote(name) + " is not one a worker emits; " + worker_event_list());
    e.event = *kind;
    if (auto c = t.get("count")) e.count = integer(*c, 1, std::numeric_limits<std::int64_t>::max());
    return {e, v};
  }

  static std::string worker_event_list() {
    std::vector<std::string_view> names;
    for (int k = 0; k <= static_cast<int>(EventKind::kLog); ++k)
      if (is_worker_event(static_cast<EventKind>(k))) names.push_back(kind_name(static_cast<EventKind>(k)));
    return "worker events are: " + join(names);
  }

  std::string file_;
};

Scenario parse_text(std::string_view yaml, const std::string& file) {
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(std::string(yaml));
  } catch (const YAML::ParserException& e) {
    auto [line, col] = position(e.mark);
    throw ScenarioError(file, line, col, "YAML syntax error: " + e.msg);
  } catch (const YAML::Exception& e) {
    auto [line, col] = position(e.mark);
    throw ScenarioError(file, line, col, "YAML error: " + e.msg);
  }
  if (docs.size() > 1) {
    auto [line, col] = position(docs[1].Mark());
    throw ScenarioError(file, line, col, "a scenario file holds one YAML document, found " + std::to_string(docs.size()));
  }
  ScenarioParser p(file);
  return p.parse(docs.empty() ? YAML::Node() : docs.front());
}

}  // namespace detail

Scenario parse_scenario(std::string_view yaml, std::string_view file_label) {
  return detail::parse_text(yaml, std::string(file_label));
}

Scenario load_scenario(const std::filesystem::path& path) {
  const std::string file = path.string();
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw ScenarioError(file, 0, 0, "is a directory, expected a scenario file (use a suite to load a directory)");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ScenarioError(file, 0, 0, "cannot read the scenario file: " + std::generic_category().message(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw ScenarioError(file, 0, 0, "cannot read the scenario file");
  return detail::parse_text(text.str(), file);
}

std::vector<Scenario> load_suite(const std::filesystem::path& path) {
  std::error_code ec;
  std::vector<std::filesystem::path> files;
  if (std::filesystem::is_directory(path, ec)) {
    for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
      auto ext = entry.path().extension().string();
      if ((ext == ".yaml" || ext == ".yml") && entry.is_regular_file(ec)) files.push_back(entry.path());
    }
    if (ec) throw ScenarioError(path.string(), 0, 0, "cannot list the suite directory: " + ec.message());
    std::sort(files.begin(), files.end(),
              [](const auto& a, const auto& b) { return a.filename().string() < b.filename().string(); });
    if (files.empty()) throw ScenarioError(path.string(), 0, 0, "the suite directory holds no *.yaml or *.yml file");
  } else if (std::filesystem::exists(path, ec)) {
    files.push_back(path);
  } else {
    throw ScenarioError(path.string(), 0, 0, "no such scenario file or suite directory");
  }
  std::vector<Scenario> out;
  for (const auto& f : files) {
    Scenario s = load_scenario(f);
    for (const auto& prev : out)
      if (prev.name() == s.name())
        throw ScenarioError(s.source(), s.name_line_, s.name_column_,
                            "name: scenario " + quote(s.name()) + " is already defined in " + prev.source());
    out.push_back(std::move(s));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// JSON

namespace {

nlohmann::json trigger_json(const EventTrigger& t) {
  return {{"worker", t.worker}, {"event", std::string(kind_name(t.event))}, {"count", t.count}};
}

std::string percent_text(double fraction) {
  std::ostringstream o;
  o << fraction * 100.0 << "%";
  return o.str();
}

}  // namespace

nlohmann::json to_json(const Scenario& s) {
  nlohmann::json j;
  j["name"] = s.name();
  j["description"] = s.description();
  j["source"] = s.source();
  j["seed"] = s.seed();
  j["lease_ttl"] = format_duration(s.lease_ttl());
  j["timeout"] = format_duration(s.timeout());
  j["lock_service"] = {{"kind", std::string(to_string(s.lock_service().kind))},
                       {"endpoints", s.lock_service().endpoints},
                       {"lock", s.lock_service().lock}};
  j["resource"] = {{"kind", std::string(to_string(s.resource().kind))},
                   {"fencing", std::string(to_string(s.resource().fencing))}};
  j["network"] = std::string(to_string(s.network()));
  j["job"] = {{"key", s.job().key},
              {"segments", s.job().segments},
              {"chunks", s.job().chunks},
              {"chunk_bytes", s.job().chunk_bytes},
              {"chunk_interval", format_duration(s.job().chunk_interval)}};
  auto& workers = j["workers"] = nlohmann::json::array();
  for (const auto& w : s.workers()) {
    nlohmann::json wj{{"id", w.id}};
    if (w.start_after) wj["start_after"] = trigger_json(*w.start_after);
    if (w.start_delay) wj["start_delay"] = format_duration(*w.start_delay);
    workers.push_back(std::move(wj));
  }
  auto& faults = j["faults"] = nlohmann::json::array();
  for (const auto& f : s.faults()) {
    nlohmann::json fj{{"kind", std::string(to_string(f.kind))}, {"target", f.target},
                      {"duration", format_duration(f.duration)}};
    if (const auto* e = std::get_if<EventTrigger>(&f.trigger)) fj["trigger"] = trigger_json(*e);
    else fj["trigger"] = {{"at", format_duration(std::get<TimeTrigger>(f.trigger).at)}};
    faults.push_back(std::move(fj));
  }
  nlohmann::json ej{{"outcome", std::string(to_string(s.expect().outcome))}, {"anomalies", s.expect().anomalies}};
  if (s.expect().min_rejected_writes) ej["min_rejected_writes"] = *s.expect().min_rejected_writes;
  if (s.expect().min_expiries_during_work) ej["min_expiries_during_work"] = *s.expect().min_expiries_during_work;
  if (s.expect().pause_tolerance) ej["pause_tolerance"] = percent_text(*s.expect().pause_tolerance);
  j["expect"] = std::move(ej);
  return j;
}

}  // namespace fencecheck::harness
