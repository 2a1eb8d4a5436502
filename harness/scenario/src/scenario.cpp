#include "fencecheck/harness/scenario.h"
#include "fencecheck/process/child_process.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <cerrno>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <system_error>
#include <utility>

#include <unistd.h>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "fencecheck/faults/fault_kind.h"
#include "fencecheck/harness/worker_command.h"
#include "fencecheck/harness/yaml_documents.h"
#include "fencecheck/locks/lock_service_kind.h"
#include "fencecheck/proto/chunk.h"
#include "fencecheck/resources/resource_kind.h"

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

constexpr std::array<Row<NetworkMode>, 2> kNetworkModes{{
    {NetworkMode::kHost, "host", true},
    {NetworkMode::kNamespaces, "namespaces", true},
}};
constexpr std::array<Row<Outcome>, 2> kOutcomes{{{Outcome::kSafe, "safe", true}, {Outcome::kAnomaly, "anomaly", true}}};
constexpr std::array<Row<JobKind>, 3> kJobKinds{{
    {JobKind::kSegments, "segments", true},
    {JobKind::kCounter, "counter", true},
    {JobKind::kSideEffect, "side-effect", true},
}};
constexpr std::array<Row<EffectMode>, 3> kEffectModes{{
    {EffectMode::kFenced, "fenced", true},
    {EffectMode::kUnfenced, "unfenced", true},
    {EffectMode::kIdempotent, "idempotent", true},
}};
// "etcd": the name of "issuer" before the lock-service axis, still accepted (to_string says "issuer").
constexpr std::array<Row<TokenSource>, 3> kTokenSources{{
    {TokenSource::kIssuer, "issuer", true},
    {TokenSource::kIssuer, "etcd", true},
    {TokenSource::kTimestamp, "timestamp", true},
}};
constexpr std::array<Row<SelfStopAt>, 2> kSelfStopPoints{{
    {SelfStopAt::kCheck, "check", true},
    {SelfStopAt::kEffect, "effect", true},
}};
constexpr std::array<Row<KeepaliveMode>, 2> kKeepaliveModes{{
    {KeepaliveMode::kThread, "thread", true}, {KeepaliveMode::kInline, "inline", true}}};
constexpr std::array<Row<PayloadMode>, 2> kPayloadModes{{
    {PayloadMode::kSelfDescribing, "self-describing", true}, {PayloadMode::kOpaque, "opaque", true}}};
constexpr std::array<Row<ScheduleTarget>, 2> kScheduleTargets{{
    {ScheduleTarget::kHolders, "holders", true},
    {ScheduleTarget::kWorkers, "workers", true},
}};

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

std::string ResourceSpec::fencing() const {
  auto it = config.find("fencing");
  return it != config.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string_view to_string(NetworkMode m) { return name_in(kNetworkModes, m); }
std::string_view to_string(Outcome o) { return name_in(kOutcomes, o); }
std::string_view to_string(JobKind k) { return name_in(kJobKinds, k); }
std::string_view to_string(EffectMode m) { return name_in(kEffectModes, m); }
std::string_view to_string(TokenSource t) { return name_in(kTokenSources, t); }
std::string_view to_string(SelfStopAt p) { return p == SelfStopAt::kNever ? "never" : name_in(kSelfStopPoints, p); }
std::string_view to_string(KeepaliveMode m) { return name_in(kKeepaliveModes, m); }
std::string_view to_string(PayloadMode m) { return name_in(kPayloadModes, m); }
std::string_view to_string(ScheduleTarget t) { return name_in(kScheduleTargets, t); }

std::vector<std::string_view> known_fault_kinds() { return faults::fault_kind_names(); }
std::vector<std::string_view> known_job_kinds() { return implemented_names(kJobKinds); }

bool targets_worker(std::string_view kind) {
  const faults::FaultKind* k = faults::find_fault_kind(kind);
  return k != nullptr && k->target() == faults::FaultTarget::kWorker;
}
bool is_member_host(std::string_view id) {
  const std::string prefix = std::string(kLockServiceTarget) + "-";
  if (id.size() <= prefix.size() || id.substr(0, prefix.size()) != prefix) return false;
  return std::all_of(id.begin() + static_cast<std::ptrdiff_t>(prefix.size()), id.end(), [](char c) { return c >= '0' && c <= '9'; });
}
bool needs_network_namespaces(std::string_view kind) {
  const faults::FaultKind* k = faults::find_fault_kind(kind);
  return k != nullptr && k->needs_network_namespaces();
}
bool stops_process(std::string_view kind) {
  const faults::FaultKind* k = faults::find_fault_kind(kind);
  return k != nullptr && k->stops_process();
}

const std::vector<std::string>& known_anomalies() {
  static const std::vector<std::string> names{
      "interleaved-segment", "stale-write-accepted", "duplicate-effect",   "counter-drift",
      "foreign-release",     "token-regression",     "fenced-out",         "rejection-storm",
      "cross-key-rejection", "lost-acknowledged-write", "corrupt-chunk",
      "unaccounted-write",
      "unjustified-rejection",
      "ungranted-holding",
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
    case EventKind::kJobGaveUp:
      return true;
    default:
      return false;
  }
}

bool is_lock_service_trigger_event(EventKind kind) {
  return kind == EventKind::kLockGrant || kind == EventKind::kLockDelete;
}

// ---------------------------------------------------------------------------------------------
// Durations: fencecheck/proto/units.h

namespace {

/// fencecheck-worker's pause-detector tick (its --tick-ms default, which the harness never changes).
constexpr Duration kWorkerTick = std::chrono::milliseconds(5);

}  // namespace

// ---------------------------------------------------------------------------------------------
// The parser

int Scenario::issuer_of(const WorkerSpec& worker) const {
  if (worker.issuer) return *worker.issuer - 1;
  const int n = std::max(1, lock_service_.issuers);
  for (std::size_t i = 0; i < workers_.size(); ++i)
    if (&workers_[i] == &worker || workers_[i].id == worker.id) return static_cast<int>(i % static_cast<std::size_t>(n));
  return 0;
}

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
  explicit ScenarioParser(std::string file, std::string_view text = {}) : file_(std::move(file)), text_(text) {}

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
    /// The field even when its value is null (present but empty), or nullopt when absent.
    [[nodiscard]] std::optional<Value> raw(std::string_view key) const {
      auto it = fields_.find(std::string(key));
      if (it == fields_.end()) return std::nullopt;
      return it->second;
    }
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
        fail(v, kLike + ", got " + quote(s) + " (no unit; units: ns, us, ms, s, m, h)");
      if (why == "negative") fail(v, "expected a positive duration, got " + quote(s));
      if (why == "too large") fail(v, "duration " + quote(s) + " is too large");
      if (why == "finer than a nanosecond") fail(v, "duration " + quote(s) + " is finer than a nanosecond");
      fail(v, kLike + ", got " + quote(s));
    }
    if (d->count() == 0) fail(v, "expected a positive duration, got " + quote(s));
    return *d;
  }

  /// The number of a percentage ("12.5%" -> 12.5): plain decimal, no sign, then '%'.
  double percent_number(const Value& v, const std::string& like) const {
    if (!v.node.IsScalar()) fail(v, like + ", got " + describe(v.node));
    const std::string& s = v.node.Scalar();
    if (s.size() < 2 || s.back() != '%') fail(v, like + ", got " + quote(s));
    std::string_view num(s.data(), s.size() - 1);
    if (!is_plain_decimal(num) || num.front() == '+' || num.front() == '-') fail(v, like + ", got " + quote(s));
    double pct = 0;
    if (auto [ptr, ec] = std::from_chars(num.data(), num.data() + num.size(), pct);
        ec != std::errc() || ptr != num.data() + num.size())
      fail(v, like + ", got " + quote(s));  // locale-independent, unlike stod
    return pct;
  }

  /// A percentage above 0% and at most 100%, as a fraction.
  double percentage(const Value& v) const {
    double pct = percent_number(v, "expected a percentage like \"10%\"");
    if (!(pct > 0.0) || pct > 100.0)
      fail(v, "expected a percentage above 0% and at most 100%, got " + quote(v.node.Scalar()));
    return pct / 100.0;
  }

  /// A percentage in [lo, hi] (both in percent, written as given in lo_text / hi_text), as a
  /// fraction; `example` shows the form in the message for a value that is not a percentage.
  double percentage_between(const Value& v, double lo, double hi, const std::string& lo_text,
                            const std::string& hi_text, const std::string& example) const {
    double pct = percent_number(v, "expected a percentage like \"" + example + "\"");
    if (!(pct >= lo) || pct > hi)
      fail(v, "expected a percentage between " + lo_text + " and " + hi_text + ", got " + quote(v.node.Scalar()));
    return pct / 100.0;
  }

  bool boolean(const Value& v) const {
    if (!v.node.IsScalar()) fail(v, "expected true or false, got " + describe(v.node));
    const std::string& s = v.node.Scalar();
    if (v.node.Tag() == "!") fail(v, "expected true or false, got the quoted string " + quote(s));
    if (s == "true") return true;
    if (s == "false") return false;
    fail(v, "expected true or false, got " + quote(s));
  }

  /// A duration that may be zero ("0ms"), never negative.
  Duration duration_or_zero(const Value& v) const {
    static const std::string kLike = "expected a duration like \"200ms\" or \"0ms\"";
    if (!v.node.IsScalar()) fail(v, kLike + ", got " + describe(v.node));
    const std::string& s = v.node.Scalar();
    std::string why;
    auto d = parse_duration(s, &why);
    if (!d) {
      if (why == "no unit") fail(v, kLike + ", got " + quote(s) + " (no unit; units: ns, us, ms, s, m, h)");
      if (why == "negative") fail(v, "expected a duration of 0 or more, got " + quote(s));
      if (why == "too large") fail(v, "duration " + quote(s) + " is too large");
      if (why == "finer than a nanosecond") fail(v, "duration " + quote(s) + " is finer than a nanosecond");
      fail(v, kLike + ", got " + quote(s));
    }
    return *d;
  }

  /// A signed, non-zero duration: "-30s", "+2m", "90s".
  Duration signed_duration(const Value& v) const {
    static const std::string kLike = "expected a signed duration like \"-30s\" or \"+2m\"";
    if (!v.node.IsScalar()) fail(v, kLike + ", got " + describe(v.node));
    const std::string& s = v.node.Scalar();
    std::string why;
    auto d = parse_signed_duration(s, &why);
    if (!d) {
      if (why == "no unit") fail(v, kLike + ", got " + quote(s) + " (no unit; units: ns, us, ms, s, m, h)");
      if (why == "too large") fail(v, "duration " + quote(s) + " is too large");
      if (why == "finer than a nanosecond") fail(v, "duration " + quote(s) + " is finer than a nanosecond");
      fail(v, kLike + ", got " + quote(s));
    }
    if (d->count() == 0) fail(v, "a clock offset of " + quote(s) + " changes nothing; give a non-zero offset or leave it out");
    return *d;
  }

  /// Fails unless d is a whole multiple of unit (named unit_name, e.g. "microsecond").
  void whole(const Value& v, Duration d, Duration unit, const std::string& unit_name, const std::string& why) const {
    if (d.count() % unit.count() != 0)
      fail(v, quote(v.node.Scalar()) + " is not a whole number of " + unit_name + "s (" + why + ")");
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

  /// One axis of kinds (resource, lock service) as a scenario block sees it: the fields the loader
  /// itself reads for every kind, and each registered kind's own fields.
  struct KindTable {
    std::string block;                 ///< "resource", "lock_service": where errors point
    std::string what;                  ///< "resource kind", "lock service kind"
    std::vector<std::string_view> shared;  ///< the loader's own fields, "kind" first
    std::vector<std::pair<std::string_view, std::vector<std::string_view>>> kinds;  ///< name, its fields
  };

  /// Reads a kind block's `kind` and checks every key of it: an unknown kind lists the known ones;
  /// a field of another kind names the kind it belongs to. Returns the kind's name and the keys it
  /// takes (the shared ones, then its own).
  std::pair<std::string, std::vector<std::string_view>> kind_of(const Value& v, const KindTable& t) const {
    std::vector<std::string_view> all = t.shared, names;
    for (const auto& [name, fields] : t.kinds) {
      names.push_back(name);
      for (auto f : fields)
        if (std::find(all.begin(), all.end(), f) == all.end()) all.push_back(f);
    }
    Value kind_value = Map(*this, v, all).require("kind");
    const std::string kind = string(kind_value);
    auto own = std::find_if(t.kinds.begin(), t.kinds.end(), [&](const auto& k) { return k.first == kind; });
    if (own == t.kinds.end()) fail(kind_value, "unknown " + t.what + " " + quote(kind) + "; expected one of: " + join(names));
    std::vector<std::string_view> allowed = t.shared;
    allowed.insert(allowed.end(), own->second.begin(), own->second.end());
    for (auto it = v.node.begin(); it != v.node.end(); ++it) {
      const YAML::Node k = it->first;
      const std::string& field = k.Scalar();
      if (std::find(allowed.begin(), allowed.end(), field) != allowed.end()) continue;
      for (const auto& [other, fields] : t.kinds)
        if (other != kind && std::find(fields.begin(), fields.end(), field) != fields.end())
          fail(k.Mark(), t.block, quote(field) + " is a field of " + t.what + " " + std::string(other) + ", not of kind " +
                                      kind + "; kind " + kind + " takes: " + join(allowed));
    }
    return {kind, allowed};
  }

  /// Where each field of a mapping is (1-based line, column), "" for the mapping itself.
  std::map<std::string, std::pair<int, int>> positions_of(const Value& v, const Map& m) const {
    std::map<std::string, std::pair<int, int>> out;
    out[""] = position(v.mark);
    for (auto it = v.node.begin(); it != v.node.end(); ++it) {
      const YAML::Node k = it->first;
      if (auto f = m.get(k.Scalar())) out[k.Scalar()] = position(f->mark);
    }
    return out;
  }

  /// Where byte `offset` of a scalar's value is in the file: through a block scalar's lines (| or
  /// >), after a quote, or straight on for a plain scalar. The value's own mark when the text is
  /// unknown.
  std::pair<int, int> locate(const Value& v, std::size_t offset) const {
    auto [line, col] = position(v.mark);
    if (text_.empty() || v.mark.pos < 0 || static_cast<std::size_t>(v.mark.pos) >= text_.size()) return {line, col};
    const char first = text_[static_cast<std::size_t>(v.mark.pos)];
    if (first == '"' || first == '\'') return {line, col + 1 + static_cast<int>(offset)};
    if (first != '|' && first != '>') return {line, col + static_cast<int>(offset)};
    // A block scalar: its content starts on the next line, at the first content line's indent.
    std::size_t p = text_.find('\n', static_cast<std::size_t>(v.mark.pos));
    if (p == std::string_view::npos) return {line, col};
    ++p;
    int l = line + 1;
    while (p < text_.size() && text_[p] == '\n') ++p, ++l;  // leading blank lines
    std::size_t indent = 0;
    while (p + indent < text_.size() && text_[p + indent] == ' ') ++indent;
    const std::string& value = v.node.Scalar();
    std::size_t value_line_start = 0;
    for (std::size_t i = 0; i < offset && i < value.size(); ++i)
      if (value[i] == '\n') ++l, value_line_start = i + 1;
    return {l, static_cast<int>(indent + (offset - std::min(offset, value_line_start))) + 1};
  }

  /// The loader's side of fencecheck::KindFields (proto/kind_fields.h): reads and fails through
  /// this parser, so a kind's errors carry file:line:col. Shared by the resource and lock-service axes.
  class Fields final : public fencecheck::KindFields {
   public:
    Fields(const ScenarioParser& p, const Map& m) : p_(p), m_(m) {}
    std::string file() const override { return p_.file_; }
    bool has(std::string_view name) const override { return m_.has(name); }
    std::string string(std::string_view name) const override { return p_.string(m_.require(name)); }
    std::vector<std::string> string_list(std::string_view name) const override {
      Value v = m_.require(name);
      if (v.node.IsScalar()) return {p_.string(v)};
      std::vector<std::string> out;
      for (const Value& item : p_.list(v, false)) out.push_back(p_.string(item));
      return out;
    }
    std::int64_t integer(std::string_view name, std::int64_t min, std::int64_t max) const override {
      return p_.integer(m_.require(name), min, max);
    }
    std::chrono::nanoseconds duration(std::string_view name) const override { return p_.duration(m_.require(name)); }
    bool boolean(std::string_view name) const override { return p_.boolean(m_.require(name)); }
    std::chrono::nanoseconds duration_or_zero(std::string_view name) const override {
      return p_.duration_or_zero(m_.require(name));
    }
    double percentage(std::string_view name, double lo_pct, double hi_pct, std::string_view example) const override {
      return p_.percentage_between(m_.require(name), lo_pct, hi_pct, format_percent(lo_pct / 100.0),
                                   format_percent(hi_pct / 100.0), std::string(example));
    }
    std::vector<std::pair<std::string, std::string>> env_map(std::string_view name) const override {
      return p_.env_map(m_.require(name));
    }
    std::filesystem::path base_dir() const override { return p_.scenario_dir(); }
    std::size_t choice(std::string_view name, const std::vector<std::string_view>& names,
                       std::string_view what) const override {
      Value v = m_.require(name);
      const std::string s = p_.string(v);
      for (std::size_t i = 0; i < names.size(); ++i)
        if (names[i] == s) return i;
      p_.fail(v, "unknown " + std::string(what) + " " + quote(s) + "; expected one of: " + join(names));
    }
    [[noreturn]] void fail(std::string_view name, const std::string& message,
                           std::optional<std::size_t> offset) const override {
      if (name.empty()) p_.fail(m_.self(), message);
      std::string field(name);
      // The location names the field already ("resource.write: "): a kind's message that starts
      // with the field's own name does not say it twice.
      for (const std::string& said : {field + ": ", field.substr(0, field.find('[')) + ": "})
        if (message.rfind(said, 0) == 0) fail(name, message.substr(said.size()), offset);
      std::optional<std::size_t> index;
      if (auto b = field.find('['); b != std::string::npos && field.back() == ']') {
        index = static_cast<std::size_t>(std::stoul(field.substr(b + 1)));
        field = field.substr(0, b);
      }
      auto got = m_.get(field);
      if (!got) p_.fail(m_.self(), message);
      Value v = *got;
      if (index && v.node.IsSequence()) {
        auto items = p_.list(v, true);
        if (*index < items.size()) v = items[*index];
      }
      if (!offset || !v.node.IsScalar()) p_.fail(v, message);
      auto [line, col] = p_.locate(v, *offset);
      throw ScenarioError(p_.file_, line, col, v.path + ": " + message);
    }

   private:
    const ScenarioParser& p_;
    const Map& m_;
  };

  // ---- the lock-service override (fencecheck run --lock-service KIND)

  Scenario with_lock_service_kind(const Scenario& in, const std::string& kind) const {
    const auto& ls = in.lock_service_;
    auto cannot = [&](const std::string& why) -> ScenarioError {
      return ScenarioError(in.source_, 0, 0, "--lock-service " + kind + " cannot apply to scenario " + in.name_ + ": " + why);
    };
    const locks::LockServiceKind* lk = locks::find_lock_service_kind(kind);
    if (!lk) {
      std::string known;
      for (auto n : locks::lock_service_kind_names()) known += (known.empty() ? "" : ", ") + std::string(n);
      throw cannot("unknown lock service kind " + quote(kind) + "; expected one of: " + known);
    }
    // Kind none on either side: its workers bring their own lock, and a scenario written for a
    // lock service fencecheck runs has workers (fencecheck-worker, etcdctl...) that need one.
    if (ls.kind == kNoLockService)
      throw cannot("it is of lock service kind none: its workers bring their own lock, which no other kind replaces");
    if (kind == kNoLockService)
      throw cannot("kind none runs no lock service, and this scenario's workers take their lock from one");
    if (!ls.endpoints.empty())
      throw cannot("it names lock_service.endpoints (the user's " + ls.kind + "); only a scenario on the embedded lock "
                   "service can run against another kind");
    if (const std::string problem = lk->reference_client_problem(); !problem.empty())
      for (const auto& w : in.workers_)
        if (!w.command) throw cannot("worker " + w.id + " is fencecheck-worker, and " + problem);
    std::vector<std::string_view> own;
    for (const auto& [field, where] : ls.positions)
      if (!field.empty() && field != "kind" && field != "endpoints" && field != "lock" && field != "prior_revisions" &&
          field != "run_suffix")
        own.emplace_back(field);
    if (!own.empty())
      throw cannot("it sets fields of lock service kind " + ls.kind + " (" + join(own) + ")");
    Scenario out = in;
    out.lock_service_.kind = kind;
    out.lock_service_.positions.clear();  // the fields were written for the scenario's own kind
    // The new kind's fields, every one at its default: its parse() of an empty mapping.
    YAML::Node empty(YAML::NodeType::Map);
    const Value v{empty, YAML::Mark::null_mark(), "lock_service"};
    const Map m(*this, v, lk->fields());
    try {
      out.lock_service_.config = lk->parse(Fields(*this, m));
    } catch (const ScenarioError& err) {
      throw cannot(err.message());
    }
    const std::string written = format_duration(in.lease_ttl_);
    if (std::string why = lk->check_lease_ttl(in.lease_ttl_, written); !why.empty()) throw cannot("lease_ttl: " + why);
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
           "workers", "faults", "schedule", "expect"});

    Value name = m.require("name");
    s.name_ = string(name);
    if (!is_safe_name(s.name_, 128))
      fail(name, "expected 1-128 characters of [A-Za-z0-9_.-], got " + quote(s.name_));
    s.name_line_ = position(name.mark).first;
    s.name_column_ = position(name.mark).second;

    if (auto v = m.get("description")) s.description_ = string(*v);
    if (auto v = m.get("seed")) s.seed_ = unsigned64(*v);

    // lease_ttl: checked once the lock service's kind is known (its own rule first: etcd's whole seconds).
    const Value ttl = m.require("lease_ttl");
    const Duration ttl_d = duration(ttl);

    if (auto v = m.get("timeout")) s.timeout_ = duration(*v);

    parse_lock_service(m, root, ttl, ttl_d, s);
    no_issuer_history_ = s.lock_service_.kind == kNoLockService;
    whole(ttl, ttl_d, std::chrono::milliseconds(1), "millisecond", "workers take the lease TTL in milliseconds");
    s.lease_ttl_ = std::chrono::duration_cast<std::chrono::milliseconds>(ttl_d);
    if (s.lock_service_.lock.empty()) s.lock_service_.lock = "fencecheck/" + s.name_;

    parse_resource(m, s);
    const NetworkValues net = parse_network(m, s);
    parse_job(m, s);
    const WorkerValues workers = parse_workers(m, s, net);
    if (payload_value_ && s.job_.payload == PayloadMode::kOpaque &&
        std::none_of(s.workers_.begin(), s.workers_.end(), [](const WorkerSpec& w) { return w.command.has_value(); }))
      fail(*payload_value_, "payload opaque says the workers write bytes of their own, and every worker of this "
                            "scenario is fencecheck-worker, which writes self-describing chunks: give a worker a "
                            "command (your program), or leave payload out");
    parse_faults(m, s, workers);
    parse_expect(m, s);
    return s;
  }

  // ---- the scenario's sections, in the order parse() reads them

  /// `lock_service`: the kind is a name on the lock-service axis; the loader reads the fields every
  /// kind shares, every other field is the kind's own. ttl: `lease_ttl`, checked by the kind.
  void parse_lock_service(const Map& m, const YAML::Node& root, const Value& ttl, Duration ttl_d, Scenario& s) const {
    KindTable table{"lock_service", "lock service kind", {"kind", "endpoints", "lock", "prior_revisions", "run_suffix", "issuers", "members", "client", "claim_ttl"}, {}};
    for (auto n : locks::lock_service_kind_names()) table.kinds.emplace_back(n, locks::find_lock_service_kind(n)->fields());
    // No lock_service: the embedded etcd, every field of it at its default.
    YAML::Node none(YAML::NodeType::Map);
    none["kind"] = "etcd";
    const std::optional<Value> given = m.get("lock_service");
    const Value lv = given ? *given : Value{none, root.Mark(), "lock_service"};
    if (!lv.node.IsMap()) fail(lv, "expected a mapping with kind and the kind's fields, got " + describe(lv.node));
    auto [kind, allowed] = kind_of(lv, table);
    const locks::LockServiceKind* lk = locks::find_lock_service_kind(kind);
    Map ls(*this, lv, allowed);
    auto& spec = s.lock_service_;
    spec.kind = kind;
    if (auto e = ls.get("endpoints")) {
      for (const Value& item : list(*e, true)) {  // [] is the same as no endpoints: embedded
        std::string endpoint = string(item);
        if (std::string why = lk->check_endpoint(endpoint); !why.empty()) fail(item, why);
        // network: namespaces relays each endpoint into the lab (docs/architecture.md, "Relays").
        if (std::string why; kind != kNoLockService && in_network_lab(m) && !lk->endpoint_address(endpoint, &why))
          fail(item, "network: namespaces relays each of the lock service's endpoints to the workers; " + why);
        spec.endpoints.push_back(endpoint);
      }
    }
    if (auto l = ls.get("lock")) {
      std::string lock = string(*l);
      if (!valid_lock_name(lock))
        fail(*l, "expected a lock name of 1-256 characters of [A-Za-z0-9_.-/], got " + quote(lock));
      spec.lock = lock;
    }
    if (auto r = ls.get("run_suffix")) spec.run_suffix = boolean(*r);
    if (auto p = ls.get("prior_revisions")) {
      spec.prior_revisions = integer(*p, 0, 100000);
      if (spec.prior_revisions > 0 && !spec.embedded())
        fail(*p, "prior_revisions advances the embedded " + kind + "'s revision counter; an external lock service "
                 "(lock_service.endpoints) has its own history");
    }
    if (kind == kNoLockService && spec.prior_revisions > 0)
      fail(*ls.get("prior_revisions"), "prior_revisions advances the revision counter of a lock service fencecheck "
                                       "runs; kind none runs none");
    if (auto n = ls.get("issuers")) {
      spec.issuers = static_cast<int>(integer(*n, 1, 4));
      if (spec.issuers > 1 && kind == kNoLockService)
        fail(*n, "issuers starts that many lock services side by side; kind none starts none");
      if (spec.issuers > 1 && !spec.embedded())
        fail(*n, "issuers starts that many embedded " + kind + " servers side by side; with lock_service.endpoints "
                 "the lock services are your own: give one scenario per issuer instead");
    }
    spec.members = kind == kNoLockService ? 1 : lk->default_members();
    if (auto n = ls.get("members")) {
      const int members = static_cast<int>(integer(*n, 1, 9));
      if (kind == kNoLockService) fail(*n, "members says how many members the lock service fencecheck runs has; kind none runs none");
      if (std::string why = lk->check_members(members); !why.empty()) fail(*n, why);
      if (members > 1 && !spec.embedded())
        fail(*n, "members starts an embedded cluster of that many members; with lock_service.endpoints the cluster "
                 "is your own (fencecheck talks to the endpoints you name)");
      if (members > 1 && spec.issuers > 1)
        fail(*n, "members and issuers cannot be combined: each issuer would be a cluster of its own");
      spec.members = members;
    }
    if (auto c = ls.get("client")) parse_client(*c, ls, *lk, spec, "fencecheck/" + s.name_);
    if (auto t = ls.get("claim_ttl")) {
      if (spec.embedded() || kind == kNoLockService)
        fail(*t, "claim_ttl is how long a killed harness's claim on a lock service of your own (lock_service.endpoints) "
                 "outlives it; the embedded " + kind + " is this run's alone and takes no claim");
      const Duration d = duration(*t);
      if (d % std::chrono::seconds(1) != Duration::zero() || d < std::chrono::seconds(2) || d > std::chrono::seconds(300))
        fail(*t, "expected a whole number of seconds from 2s to 300s (etcd grants leases in seconds; ZooKeeper's "
                 "smallest session is 2 ticks), got " + quote(t->node.Scalar()));
      spec.claim_ttl = std::chrono::duration_cast<std::chrono::seconds>(d);
    }
    if (given) spec.positions = positions_of(lv, ls);
    spec.config = lk->parse(Fields(*this, ls));
    if (std::string why = lk->check_lease_ttl(std::chrono::duration_cast<std::chrono::milliseconds>(ttl_d),
                                               ttl.node.Scalar());
        !why.empty())
      fail(ttl, why);
  }

  /// `lock_service.client`: a client library the kind knows the key layout of; the lock must fit
  /// it (python-etcd3 keeps lock N at /locks/N: the lock must be /locks/<name>).
  void parse_client(const Value& c, const Map& ls, const locks::LockServiceKind& lk, LockServiceSpec& spec,
                    const std::string& default_lock) const {
    const std::string client = string(c);
    const std::string lock = spec.lock.empty() ? default_lock : spec.lock;
    const auto clients = lk.clients();
    std::string names;
    for (const auto& l : clients) names += (names.empty() ? "" : ", ") + std::string(l.client);
    if (clients.empty()) fail(c, "lock service kind " + spec.kind + " knows no client layouts");
    const auto it = std::find_if(clients.begin(), clients.end(), [&](const auto& l) { return l.client == client; });
    if (it == clients.end()) fail(c, "unknown client " + quote(client) + " of lock service kind " + spec.kind + "; expected one of: " + names);
    if (!it->strip.empty() && lock.rfind(std::string(it->strip), 0) != 0) {
      const std::string why = client + " keeps the lock named N at the key " + std::string(it->keys) + ": name the lock " +
                              std::string(it->strip) + "<name> (the key the lock service sees), got " + quote(lock);
      if (auto l = ls.get("lock")) fail(*l, why);
      fail(c, why + " (the default lock name)");
    }
    if (lock.size() == it->strip.size() && !it->strip.empty())
      fail(c, client + " needs a name after " + std::string(it->strip) + ", got " + quote(lock));
    spec.client = client;
  }

  /// `resource`: the kind is a name on the resource axis; every other field is the kind's own.
  void parse_resource(const Map& m, Scenario& s) const {
    Value rv = m.require("resource");
    if (!rv.node.IsMap()) fail(rv, "expected a mapping with kind and the kind's fields, got " + describe(rv.node));
    KindTable table{"resource", "resource kind", {"kind"}, {}};
    for (auto n : resources::resource_kind_names()) table.kinds.emplace_back(n, resources::find_resource_kind(n)->fields());
    auto [kind, allowed] = kind_of(rv, table);
    const resources::ResourceKind* rk = resources::find_resource_kind(kind);
    Map r(*this, rv, allowed);
    s.resource_.kind = kind;
    s.resource_.positions = positions_of(rv, r);
    s.resource_.config = rk->parse(Fields(*this, r));
    // network: namespaces relays the user's resource into the lab (docs/architecture.md, "Relays").
    if (in_network_lab(m))
      if (auto problem = rk->relay_problem(s.resource_.config)) {
        const std::optional<Value> field = problem->first.empty() ? std::nullopt : r.get(problem->first);
        fail(field ? *field : rv, problem->second);
      }
  }

  /// True when the scenario asks for `network: namespaces` (either spelling); a wrong value is
  /// parse_network's to report. For the checks that need the mode before it is parsed.
  static bool in_network_lab(const Map& m) {
    const auto v = m.get("network");
    if (!v) return false;
    const YAML::Node mode = v->node.IsMap() ? v->node["mode"] : v->node;
    return mode && mode.IsScalar() && mode.Scalar() == "namespaces";
  }

  /// Where `network` and its subnet were written, and the subnet's prefix length (0 on the host
  /// network): the workers' count is checked against the subnet once they are known.
  struct NetworkValues {
    std::optional<Value> network, subnet;
    int prefix = 0;
  };

  /// `network`: "host", "namespaces", or {mode, subnet}.
  NetworkValues parse_network(const Map& m, Scenario& s) const {
    NetworkValues net;
    auto& network_value = net.network;
    auto& subnet_value = net.subnet;
    int& subnet_prefix = net.prefix;
    if (auto v = m.get("network")) {
      network_value = v;
      Value mode_value = *v;
      if (v->node.IsMap()) {
        Map n(*this, *v, {"mode", "subnet"});
        mode_value = n.require("mode");
        subnet_value = n.get("subnet");
      } else if (!v->node.IsScalar()) {
        fail(*v, "expected host, namespaces or a mapping {mode, subnet}, got " + describe(v->node));
      }
      s.network_.mode = choice(mode_value, kNetworkModes, "network mode");
      if (subnet_value && s.network_.mode != NetworkMode::kNamespaces)
        fail(*subnet_value, "subnet is only for network mode namespaces (mode is " +
                                std::string(to_string(s.network_.mode)) + ")");
    }
    if (s.network_.mode == NetworkMode::kNamespaces) {
      if (s.lock_service_.issuers > 1)
        fail(*network_value, "network: namespaces gives the lock service one address in the lab; lock_service.issuers: " +
                                 std::to_string(s.lock_service_.issuers) + " runs on the host network only");
      s.network_.subnet = subnet_value ? string(*subnet_value) : std::string(kDefaultSubnet);
      std::string why;
      auto cidr = parse_cidr(s.network_.subnet, &why);
      if (!cidr) fail(subnet_value ? *subnet_value : *network_value, why);
      subnet_prefix = cidr->second;
    }
    return net;
  }

  /// `job`: what each worker does while it holds the lock.
  /// With job.key_suffix a key gets "-<run id>" appended; the run id is "<UTC stamp, 16>-<scenario
  /// name>" and "-N" (N < 1000) when two runs start in one second (run_dir.cpp): the whole must
  /// stay a key of at most 256 characters.
  void check_suffixed_key(const Value& at, const std::string& key, const std::string& scenario) const {
    const std::size_t longest = key.size() + 1 + 16 + 1 + scenario.size() + 4;
    if (longest > 256)
      fail(at, "with job.key_suffix this key gets \"-<run id>\" appended, up to " + std::to_string(longest) +
                   " characters in all, over the 256 a key may have: shorten the key or the scenario's name");
  }

  void parse_job(const Map& m, Scenario& s) {
    Map j(*this, m.require("job"),
          {"kind", "key", "segments", "chunks", "chunk_bytes", "chunk_interval", "increments", "effect", "repeat",
           "payload", "key_suffix"});
    if (auto v = j.get("kind")) {
      s.job_.kind = choice(*v, kJobKinds, "job kind");
      if (s.job_.kind != JobKind::kSegments &&
          !resources::find_resource_kind(s.resource_.kind)->evidence(s.resource_.config).effects)
        fail(*v, "job kind " + std::string(to_string(s.job_.kind)) + " needs a resource with counters and side "
                 "effects (kind store); resource kind " + s.resource_.kind + " has only chunk writes (job kind segments)");
    }
    const std::string kind(to_string(s.job_.kind));
    auto only_for = [&](std::string_view field, bool allowed, const std::string& kinds) -> std::optional<Value> {
      auto v = j.get(field);
      if (v && !allowed)
        fail(*v, std::string(field) + " is only for " + kinds + " (this job is " + kind + ")");
      return v;
    };
    Value key = j.require("key");
    s.job_.key = string(key);
    if (!is_safe_name(s.job_.key, 256))
      fail(key, "expected a resource key of 1-256 characters of [A-Za-z0-9_.-], got " + quote(s.job_.key));
    if (auto v = j.get("key_suffix")) {
      s.job_.key_suffix = boolean(*v);
      if (s.job_.key_suffix) check_suffixed_key(key, s.job_.key, s.name_);
    }
    const bool chunked = s.job_.kind != JobKind::kCounter;
    const std::string chunk_kinds = "job kinds segments or side-effect";
    if (auto v = only_for("segments", chunked, chunk_kinds)) s.job_.segments = integer(*v, 1, 1'000'000);
    if (auto v = only_for("chunks", chunked, chunk_kinds)) s.job_.chunks = integer(*v, 1, 1'000'000);
    if (auto v = only_for("chunk_bytes", chunked, chunk_kinds)) s.job_.chunk_bytes = integer(*v, 1, 1 << 20);
    if ((payload_value_ = only_for("payload", chunked, chunk_kinds)))
      s.job_.payload = choice(*payload_value_, kPayloadModes, "payload mode");
    if (auto v = j.get("chunk_interval")) {
      s.job_.chunk_interval = duration(*v);
      // fencecheck-worker takes it in whole ms (--chunk-interval-ms): 250us would become 0.
      whole(*v, s.job_.chunk_interval, std::chrono::milliseconds(1), "millisecond",
            "the worker's chunk interval has millisecond resolution");
    }
    if (auto v = only_for("increments", s.job_.kind == JobKind::kCounter, "job kind counter"))
      s.job_.increments = integer(*v, 1, 1'000'000);
    if (auto v = only_for("effect", s.job_.kind == JobKind::kSideEffect, "job kind side-effect"))
      s.job_.effect = choice(*v, kEffectModes, "effect mode");
    // repeat: the schedule's duration is what ends a repeating job, and a schedule needs
    // workers that work for all of it.
    s.job_.repeat = m.has("schedule");
    if (auto v = j.get("repeat")) {
      s.job_.repeat = boolean(*v);
      if (s.job_.repeat && !m.has("schedule"))
        fail(*v, "repeat runs the job until the schedule's duration ends, and this scenario has no schedule "
                 "(add a schedule, or leave repeat out)");
      if (!s.job_.repeat && m.has("schedule"))
        fail(*v, "a schedule needs workers that work for its whole duration: repeat must be true (its default "
                 "with a schedule)");
    }
  }

  /// Each worker's `workers` mapping and where its design's self_stop_at was written: the faults
  /// and the schedule check against them.
  struct WorkerValues {
    std::vector<Map> maps;
    std::vector<std::optional<Value>> self_stops;
  };

  /// A worker id a trigger or a fault names, or the error at it listing the workers.
  std::string known_worker_of(const Value& v, const Scenario& s) const {
    std::string id = string(v);
    if (s.find_worker(id) == nullptr) {
      std::vector<std::string_view> ids;
      for (const auto& w : s.workers_) ids.push_back(w.id);
      std::string hint = id == kLockServiceTarget ? " (only lock-service-restart acts on the lock service)" : "";
      fail(v, "unknown worker " + quote(id) + hint + "; workers are: " + join(ids));
    }
    return id;
  }

  /// `workers`: ids first (so start_after may name a later worker), then references.
  WorkerValues parse_workers(const Map& m, Scenario& s, const NetworkValues& net) const {
    std::vector<Value> worker_values = list(m.require("workers"), false);
    WorkerValues out;
    std::vector<Map>& worker_maps = out.maps;
    worker_maps.reserve(worker_values.size());
    std::map<std::string, std::size_t> worker_index;
    for (const Value& wv : worker_values) {
      worker_maps.emplace_back(*this, wv, std::vector<std::string_view>{"id", "start_after", "start_delay", "key", "issuer", "design", "command", "env", "cwd", "user"});
      Value id = worker_maps.back().require("id");
      WorkerSpec w;
      w.id = string(id);
      if (!is_safe_name(w.id, 64))
        fail(id, "a worker id must be 1-64 characters of [A-Za-z0-9_.-], got " + quote(w.id));
      if (w.id == "harness" || w.id == "lock" || w.id == "resource")
        fail(id, "worker id " + quote(w.id) + " is reserved for the harness's own event sources (harness, lock, resource)");
      if (w.id == kLockServiceTarget)
        fail(id, "worker id " + quote(w.id) + " is reserved: it names the lock service as a fault target");
      if (is_member_host(w.id))
        fail(id, "worker id " + quote(w.id) + " is reserved: it names a lock-service member's host in the network lab");
      if (worker_index.count(w.id)) fail(id, "duplicate worker id " + quote(w.id));
      worker_index.emplace(w.id, s.workers_.size());
      s.workers_.push_back(std::move(w));
    }
    auto known_worker = [&](const Value& v) { return known_worker_of(v, s); };
    std::vector<std::optional<Value>> start_after_values(s.workers_.size());
    std::vector<std::optional<Value>>& self_stop_values = out.self_stops;
    self_stop_values.resize(s.workers_.size());
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
          fail(*delay, "starts at " + format_duration(*w.start_delay) + ", not before the run timeout " +
                          format_duration(s.timeout_));
      }
      if (auto key = wm.get("key")) {
        w.key = string(*key);
        if (!is_safe_name(*w.key, 256))
          fail(*key, "expected a resource key of 1-256 characters of [A-Za-z0-9_.-], got " + quote(*w.key));
        if (s.job_.key_suffix) check_suffixed_key(*key, *w.key, s.name_);
      }
      if (auto issuer = wm.get("issuer")) {
        if (s.lock_service_.issuers < 2)
          fail(*issuer, "issuer chooses among lock_service.issuers; this scenario has one lock service "
                        "(set lock_service.issuers: 2 or more)");
        w.issuer = static_cast<int>(integer(*issuer, 1, s.lock_service_.issuers));
      }
      if (auto design = wm.get("design")) self_stop_values[i] = parse_design(*design, w.design, s.lock_service_);
      parse_command(wm, w);
      if (!w.command && s.lock_service_.kind == kNoLockService)
        fail(wm.self(), "worker " + w.id + " is fencecheck-worker (no command), which takes its lock from a lock "
                        "service fencecheck runs; this scenario's lock service is kind none: give " + w.id +
                        " a command (a program that takes its own lock)");
      if (const auto* lk = locks::find_lock_service_kind(s.lock_service_.kind);
          !w.command && lk != nullptr && !lk->reference_client_problem().empty())
        fail(wm.self(), "worker " + w.id + " is fencecheck-worker (no command), and lock service kind " +
                        s.lock_service_.kind + " cannot be its lock: " + lk->reference_client_problem() + "; give " +
                        w.id + " a command");
    }
    // start_after must not form a cycle: a worker waiting (transitively) on itself never starts.
    for (std::size_t i = 0; i < s.workers_.size(); ++i) {
      std::vector<std::string> chain{s.workers_[i].id};
      std::size_t cur = i;
      while (s.workers_[cur].start_after && !s.workers_[cur].start_after->on_lock_service()) {
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
    const auto& [network_value, subnet_value, subnet_prefix] = net;
    if (s.network_.mode == NetworkMode::kNamespaces) {
      // faults/netns.h: the hub, the lock service, the resource, then one address per worker.
      const std::uint64_t usable = (std::uint64_t{1} << (32 - subnet_prefix)) - 2;
      // A cluster's members (lock_service.members > 1) each get a namespace and address of their own.
      const std::uint64_t members = s.lock_service_.members > 1 ? static_cast<std::uint64_t>(s.lock_service_.members) : 0;
      const std::uint64_t needed = 3 + s.workers_.size() + members;
      if (needed > usable)
        fail(subnet_value ? *subnet_value : *network_value,
             "subnet " + s.network_.subnet + " has " + std::to_string(usable) + " host addresses; the hub, 2 services" +
                 (members ? ", " + std::to_string(members) + " lock-service members" : std::string()) + " and " +
                 std::to_string(s.workers_.size()) + " worker(s) need " + std::to_string(needed));
    }
    return out;
  }

  /// `faults` and `schedule`, and the self-stopping workers they must continue.
  void parse_faults(const Map& m, Scenario& s, const WorkerValues& workers) const {
    auto known_worker = [&](const Value& v) { return known_worker_of(v, s); };
    const auto& worker_maps = workers.maps;
    const auto& self_stop_values = workers.self_stops;
    std::map<std::string, std::string> self_stopped;  // worker -> the path of its self-stop fault
    if (auto fv = m.get("faults"))
      for (const Value& item : list(*fv, true)) s.faults_.push_back(parse_fault(item, s, known_worker, self_stopped));
    if (auto sv = m.get("schedule")) {
      s.schedule_ = parse_schedule(*sv, s);
      // A repeating job numbers each holding's segments from its token (JobSpec::repeat): the
      // issuer's tokens, small and unique; a wall-clock token would overflow the numbering.
      for (std::size_t i = 0; i < s.workers_.size(); ++i)
        if (s.workers_[i].design.token_source == TokenSource::kTimestamp)
          fail(*worker_maps[i].get("design"), "token_source: timestamp cannot run a repeating job (a schedule's): "
                                               "each holding numbers its segments from its token, and a wall-clock "
                                               "token is too large for that; use the issuer's tokens here");
    }

    // A worker that stops itself needs someone to continue it, and a point it reaches.
    for (std::size_t i = 0; i < s.workers_.size(); ++i)
      if (s.workers_[i].design.self_stop_at == SelfStopAt::kEffect && s.job_.kind != JobKind::kSideEffect)
        fail(*self_stop_values[i], "self_stop_at: effect stops the worker before a side effect, so it needs "
                                   "job kind side-effect (the job is " + std::string(to_string(s.job_.kind)) + ")");
    for (std::size_t i = 0; i < s.workers_.size(); ++i)
      if (s.workers_[i].design.self_stop_at != SelfStopAt::kNever && !self_stopped.count(s.workers_[i].id))
        fail(*self_stop_values[i], s.workers_[i].id + " stops itself at " +
                                       std::string(to_string(s.workers_[i].design.self_stop_at)) +
                                       " but no self-stop fault continues it: add {kind: self-stop, target: " +
                                       s.workers_[i].id + ", duration: ...} to faults");
  }

  /// `expect`: what the run must show.
  void parse_expect(const Map& m, Scenario& s) const {
    Map e(*this, m.require("expect"),
          {"outcome", "anomalies", "min_rejected_writes", "min_expiries_during_work", "pause_tolerance",
           "progress_after_heal", "accept_unknown"});
    s.expect_.outcome = choice(e.require("outcome"), kOutcomes, "outcome");
    std::vector<Value> listed;
    if (auto a = e.get("anomalies")) {
      listed = list(*a, true);
      if (s.expect_.outcome == Outcome::kSafe && !listed.empty())
        fail(*a, "anomalies can only be listed with outcome: anomaly (outcome is safe)");
      if (s.expect_.outcome == Outcome::kAnomaly && listed.empty())
        fail(*a, "outcome anomaly needs at least one anomaly in the list");
      std::vector<std::string_view> known(known_anomalies().begin(), known_anomalies().end());
      for (const Value& item : listed) {
        std::string name_s = string(item);
        if (!is_known_anomaly(name_s))
          fail(item, "unknown anomaly " + quote(name_s) + "; known anomalies: " + join(known));
        if (std::find(s.expect_.anomalies.begin(), s.expect_.anomalies.end(), name_s) != s.expect_.anomalies.end())
          fail(item, "anomaly " + quote(name_s) + " is listed twice");
        // An expectation nothing can meet: the chunk-byte rule is not run on the system's own bytes.
        if (name_s == "corrupt-chunk" && s.job_.payload == PayloadMode::kOpaque)
          fail(item, "corrupt-chunk judges fencecheck's self-describing chunks, and this job's payload is opaque "
                     "(the bytes are the system's own): it is never run, so it can never be found");
        s.expect_.anomalies.push_back(name_s);
      }
    } else if (s.expect_.outcome == Outcome::kAnomaly) {
      fail(e.self().mark, e.self().path,
           "outcome anomaly needs \"anomalies\": the list of anomalies the run must show");
    }
    if (auto v = e.get("min_rejected_writes"))
      s.expect_.min_rejected_writes = integer(*v, 0, std::numeric_limits<std::int64_t>::max());
    if (auto v = e.get("min_expiries_during_work")) {
      s.expect_.min_expiries_during_work = integer(*v, 0, std::numeric_limits<std::int64_t>::max());
      // The figure counts the issuer's deletes (lock.delete): kind none has none to count, and
      // an expectation on a figure nobody measured could only be met or failed by a zero.
      if (s.lock_service_.kind == kNoLockService)
        fail(*v, "min_expiries_during_work counts the lock service's expiries; this scenario's lock service is kind "
                 "none, which has no issuer history to count them in");
    }
    if (auto v = e.get("pause_tolerance")) {
      s.expect_.pause_tolerance = percentage(*v);
      bool any = std::any_of(s.faults_.begin(), s.faults_.end(),
                             [](const FaultSpec& f) { return stops_process(f.kind) && !f.member; });
      if (!any)
        fail(*v, "pause_tolerance needs at least one fault that stops a worker (sigstop, freeze or self-stop) to "
                 "compare pauses with");
    }
    if (auto a = e.get("accept_unknown")) {
      if (s.expect_.outcome != Outcome::kSafe)
        fail(*a, "accept_unknown is for outcome: safe (an expected anomaly is found or not, whatever else is unknown)");
      std::vector<std::string_view> known(known_anomalies().begin(), known_anomalies().end());
      for (const Value& item : list(*a, true)) {
        std::string name_s = string(item);
        if (!is_known_anomaly(name_s)) fail(item, "unknown checker " + quote(name_s) + "; checkers: " + join(known));
        if (std::find(s.expect_.accept_unknown.begin(), s.expect_.accept_unknown.end(), name_s) !=
            s.expect_.accept_unknown.end())
          fail(item, "checker " + quote(name_s) + " is listed twice");
        s.expect_.accept_unknown.push_back(name_s);
      }
    }
    if (auto v = e.get("progress_after_heal")) {
      s.expect_.progress_after_heal = boolean(*v);
      if (s.expect_.progress_after_heal && s.faults_.empty() && !s.schedule_)
        fail(*v, "progress_after_heal needs at least one fault: it measures progress after the last heal");
    }
  }

 private:
  /// A duration range: {min, max}, or one duration for both. Whole milliseconds, min <= max.
  std::pair<Duration, Duration> duration_range(const Value& v) const {
    auto whole_ms = [&](const Value& x) {
      Duration d = duration(x);
      whole(x, d, std::chrono::milliseconds(1), "millisecond", "a schedule draws whole milliseconds");
      return d;
    };
    if (!v.node.IsMap()) {
      if (!v.node.IsScalar())
        fail(v, "expected a duration like \"3s\" or a range {min: 2s, max: 5s}, got " + describe(v.node));
      const Duration d = whole_ms(v);
      return {d, d};
    }
    Map r(*this, v, {"min", "max"});
    const Value lo = r.require("min");
    const Value hi = r.require("max");
    const Duration a = whole_ms(lo);
    const Duration b = whole_ms(hi);
    if (b < a) fail(hi, "max " + format_duration(b) + " is below min " + format_duration(a));
    return {a, b};
  }

  /// `schedule:` (docs/scenario-format.md, "schedule"). Needs timeout, network, lock_service.
  ScheduleSpec parse_schedule(const Value& v, const Scenario& s) const {
    Map m(*this, v, {"seed", "duration", "interval", "max_at_once", "faults"});
    ScheduleSpec spec;
    if (auto x = m.get("seed")) spec.seed = unsigned64(*x);
    const Value dur = m.require("duration");
    spec.duration = duration(dur);
    whole(dur, spec.duration, std::chrono::milliseconds(1), "millisecond", "a schedule counts whole milliseconds");
    if (spec.duration >= s.timeout_)
      fail(dur, "the schedule lasts " + format_duration(spec.duration) + ", not less than the run timeout " +
                    format_duration(s.timeout_) + ": the timeout bounds the whole run, so leave room after the "
                    "schedule for the last heals, stopping the workers and reading back (e.g. timeout: " +
                    format_duration(spec.duration + std::chrono::seconds(60)) + ")");
    std::tie(spec.min_interval, spec.max_interval) = duration_range(m.require("interval"));
    if (auto x = m.get("max_at_once")) spec.max_at_once = integer(*x, 1, 64);
    for (const Value& item : list(m.require("faults"), false)) {
      std::vector<std::string_view> keys;
      const faults::FaultKind& kind = fault_kind_of(item, {"kind", "weight", "duration", "target"}, s, &keys);
      Map f(*this, item, keys);
      ScheduleKind k;
      k.fault.kind = std::string(kind.name());
      if (kind.self_triggered())
        fail(f.require("kind"), k.fault.kind + " cannot be scheduled: a worker stops itself once, at its design's "
                                "self_stop_at; schedule sigstop instead");
      if (auto w = f.get("weight")) k.weight = integer(*w, 1, 1'000'000);
      const Value d = f.require("duration");
      std::tie(k.min_duration, k.max_duration) = duration_range(d);
      if (k.max_duration >= spec.duration)
        fail(d, "a fault of up to " + format_duration(k.max_duration) + " does not fit in the schedule's duration " +
                    format_duration(spec.duration));
      const std::optional<Value> target = f.get("target");
      if (target && target->node.IsMap()) {
        // Lock-service members (issue 35), resolved when the fault fires, as a `faults:` item's.
        k.fault.target = std::string(kLockServiceTarget);
        k.fault.member = member_target(*target, s);
      } else if (kind.target() == faults::FaultTarget::kWorker) {
        if (target) k.target = choice(*target, kScheduleTargets, "schedule target");
      } else {
        k.fault.target = std::string(kLockServiceTarget);
        if (target && string(*target) != kLockServiceTarget)
          fail(*target, k.fault.kind + " acts on the lock service: target must be \"" + std::string(kLockServiceTarget) +
                            "\" (or left out), got " + quote(string(*target)));
      }
      k.fault.params = kind.parse(Fields(*this, f));
      if (std::string why = kind.check_target(k.fault.params, k.fault.member.has_value()); !why.empty())
        fail(target ? *target : f.require("kind"), why);
      if (auto no = lock_service_refusal(k.fault, s.lock_service_)) fail(f.get(no->field).value_or(item), no->why);
      spec.faults.push_back(std::move(k));
    }
    return spec;
  }

  /// A `faults:` or `schedule.faults` item's kind, a name on the fault axis (fault_kind.h), with
  /// every key of the item checked: `shared` are the loader's own fields of such an item, the rest
  /// the kind's own (a field of another kind names it). Sets *keys to the keys the item may have,
  /// and checks what the kind needs of the plan (network namespaces, the embedded lock service).
  const faults::FaultKind& fault_kind_of(const Value& item, std::vector<std::string_view> shared, const Scenario& s,
                                        std::vector<std::string_view>* keys) const {
    KindTable table{item.path, "fault kind", std::move(shared), {}};
    for (auto n : faults::fault_kind_names()) table.kinds.emplace_back(n, faults::find_fault_kind(n)->fields());
    auto [name, allowed] = kind_of(item, table);
    *keys = allowed;
    const faults::FaultKind& kind = *faults::find_fault_kind(name);
    const Value kind_value = Map(*this, item, allowed).require("kind");
    if (kind.needs_network_namespaces() && s.network_.mode != NetworkMode::kNamespaces)
      fail(kind_value, name + " needs `network: namespaces` (this scenario's network is " +
                           std::string(to_string(s.network_.mode)) + ")");
    if (kind.target() == faults::FaultTarget::kLockService && s.lock_service_.kind == kNoLockService)
      fail(kind_value, name + " acts on the lock service fencecheck runs; this scenario's lock service is kind none "
                       "(the workers' own lock): there is none to act on");
    if (kind.target() == faults::FaultTarget::kLockService && !s.lock_service_.embedded())
      fail(kind_value, name + " needs the embedded lock service; the harness cannot act on the external one at "
                       "lock_service.endpoints");
    return kind;
  }

  /// One `faults:` item: the shared fields (kind, target, trigger, duration, within the run's
  /// timeout), then the kind's own through its parse(). self_stopped: worker -> the item that
  /// continues it (a worker stops itself once).
  template <typename KnownWorker>
  FaultSpec parse_fault(const Value& item, const Scenario& s, KnownWorker&& known_worker,
                        std::map<std::string, std::string>& self_stopped) const {
    std::vector<std::string_view> keys;
    const faults::FaultKind& kind = fault_kind_of(item, {"kind", "target", "trigger", "duration"}, s, &keys);
    Map f(*this, item, keys);
    FaultSpec spec;
    spec.kind = std::string(kind.name());
    Value target = f.require("target");
    if (target.node.IsMap()) {
      if (kind.self_triggered())
        fail(target, spec.kind + " is a worker stopping itself: its target is that worker, not lock-service members");
      spec.target = std::string(kLockServiceTarget);
      spec.member = member_target(target, s);
    } else if (kind.target() == faults::FaultTarget::kWorker) {
      spec.target = known_worker(target);
    } else {
      spec.target = string(target);
      if (spec.target != kLockServiceTarget)
        fail(target, spec.kind + " acts on the lock service: target must be \"" + std::string(kLockServiceTarget) +
                         "\", got " + quote(spec.target));
    }
    std::optional<Value> trigger_value;
    if (kind.self_triggered()) {
      const WorkerSpec& w = *s.find_worker(spec.target);
      if (w.design.self_stop_at == SelfStopAt::kNever)
        fail(target, spec.kind + " needs a worker that stops itself, but " + w.id + "'s design has no self_stop_at");
      if (auto it = self_stopped.find(w.id); it != self_stopped.end())
        fail(target, w.id + " already has a self-stop fault (" + it->second + "): it stops itself only once");
      self_stopped.emplace(w.id, item.path);
      if (auto t = f.get("trigger"))
        fail(*t, spec.kind + " has no trigger: " + spec.target + " stops itself at its design's self_stop_at (" +
                     std::string(to_string(w.design.self_stop_at)) + ") and the harness continues it `duration` later");
      spec.trigger = SelfTrigger{};
    } else {
      auto [trigger, value] = event_trigger(f.require("trigger"), known_worker, /*allow_at=*/true);
      spec.trigger = trigger;
      trigger_value = value;
    }
    // duration, within the run
    const std::string timeout_text = format_duration(s.timeout_);
    Value dur = f.require("duration");
    spec.duration = duration(dur);
    if (const auto* at = std::get_if<TimeTrigger>(&spec.trigger)) {
      if (at->at >= s.timeout_)
        fail(*trigger_value, "fires at " + format_duration(at->at) + ", not before the run timeout " + timeout_text);
      if (at->at + spec.duration > s.timeout_)
        fail(dur, "the fault window " + format_duration(at->at) + " + " + format_duration(spec.duration) + " ends at " +
                      format_duration(at->at + spec.duration) + ", past the run timeout " + timeout_text);
    } else if (spec.duration >= s.timeout_) {
      fail(dur, "the fault lasts " + format_duration(spec.duration) + ", which ends past the run timeout " + timeout_text);
    }
    spec.params = kind.parse(Fields(*this, f));
    if (std::string why = kind.check_target(spec.params, spec.member.has_value()); !why.empty()) fail(target, why);
    if (auto no = lock_service_refusal(spec, s.lock_service_)) fail(f.get(no->field).value_or(target), no->why);
    return spec;
  }

  /// A fault's `target: {lock_service: leader | follower | member: N | minority | majority}`
  /// (issue 35): a role the scenario's lock-service kind has, on an embedded cluster
  /// (lock_service.members > 1), N within 1..members.
  locks::MemberSelector member_target(const Value& target, const Scenario& s) const {
    Map t(*this, target, {"lock_service"});
    const Value v = t.require("lock_service");
    const auto& ls = s.lock_service_;
    const locks::LockServiceKind* lk = locks::find_lock_service_kind(ls.kind);
    locks::MemberSelector sel;
    if (v.node.IsMap()) {
      Map m(*this, v, {"member"});
      const Value n = m.require("member");
      sel.role = locks::MemberRole::kMember;
      sel.member = static_cast<int>(integer(n, 1, 9));
    } else {
      const std::string role = string(v);
      auto r = locks::member_role(role);
      if (!r || *r == locks::MemberRole::kMember)
        fail(v, "expected leader, follower, {member: N}, minority or majority, got " + quote(role));
      sel.role = *r;
    }
    if (ls.kind == kNoLockService || lk == nullptr)
      fail(v, "a lock-service member target needs a lock service fencecheck runs; this scenario's is kind none");
    if (!ls.embedded())
      fail(v, "a lock-service member target needs the embedded cluster; the harness cannot act on the members of "
              "the one at lock_service.endpoints");
    if (ls.members < 2)
      fail(v, "a lock-service member target needs a cluster, and this " + ls.kind + " runs as one process (set "
              "lock_service.members, e.g. members: 3)");
    const auto roles = lk->member_roles();
    if (std::find(roles.begin(), roles.end(), sel.role) == roles.end()) fail(v, lk->no_role_reason(sel.role));
    if (sel.role == locks::MemberRole::kMember && sel.member > ls.members)
      fail(v, "member " + std::to_string(sel.member) + " is out of range: lock_service.members is " +
                  std::to_string(ls.members) + " (members are numbered 1.." + std::to_string(ls.members) + ")");
    return sel;
  }

  /// workers[i].command / env / cwd (docs/worker-protocol.md). Pure: where the program is, and
  /// whether it runs, is check_worker_commands()'s business.
  void parse_command(const Map& wm, WorkerSpec& w) const {
    auto command = wm.get("command");
    auto env = wm.get("env");
    auto cwd = wm.get("cwd");
    auto user = wm.get("user");
    // An empty command (a template variable that expanded to nothing) must not quietly test
    // fencecheck-worker instead of the user's program.
    if (auto given = wm.raw("command"); given && !command)
      fail(*given, "command is empty: give the program's argv as a list, e.g. [./my-worker, --flag] (leave the key "
                   "out for fencecheck-worker)");
    if (!command) {
      if (env) fail(*env, "env is for a command worker (workers[].command); fencecheck-worker gets the harness's environment");
      if (cwd) fail(*cwd, "cwd is for a command worker (workers[].command)");
      if (user) fail(*user, "user is for a command worker (workers[].command); fencecheck-worker runs as the harness");
      return;
    }
    if (auto design = wm.get("design"))
      fail(*design, "design configures fencecheck-worker; a command worker's design is its own code (drop design or command)");
    WorkerCommand c;
    for (const Value& item : list(*command, false)) {
      std::string arg = string(item);
      if (arg.find('\0') != std::string::npos) fail(item, "an argument cannot hold a NUL byte");
      c.argv.push_back(std::move(arg));
      c.arg_positions.push_back(position(item.mark));
    }
    if (c.argv.front().empty()) fail(list(*command, false).front(), "expected the program's name or path, got an empty string");
    c.position = position(command->mark);
    if (env) c.env = env_map(*env);
    const std::filesystem::path base = scenario_dir();
    c.cwd = base;
    if (cwd) {
      const std::string dir = string(*cwd);
      if (dir.empty()) fail(*cwd, "expected a directory, got an empty string");
      c.cwd = (base / dir).lexically_normal();
    }
    if (user) {
      c.user = string(*user);
      const bool uid = !c.user->empty() && all_digits(*c.user) && c.user->size() <= 10;
      const bool name = !c.user->empty() && c.user->size() <= 32 && c.user->front() != '-' &&
                        std::all_of(c.user->begin(), c.user->end(), [](char ch) {
                          return std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-';
                        });
      if (!uid && !name)
        fail(*user, "expected an account name (1-32 characters of [A-Za-z0-9._-], not starting with '-') or a numeric uid, got " +
                        quote(*c.user));
      c.user_position = position(user->mark);
    }
    w.command = std::move(c);
  }

  /// An `env:` mapping (a command worker's, kind http's start_env): variable names to string
  /// values, sorted (the environment has no order; sorted, the plan equals its own scenario.json
  /// re-read). FENCECHECK_* is the harness's own (docs/worker-protocol.md).
  std::vector<std::pair<std::string, std::string>> env_map(const Value& env) const {
    if (!env.node.IsMap()) fail(env, "expected a mapping of variable names to values, got " + describe(env.node));
    std::vector<std::pair<std::string, std::string>> out;
    for (auto it = env.node.begin(); it != env.node.end(); ++it) {
      const YAML::Node k = it->first;
      const YAML::Node val = it->second;
      const Value key{k, k.Mark(), env.path};
      const std::string name = string(key);
      const bool valid = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) &&
                         std::all_of(name.begin(), name.end(), [](char ch) {
                           return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
                         });
      if (!valid) fail(key, "expected an environment variable name of [A-Za-z_][A-Za-z0-9_]*, got " + quote(name));
      if (name.rfind("FENCECHECK_", 0) == 0)
        fail(key, quote(name) + " is set by the harness (docs/worker-protocol.md); FENCECHECK_* cannot be overridden");
      for (const auto& [seen, v] : out)
        if (seen == name) fail(key, "duplicate variable " + quote(name));
      const Value value{val, val.IsNull() ? k.Mark() : val.Mark(), env.path + "." + name};
      if (!val.IsScalar()) fail(value, "expected a string value, got " + describe(val));
      out.emplace_back(name, val.Scalar());
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  /// The directory relative command paths are taken from: the scenario file's own, absolute (the
  /// working directory for text that came from no file).
  std::filesystem::path scenario_dir() const {
    std::error_code ec;
    const std::filesystem::path file(file_);
    if (!file_.empty() && std::filesystem::is_regular_file(file, ec))
      return std::filesystem::absolute(file, ec).parent_path().lexically_normal();
    return std::filesystem::current_path(ec);
  }

  /// workers[i].design: every field typed; unknown keys list the allowed ones. Returns the
  /// self_stop_at value (for the "nobody continues it" error), when given.
  std::optional<Value> parse_design(const Value& v, WorkerDesign& d, const LockServiceSpec& ls) const {
    Map m(*this, v,
          {"retry_same_token", "release_by_name", "check_lease_before_write", "abort_on_pause", "token_source",
           "clock_offset", "self_stop_at", "keepalive", "cpu_per_write"});
    if (auto x = m.get("retry_same_token")) d.retry_same_token = boolean(*x);
    if (auto x = m.get("release_by_name")) d.release_by_name = boolean(*x);
    if (auto x = m.get("check_lease_before_write")) d.check_lease_before_write = boolean(*x);
    if (auto x = m.get("abort_on_pause")) {
      // fencecheck-worker takes it in whole ms (--abort-on-pause-ms) and needs it above its pause
      // detector's 5 ms tick (--tick-ms): anything else would validate and then stop the worker.
      d.abort_on_pause = duration(*x);
      whole(*x, *d.abort_on_pause, std::chrono::milliseconds(1), "millisecond", "the worker's pause detector has millisecond resolution");
      if (*d.abort_on_pause <= kWorkerTick)
        fail(*x, "abort_on_pause must be longer than the worker's 5ms pause-detector tick, got " + quote(x->node.Scalar()));
    }
    if (auto x = m.get("token_source")) d.token_source = choice(*x, kTokenSources, "token source");
    if (auto x = m.get("clock_offset")) d.clock_offset = signed_duration(*x);
    if (auto x = m.get("keepalive")) {
      d.keepalive = choice(*x, kKeepaliveModes, "keepalive mode");
      const locks::LockServiceKind* lk = locks::find_lock_service_kind(ls.kind);
      if (d.keepalive == KeepaliveMode::kInline && lk != nullptr)
        if (std::string why = lk->inline_keepalive_problem(); !why.empty())
          fail(*x, "keepalive: inline cannot be had with lock service " + ls.kind + ": " + why);
    }
    if (auto x = m.get("cpu_per_write")) {
      d.cpu_per_write = duration(*x);
      if (*d.cpu_per_write % std::chrono::milliseconds(1) != Duration::zero() || *d.cpu_per_write > std::chrono::seconds(60))
        fail(*x, "cpu_per_write is whole milliseconds, at most 60s: expected a duration like \"5ms\", got " +
                     quote(x->node.Scalar()));
    }
    auto stop = m.get("self_stop_at");
    if (stop) {
      d.self_stop_at = choice(*stop, kSelfStopPoints, "self-stop point");
      if (d.self_stop_at == SelfStopAt::kCheck && !d.check_lease_before_write)
        fail(*stop, "self_stop_at: check stops the worker after its lease check, so it needs "
                    "check_lease_before_write: true");
    }
    return stop;
  }

  /// "a.b.c.d/p": four decimal octets (no leading zeros), prefix 8..29, no host bits set
  /// (faults/netns.h's rules). Returns (base, prefix), or nullopt with *why set.
  static std::optional<std::pair<std::uint32_t, int>> parse_cidr(const std::string& text, std::string* why) {
    const std::string like = "expected an IPv4 subnet like \"10.213.0.0/24\" with a prefix of 8 to 29, got " + quote(text);
    auto slash = text.find('/');
    if (slash == std::string::npos) return *why = like, std::nullopt;
    std::string_view addr(text.data(), slash), pfx(text.data() + slash + 1, text.size() - slash - 1);
    std::uint32_t base = 0;
    int octets = 0;
    while (true) {
      auto dot = addr.find('.');
      std::string_view part = addr.substr(0, dot);
      if (!all_digits(part) || part.size() > 3 || (part.size() > 1 && part.front() == '0'))
        return *why = like, std::nullopt;
      int value = std::stoi(std::string(part));
      if (value > 255) return *why = like, std::nullopt;
      base = (base << 8) | static_cast<std::uint32_t>(value);
      ++octets;
      if (dot == std::string_view::npos) break;
      addr.remove_prefix(dot + 1);
    }
    if (octets != 4 || !all_digits(pfx) || pfx.size() > 2) return *why = like, std::nullopt;
    const int prefix = std::stoi(std::string(pfx));
    if (prefix < 8 || prefix > 29) return *why = like, std::nullopt;
    const std::uint32_t mask = ~std::uint32_t{0} << (32 - prefix);
    if ((base & ~mask) != 0) {
      const std::uint32_t net = base & mask;
      *why = "subnet " + quote(text) + " has host bits set; did you mean \"" + std::to_string(net >> 24) + "." +
             std::to_string((net >> 16) & 255) + "." + std::to_string((net >> 8) & 255) + "." +
             std::to_string(net & 255) + "/" + std::to_string(prefix) + "\"?";
      return std::nullopt;
    }
    return std::pair{base, prefix};
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
    Value ev = t.require("event");
    std::string name = string(ev);
    auto kind = kind_from_name(name);
    if (!kind) fail(ev, "unknown event kind " + quote(name) + "; " + worker_event_list());
    if (is_lock_service_trigger_event(*kind)) {
      if (no_issuer_history_)
        fail(ev, "event " + quote(name) + " comes from the lock service's own history, and this scenario's lock "
                 "service is kind none, which has none: the trigger would never fire");
      // The lock service's own event (the issuer watch), seen for every worker, a black box too.
      if (auto w = t.get("worker"))
        fail(*w, "event " + quote(name) + " is the lock service's own, counted whoever's key it is: give no worker "
                 "(e.g. {event: lock.grant, count: 2} fires when the second lock key is created)");
    } else {
      if (!is_worker_event(*kind))
        fail(ev, "event " + quote(name) + " is not one a worker emits; " + worker_event_list());
      e.worker = known_worker(t.require("worker"));
    }
    e.event = *kind;
    if (auto c = t.get("count")) e.count = integer(*c, 1, std::numeric_limits<std::int64_t>::max());
    return {e, v};
  }

  static std::string worker_event_list() {
    std::vector<std::string_view> names;
    for (int k = 0; k <= static_cast<int>(EventKind::kProtocolError); ++k)
      if (is_worker_event(static_cast<EventKind>(k))) names.push_back(kind_name(static_cast<EventKind>(k)));
    return "worker events are: " + join(names) + "; the lock service's own (with no worker): lock.grant, lock.delete";
  }

  std::string file_;
  std::string_view text_;  // the file's text, to locate an offset inside a scalar ("" when unknown)
  std::optional<Value> payload_value_;  // job.payload as written (parse() checks it against the workers)
  bool no_issuer_history_ = false;  // lock_service kind none: no lock.grant / lock.delete will ever come
};

// The 1-based line and column (in bytes) of the first byte of `text` that is not UTF-8
// (first_invalid_utf8, yaml_documents.h), nullopt when it is all valid. Checked before YAML is
// read, so the error names the file's encoding rather than a YAML syntax error.
std::optional<std::pair<int, int>> invalid_utf8_at(std::string_view text) {
  const auto bad = first_invalid_utf8(text);
  if (!bad) return std::nullopt;
  int line = 1;
  int col = 1;
  for (std::size_t i = 0; i < *bad; ++i) {
    if (text[i] == '\n') line += 1, col = 1;
    else col += 1;
  }
  return std::pair{line, col};
}

Scenario parse_text(std::string_view yaml, const std::string& file) {
  if (auto at = invalid_utf8_at(yaml))
    throw ScenarioError(file, at->first, at->second, "not UTF-8: a scenario file is UTF-8 text (YAML 1.2)");
  YamlDocuments docs;
  try {
    docs = load_yaml_documents(std::string(yaml));
  } catch (const YAML::ParserException& e) {
    auto [line, col] = position(e.mark);
    throw ScenarioError(file, line, col, "YAML syntax error: " + e.msg);
  } catch (const YAML::Exception& e) {
    auto [line, col] = position(e.mark);
    throw ScenarioError(file, line, col, "YAML error: " + e.msg);
  }
  if (docs.count > 1) {
    auto [line, col] = position(docs.second);
    throw ScenarioError(file, line, col, "a scenario file holds one YAML document, found " + std::to_string(docs.count));
  }
  ScenarioParser p(file, yaml);
  return p.parse(docs.count == 0 ? YAML::Node() : docs.first);
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
  if (t.on_lock_service()) return {{"event", std::string(kind_name(t.event))}, {"count", t.count}};
  return {{"worker", t.worker}, {"event", std::string(kind_name(t.event))}, {"count", t.count}};
}

/// The kind's own parameters of a fault (`faults:` and `schedule.faults` items alike): already in
/// their written form (FaultSpec::params).
void add_fault_parameters(nlohmann::json& fj, const FaultSpec& f) {
  for (const auto& [key, value] : f.params.items()) fj[key] = value;
}

nlohmann::json range_json(Duration lo, Duration hi) {
  return {{"min", format_duration(lo)}, {"max", format_duration(hi)}};
}

nlohmann::json schedule_json(const ScheduleSpec& sc) {
  nlohmann::json j;
  if (sc.seed) j["seed"] = *sc.seed;
  j["duration"] = format_duration(sc.duration);
  j["interval"] = range_json(sc.min_interval, sc.max_interval);
  j["max_at_once"] = sc.max_at_once;
  auto& kinds = j["faults"] = nlohmann::json::array();
  for (const auto& k : sc.faults) {
    nlohmann::json kj{{"kind", k.fault.kind},
                      {"weight", k.weight},
                      {"duration", range_json(k.min_duration, k.max_duration)},
                      {"target", targets_worker(k.fault.kind) ? std::string(to_string(k.target)) : k.fault.target}};
    if (k.fault.member) kj["target"] = k.fault.member->to_json();  // the scenario's spelling, as in `faults:`
    add_fault_parameters(kj, k.fault);
    kinds.push_back(std::move(kj));
  }
  return j;
}

}  // namespace

bool operator==(const Scenario& a, const Scenario& b) {
  return a.name_ == b.name_ && a.description_ == b.description_ && a.seed_ == b.seed_ &&
         a.lease_ttl_ == b.lease_ttl_ && a.timeout_ == b.timeout_ && a.lock_service_ == b.lock_service_ &&
         a.resource_ == b.resource_ && a.network_ == b.network_ && a.job_ == b.job_ && a.workers_ == b.workers_ &&
         a.faults_ == b.faults_ && a.expect_ == b.expect_ && a.schedule_ == b.schedule_ && a.source_ == b.source_;
}

nlohmann::json to_json(const Scenario& s) {
  nlohmann::json j;
  j["name"] = s.name();
  j["description"] = s.description();
  j["source"] = s.source();
  j["seed"] = s.seed();
  j["lease_ttl"] = format_duration(s.lease_ttl());
  j["timeout"] = format_duration(s.timeout());
  nlohmann::json lj{{"kind", s.lock_service().kind},
                    {"endpoints", s.lock_service().endpoints},
                    {"lock", s.lock_service().lock},
                    {"prior_revisions", s.lock_service().prior_revisions},
                    {"run_suffix", s.lock_service().run_suffix},
                    {"issuers", s.lock_service().issuers}};
  if (s.lock_service().members != 1) lj["members"] = s.lock_service().members;
  if (!s.lock_service().client.empty()) lj["client"] = s.lock_service().client;
  if (!s.lock_service().embedded()) lj["claim_ttl"] = format_duration(s.lock_service().claim_ttl);
  for (const auto& [field, value] : s.lock_service().config.items()) lj[field] = value;  // the kind's own
  j["lock_service"] = std::move(lj);
  nlohmann::json rj{{"kind", s.resource().kind}};
  for (const auto& [field, value] : s.resource().config.items()) rj[field] = value;
  j["resource"] = std::move(rj);
  if (s.network_spec().mode == NetworkMode::kHost)
    j["network"] = std::string(to_string(s.network()));
  else
    j["network"] = {{"mode", std::string(to_string(s.network()))}, {"subnet", s.network_spec().subnet}};
  const JobSpec& job = s.job();
  nlohmann::json jj{{"kind", std::string(to_string(job.kind))}, {"key", job.key}};
  if (job.kind != JobKind::kCounter) {
    jj["segments"] = job.segments;
    jj["chunks"] = job.chunks;
    jj["chunk_bytes"] = job.chunk_bytes;
  }
  jj["chunk_interval"] = format_duration(job.chunk_interval);
  if (job.kind == JobKind::kCounter) jj["increments"] = job.increments;
  if (job.kind == JobKind::kSideEffect) jj["effect"] = std::string(to_string(job.effect));
  // Only when opaque: a self-describing job's JSON is byte for byte what it was before payload.
  if (job.payload == PayloadMode::kOpaque) jj["payload"] = std::string(to_string(job.payload));
  if (job.key_suffix) jj["key_suffix"] = true;
  if (job.repeat) jj["repeat"] = true;  // only with a schedule; absent otherwise, as before schedules
  j["job"] = std::move(jj);
  auto& workers = j["workers"] = nlohmann::json::array();
  for (const auto& w : s.workers()) {
    nlohmann::json wj{{"id", w.id}};
    if (w.start_after) wj["start_after"] = trigger_json(*w.start_after);
    if (w.start_delay) wj["start_delay"] = format_duration(*w.start_delay);
    if (w.key) wj["key"] = *w.key;
    if (w.issuer) wj["issuer"] = *w.issuer;
    if (w.command) {
      wj["command"] = w.command->argv;
      nlohmann::json env = nlohmann::json::object();
      for (const auto& [name, value] : w.command->env) env[name] = value;
      if (!env.empty()) wj["env"] = std::move(env);
      wj["cwd"] = w.command->cwd.string();
      if (w.command->user) wj["user"] = *w.command->user;
    } else {
      const WorkerDesign& d = w.design;
      nlohmann::json dj{{"retry_same_token", d.retry_same_token},
                        {"release_by_name", d.release_by_name},
                        {"check_lease_before_write", d.check_lease_before_write},
                        {"token_source", std::string(to_string(d.token_source))}};
      if (d.abort_on_pause) dj["abort_on_pause"] = format_duration(*d.abort_on_pause);
      if (d.clock_offset) dj["clock_offset"] = format_duration(*d.clock_offset);
      if (d.self_stop_at != SelfStopAt::kNever) dj["self_stop_at"] = std::string(to_string(d.self_stop_at));
      dj["keepalive"] = std::string(to_string(d.keepalive));
      if (d.cpu_per_write) dj["cpu_per_write"] = format_duration(*d.cpu_per_write);
      wj["design"] = std::move(dj);
    }
    workers.push_back(std::move(wj));
  }
  auto& faults = j["faults"] = nlohmann::json::array();
  for (const auto& f : s.faults()) {
    nlohmann::json fj{{"kind", f.kind}, {"target", f.target},
                      {"duration", format_duration(f.duration)}};
    if (f.member) fj["target"] = f.member->to_json();  // {"lock_service": "leader"}: the scenario's spelling
    if (const auto* e = std::get_if<EventTrigger>(&f.trigger)) fj["trigger"] = trigger_json(*e);
    else if (const auto* t = std::get_if<TimeTrigger>(&f.trigger)) fj["trigger"] = {{"at", format_duration(t->at)}};
    // SelfTrigger: no trigger at all.
    add_fault_parameters(fj, f);
    faults.push_back(std::move(fj));
  }
  nlohmann::json ej{{"outcome", std::string(to_string(s.expect().outcome))}, {"anomalies", s.expect().anomalies}};
  if (s.expect().min_rejected_writes) ej["min_rejected_writes"] = *s.expect().min_rejected_writes;
  if (s.expect().min_expiries_during_work) ej["min_expiries_during_work"] = *s.expect().min_expiries_during_work;
  if (s.expect().pause_tolerance) ej["pause_tolerance"] = format_percent(*s.expect().pause_tolerance);
  ej["progress_after_heal"] = s.expect().progress_after_heal;
  if (!s.expect().accept_unknown.empty()) ej["accept_unknown"] = s.expect().accept_unknown;
  j["expect"] = std::move(ej);
  if (s.schedule()) j["schedule"] = schedule_json(*s.schedule());
  return j;
}

Scenario Scenario::for_run(const std::string& run_id) const {
  Scenario s = *this;
  if (s.lock_service_.run_suffix) {
    s.lock_service_.lock += "/" + run_id;
    s.lock_service_.run_suffix = false;
  }
  if (s.job_.key_suffix) {  // applied once: the run's plan (scenario.json) re-reads to the same keys
    s.job_.key += "-" + run_id;
    for (auto& w : s.workers_)
      if (w.key) *w.key += "-" + run_id;
    s.job_.key_suffix = false;
  }
  return s;
}

std::optional<std::filesystem::path> resolve_worker_program(const WorkerCommand& command) {
  return process::find_program(command.argv.front(), command.cwd);
}

namespace {

/// A known interpreter's script (worker_command.h) that names no readable file: ScenarioError
/// at the argument (issue 34 item 6: a misspelt script otherwise reads as "the system failed").
std::optional<std::filesystem::path> check_script_argument(const Scenario& scenario, const std::string& worker, const WorkerCommand& c) {
  namespace fs = std::filesystem;
  const auto index = script_argument(c.argv);
  if (!index) return std::nullopt;
  const std::string& script = c.argv[*index];
  const fs::path path = fs::path(script).is_absolute() ? fs::path(script) : (c.cwd / script).lexically_normal();
  std::error_code ec;
  std::string why;
  if (!fs::exists(path, ec)) why = "does not exist";
  else if (::access(path.c_str(), R_OK) != 0) why = "cannot be read (" + std::string(std::strerror(errno)) + ")";
  if (why.empty()) return path;
  const auto [line, col] = *index < c.arg_positions.size() ? c.arg_positions[*index] : c.position;
  const std::string shown = fs::path(script).is_absolute() ? script : script + " (relative to " + c.cwd.string() + ": " + path.string() + ")";
  throw ScenarioError(scenario.source(), line, col,
                      "workers." + worker + ".command[" + std::to_string(*index) + "]: worker " + worker + "'s script " + shown +
                          " " + why + "; the interpreter would exit at start and the run would read as the system failing (a relative script is taken "
                          "from the worker's cwd: the scenario file's directory unless `cwd:` says otherwise)");
}

/// The worker's account exists, may be switched to, and can run the program (item 7).
void check_account(const Scenario& scenario, const std::string& worker, const WorkerCommand& c,
                   const std::filesystem::path& program, const std::optional<std::filesystem::path>& script,
                   const AccountDefaults& defaults) {
  const auto [line, col] = c.user ? c.user_position : c.position;
  const std::string at = c.user ? "workers." + worker + ".user: " : "workers." + worker + ".command: ";
  WorkerAccount account;
  try {
    account = resolve_worker_account(c.user, defaults);
  } catch (const std::invalid_argument& e) {
    throw ScenarioError(scenario.source(), line, col, at + "worker " + worker + ": " + e.what());
  }
  if (auto why = account_cannot_run(account, c.cwd, program, script))
    throw ScenarioError(scenario.source(), line, col,
                        at + "worker " + worker + " runs as " + account.name + " (" + account.chosen_by + ") and " + *why +
                            ": make the files reachable by " + account.name + ", name another account with `user:` (or "
                            "FENCECHECK_WORKER_USER for every worker), or `user: root` for a worker that needs root "
                            "(docs/worker-protocol.md, \"The worker's account\")");
}

}  // namespace

void check_worker_commands(const Scenario& scenario) { check_worker_commands(scenario, AccountDefaults::from_environment()); }

void check_worker_commands(const Scenario& scenario, const AccountDefaults& defaults) {
  namespace fs = std::filesystem;
  for (const WorkerSpec& w : scenario.workers()) {
    if (!w.command) continue;
    const WorkerCommand& c = *w.command;
    const auto [line, col] = c.position;
    const std::string at = "workers." + w.id + ".command: ";
    std::error_code ec;
    if (!fs::is_directory(c.cwd, ec))
      throw ScenarioError(scenario.source(), line, col, at + "worker " + w.id + "'s cwd " + c.cwd.string() + " is not a directory");
    if (const auto program = resolve_worker_program(c)) {
      const auto script = check_script_argument(scenario, w.id, c);
      check_account(scenario, w.id, c, *program, script, defaults);
      continue;
    }
    const std::string& program = c.argv.front();
    fs::path shown(program);
    if (program.find('/') != std::string::npos && shown.is_relative()) shown = (c.cwd / shown).lexically_normal();
    std::string why;
    if (program.find('/') == std::string::npos) why = "is not on PATH (" + std::string(std::getenv("PATH") ? std::getenv("PATH") : "") + ")";
    else if (!fs::exists(shown, ec)) why = "does not exist";
    else if (!fs::is_regular_file(shown, ec)) why = "is not a regular file";
    else why = "is not executable (chmod +x, or run it through its interpreter: command: [/usr/bin/python3, " + program + "])";
    throw ScenarioError(scenario.source(), line, col, at + "worker " + w.id + "'s program " + shown.string() + " " + why);
  }
  // kind http's start: the service's program, found as the run will (process::find_program).
  const ResourceSpec& r = scenario.resource();
  if (r.kind != "http" || !r.config.contains("start") || !r.config["start"].is_array() || r.config["start"].empty()) return;
  const std::string program = r.config["start"][0].get<std::string>();
  if (program.find('{') != std::string::npos) return;
  const fs::path cwd = r.config.value("start_cwd", std::string("."));
  const auto where = r.positions.count("start") ? r.positions.at("start") : std::pair<int, int>{0, 0};
  std::error_code ec;
  if (!fs::is_directory(cwd, ec))
    throw ScenarioError(scenario.source(), where.first, where.second,
                        "resource.start: the http service's working directory " + cwd.string() + " is not a directory");
  if (!process::find_program(program, cwd))
    throw ScenarioError(scenario.source(), where.first, where.second,
                        "resource.start: the http service's program " + program + " " + process::program_not_found(program, cwd));
}

std::optional<LockServiceRefusal> lock_service_refusal(const FaultSpec& f, const LockServiceSpec& ls) {
  const faults::FaultKind* fk = faults::find_fault_kind(f.kind);
  const locks::LockServiceKind* lk = locks::find_lock_service_kind(ls.kind);
  if (fk == nullptr || lk == nullptr || !ls.embedded()) return std::nullopt;
  const faults::LockServiceNeeds needs = fk->lock_service_needs(f.params);
  if (needs.member_clock && f.member) {
    if (std::string why = lk->member_clock_problem(); !why.empty()) {
      std::vector<std::string> takers;  // the kinds whose members take it, for the way out
      for (auto n : locks::lock_service_kind_names())
        if (const auto* k = locks::find_lock_service_kind(n); k != nullptr && k->member_clock_problem().empty())
          takers.emplace_back(n);
      std::string those;
      for (std::size_t i = 0; i < takers.size(); ++i)
        those += (i == 0 ? "" : i + 1 == takers.size() ? " and " : ", ") + takers[i];
      return LockServiceRefusal{"target", f.kind + " cannot act on members of lock service kind " + ls.kind + ": " + why +
                                              (those.empty() ? std::string()
                                                             : "; it acts on the members of " + those +
                                                                   " only, which fencecheck starts with the shim")};
    }
  }
  if (needs.member_peers && f.member) {
    if (std::string why = lk->member_peer_problem(); !why.empty())
      return LockServiceRefusal{"from", f.kind + " from: members cuts nothing on lock service kind " + ls.kind + ": " +
                                            why + "; use from: full (the members hit cut from their clients and the "
                                                  "harness too)"};
  }
  if (needs.fresh_data && !f.member) {
    if (std::string why = lk->fresh_restart_problem(ls.members); !why.empty())
      return LockServiceRefusal{
          "fresh_data", f.kind + " with fresh_data: true on target lock-service would restart the whole " + ls.kind +
                            " cluster on empty data: " + why + ". Allowed: fresh_data: false (the cluster restarts on "
                            "its own data), one member's restart (target: {lock_service: {member: N}}: kill -9, then "
                            "a start on its own data), or fresh data on a single process (members: 1)"};
  }
  return std::nullopt;
}

Scenario with_lock_service_kind(const Scenario& s, std::string_view kind) {
  return detail::ScenarioParser(s.source()).with_lock_service_kind(s, std::string(kind));
}

Scenario with_schedule_duration(const Scenario& s, Duration duration) {
  auto cannot = [&](const std::string& why) {
    return ScenarioError(s.source_, 0, 0, "--duration " + format_duration(duration) + " cannot apply to scenario " + s.name_ + ": " + why);
  };
  if (!s.schedule_) throw cannot("it has no schedule (--duration sets how long a schedule runs)");
  if (duration <= Duration::zero() || duration % std::chrono::milliseconds(1) != Duration::zero())
    throw cannot("expected a positive whole number of milliseconds");
  for (const auto& k : s.schedule_->faults)
    if (k.max_duration >= duration)
      throw cannot("its schedule draws " + k.fault.kind + " faults of up to " +
                   format_duration(k.max_duration) + ", which do not fit");
  Scenario out = s;
  const Duration margin = s.timeout_ - s.schedule_->duration;  // > 0: the loader's rule
  if (duration > Duration::max() - margin) throw cannot("too long");
  out.schedule_->duration = duration;
  out.timeout_ = duration + margin;
  return out;
}

Scenario scenario_from_json(const nlohmann::json& j, std::string_view file_label) {
  const std::string label(file_label);
  if (!j.is_object()) throw ScenarioError(label, 0, 0, "expected a JSON object holding a scenario");
  nlohmann::json plan = j;
  std::string source = label;
  if (auto it = plan.find("source"); it != plan.end()) {
    if (!it->is_string()) throw ScenarioError(label, 0, 0, "\"source\" must be a string");
    source = it->get<std::string>();
    plan.erase(it);
  }
  // JSON is YAML (flow style); pretty-printed so that an error's line and column mean something.
  Scenario s = detail::parse_text(plan.dump(2), label);
  s.source_ = std::move(source);
  return s;
}

}  // namespace fencecheck::harness
