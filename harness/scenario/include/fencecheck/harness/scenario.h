// fencecheck — the scenario model: an immutable, validated plan for one chaos run.
//
// A scenario is a YAML file (docs/scenario-format.md). Loading checks everything up front — unknown
// keys, types, missing fields, durations, worker references, event kinds, fault windows, fencing
// modes, expected anomalies — and throws ScenarioError "file:line:col: message" on the first
// problem, so nothing starts from a plan that cannot run. A loaded Scenario exposes only const
// accessors; the random seed is part of the plan.
//
// Thread-safety: a Scenario is an immutable value; share it freely across threads. The loaders
// are reentrant (no global state besides constant tables).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "fencecheck/proto/event.h"

namespace fencecheck::harness {

/// Every duration in a scenario. Written in YAML as a number with a unit: ns, us, ms, s, m.
using Duration = std::chrono::nanoseconds;

/// A bad scenario: where (file, 1-based line and column; 0 when the problem is the file as a
/// whole, e.g. it cannot be read) and what was expected. what() is "file:line:col: message"
/// ("file: message" when line is 0).
class ScenarioError : public std::runtime_error {
 public:
  ScenarioError(std::string file, int line, int column, std::string message);
  [[nodiscard]] const std::string& file() const noexcept { return file_; }
  [[nodiscard]] int line() const noexcept { return line_; }
  [[nodiscard]] int column() const noexcept { return column_; }
  /// The message without the location prefix.
  [[nodiscard]] const std::string& message() const noexcept { return message_; }

 private:
  std::string file_;
  int line_ = 0;
  int column_ = 0;
  std::string message_;
};

// Enumerations. Each has a name table; the loader accepts only names whose row is implemented, so
// adding a kind later is one enumerator plus one table row (scenario.cpp).
enum class LockServiceKind { kEtcd };
enum class ResourceKind { kStore };
/// How the resource fences writes. per-key: reject a token below the key's high-water mark;
/// none: accept everything (the control group that shows the anomaly).
enum class FencingMode { kPerKey, kNone };
/// host: every process on the host network. namespaces: not implemented yet (the loader rejects it).
enum class NetworkMode { kHost, kNamespaces };
enum class FaultKind { kSigstop };
enum class Outcome { kSafe, kAnomaly };

[[nodiscard]] std::string_view to_string(LockServiceKind k);
[[nodiscard]] std::string_view to_string(ResourceKind k);
[[nodiscard]] std::string_view to_string(FencingMode m);
[[nodiscard]] std::string_view to_string(NetworkMode m);
[[nodiscard]] std::string_view to_string(FaultKind k);
[[nodiscard]] std::string_view to_string(Outcome o);

/// The names the loader accepts today, in table order (for messages and docs).
[[nodiscard]] std::vector<std::string_view> known_fault_kinds();
[[nodiscard]] std::vector<std::string_view> known_fencing_modes();

/// The anomaly names a scenario's `expect.anomalies` may list (design.md's list plus
/// corrupt-chunk), in that order.
[[nodiscard]] const std::vector<std::string>& known_anomalies();
[[nodiscard]] bool is_known_anomaly(std::string_view name);

/// The event kinds a worker emits (what `start_after` and fault triggers may wait for):
/// acquire.*, keepalive.fail, lease.lost, write.*, pause, release.*, job.done. (worker.exit is the
/// harness's own event about a worker, so it is not a trigger.)
[[nodiscard]] bool is_worker_event(EventKind kind);

/// Parses "2s", "500ms", "1.5s", "250us", "10ns", "2m". nullopt (and *error set when given) for
/// anything else: no unit, unknown unit, negative, not a number, or too large. Zero parses (the
/// loader rejects it where a positive duration is needed).
[[nodiscard]] std::optional<Duration> parse_duration(std::string_view text, std::string* error = nullptr);
/// The shortest exact spelling: 2000000000ns -> "2s", 1500ms -> "1500ms", 90s -> "90s".
[[nodiscard]] std::string format_duration(Duration d);

/// "when worker W has emitted its count-th event of this kind".
struct EventTrigger {
  std::string worker;
  EventKind event = EventKind::kAcquireOk;
  std::int64_t count = 1;  ///< >= 1
  bool operator==(const EventTrigger&) const = default;
};
/// "at this offset after the run starts".
struct TimeTrigger {
  Duration at{};
  bool operator==(const TimeTrigger&) const = default;
};
using FaultTrigger = std::variant<EventTrigger, TimeTrigger>;

struct LockServiceSpec {
  LockServiceKind kind = LockServiceKind::kEtcd;
  /// Empty: the harness starts its own embedded etcd. Otherwise an existing cluster's client URLs.
  std::vector<std::string> endpoints;
  /// The lock name (etcd key prefix); defaults to "fencecheck/<scenario name>".
  std::string lock;
  [[nodiscard]] bool embedded() const { return endpoints.empty(); }
};

struct ResourceSpec {
  ResourceKind kind = ResourceKind::kStore;
  FencingMode fencing = FencingMode::kPerKey;
};

struct JobSpec {
  std::string key;                 ///< resource key, [A-Za-z0-9_.-]{1,256}
  std::int64_t segments = 3;       ///< >= 1
  std::int64_t chunks = 4;         ///< chunks per segment, >= 1
  std::int64_t chunk_bytes = 256;  ///< 1 .. 1 MiB
  Duration chunk_interval = std::chrono::milliseconds(50);  ///< > 0
};

struct WorkerSpec {
  std::string id;                          ///< [A-Za-z0-9_.-]{1,64}, not harness/lock/resource
  std::optional<EventTrigger> start_after;  ///< start when another worker's event happened
  std::optional<Duration> start_delay;      ///< or: start this long after the run starts
  // Neither set: starts with the run. Both set: rejected by the loader.
};

struct FaultSpec {
  FaultKind kind = FaultKind::kSigstop;
  std::string target;   ///< a worker id
  FaultTrigger trigger;
  Duration duration{};  ///< > 0; how long the fault lasts before it is healed
};

struct Expectation {
  Outcome outcome = Outcome::kSafe;
  std::vector<std::string> anomalies;  ///< outcome anomaly: each must be found (non-empty); safe: empty
  std::optional<std::int64_t> min_rejected_writes;
  std::optional<std::int64_t> min_expiries_during_work;
  /// Fraction (0.10 for "10%"): every SIGSTOPped worker's longest measured pause must be within
  /// this fraction of the injected duration.
  std::optional<double> pause_tolerance;
};

namespace detail {
class ScenarioParser;
}

/// One validated plan. Only the loaders construct one; every accessor is const.
class Scenario {
 public:
  [[nodiscard]] const std::string& name() const { return name_; }
  [[nodiscard]] const std::string& description() const { return description_; }
  [[nodiscard]] std::uint64_t seed() const { return seed_; }
  /// Whole seconds, >= 1 (etcd lease TTLs are int64 seconds).
  [[nodiscard]] std::chrono::seconds lease_ttl() const { return lease_ttl_; }
  /// Bound on the whole run.
  [[nodiscard]] Duration timeout() const { return timeout_; }
  [[nodiscard]] const LockServiceSpec& lock_service() const { return lock_service_; }
  [[nodiscard]] const ResourceSpec& resource() const { return resource_; }
  [[nodiscard]] NetworkMode network() const { return network_; }
  [[nodiscard]] const JobSpec& job() const { return job_; }
  [[nodiscard]] const std::vector<WorkerSpec>& workers() const { return workers_; }
  [[nodiscard]] const std::vector<FaultSpec>& faults() const { return faults_; }
  [[nodiscard]] const Expectation& expect() const { return expect_; }
  /// The file it was loaded from, as given to the loader (or the label given to parse_scenario).
  [[nodiscard]] const std::string& source() const { return source_; }
  /// The worker with this id, or nullptr.
  [[nodiscard]] const WorkerSpec* find_worker(std::string_view id) const;

 private:
  friend class detail::ScenarioParser;
  Scenario() = default;

  std::string name_;
  std::string description_;
  std::uint64_t seed_ = 1;
  std::chrono::seconds lease_ttl_{0};
  Duration timeout_ = std::chrono::seconds(120);
  LockServiceSpec lock_service_;
  ResourceSpec resource_;
  NetworkMode network_ = NetworkMode::kHost;
  JobSpec job_;
  std::vector<WorkerSpec> workers_;
  std::vector<FaultSpec> faults_;
  Expectation expect_;
  std::string source_;
  int name_line_ = 0;  // where `name:` is, for the suite's duplicate-name error
  int name_column_ = 0;
  friend std::vector<Scenario> load_suite(const std::filesystem::path& path);
};

/// Loads and validates one scenario file. Throws ScenarioError.
[[nodiscard]] Scenario load_scenario(const std::filesystem::path& path);
/// Loads and validates scenario text; `file_label` names it in errors and in source().
[[nodiscard]] Scenario parse_scenario(std::string_view yaml, std::string_view file_label = "<string>");
/// A file: that one scenario. A directory: every *.yaml / *.yml regular file directly in it
/// (not recursive), sorted by file name. Throws ScenarioError for the first bad file, for an empty
/// directory, for a path that is neither, and for two scenarios with the same name (located at
/// the second one's `name`).
[[nodiscard]] std::vector<Scenario> load_suite(const std::filesystem::path& path);

/// The whole plan as JSON for the run directory (scenario.json): the same field names as the
/// YAML, every default filled in, durations in the loader's own spelling ("2s", "50ms").
[[nodiscard]] nlohmann::json to_json(const Scenario& s);

}  // namespace fencecheck::harness
