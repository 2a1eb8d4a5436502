// fencecheck — the harness's side of the resource axis: one interface per resource kind, the
// kinds registered by name (docs/architecture.md, "The resource axis"; the shape of Jepsen's
// DB + Client protocols and FoundationDB's workloads registered by name).
//
// A kind:
//  - validates its own scenario fields (parse(), called by the scenario loader with the
//    `resource:` mapping; errors keep file:line:col through KindFields::fail);
//  - starts an embedded instance or connects to the user's (open()), which gives the endpoint the
//    workers write through (writer.h), a health check, the read-back into the one shape the
//    checkers read (fencecheck/proto/readback.h), and stop();
//  - says what evidence it can give (evidence()): an accept log in order, rejections, high-water
//    marks. Checkers that need evidence the kind cannot give say unknown, never valid;
//  - says what the harness must provide and do around it: the programs it runs from the bin
//    directory (programs(), checked before a run starts), the variables a command worker is given
//    (worker_env()), the worker's writer (make_writer()) and the orphans `fencecheck cleanup`
//    ends (stop_orphans()). The harness asks the kind; it knows no kind by name.
//
// Kinds: store (resources/store/), postgres (resources/postgres/), http (resources/http/), each in
// its own folder. The registry is a constant table (resources/kinds.h's FC_RESOURCE_KINDS, one row
// per kind: static libraries drop self-registering objects), which register_resource_kind extends
// at run time (tests, out-of-tree kinds).
//
// Thread-safety: ResourceKind objects are immutable and live as long as the program (built-in
// ones are function-local statics), callable from any thread.
// ResourceInstance is not thread-safe (the orchestrator's main thread owns it): open() may start
// child processes, which must be forked by the main thread (child_process.h).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "fencecheck/proto/kind_fields.h"
#include "fencecheck/proto/net_address.h"
#include "fencecheck/proto/readback.h"
#include "fencecheck/resources/effect_mode.h"
#include "fencecheck/resources/writer.h"

namespace fencecheck::resources {

/// What a kind's read-back can tell. A checker that needs a part the kind lacks says unknown with
/// the reason (check.h), never valid.
struct Evidence {
  bool chunks = true;      ///< the current content of every chunk slot, bytes as written
  bool accept_log = true;  ///< every accepted write, in the order the resource accepted it
  bool rejections = true;  ///< every write the fence refused
  bool high_water = true;  ///< each key's high-water mark
  bool effects = true;     ///< side effects and counters (the catalogue's store-only jobs)
};

/// Where an instance runs, given by the orchestrator.
struct ResourceRunContext {
  std::filesystem::path run_dir;   ///< the run directory: embedded data directories go below it
  /// The log file for a named process ("store", "postgres"): RunDirectory::log_path.
  std::function<std::filesystem::path(const std::string&)> log_path;
  std::filesystem::path bin_dir;   ///< where fencecheck-store is (the harness's own bin dir)
  std::string run_id;              ///< the run's id (names, socket directories)
  /// The address an embedded instance binds: 127.0.0.1, or the network lab's resource address.
  std::string host = "127.0.0.1";
  /// The port an embedded instance binds in a network lab (its own namespace: a fixed port is
  /// free); 0 on the host (a free port is chosen).
  int port = 0;
  /// How the resource must guard side effects (effect_mode.h): the scenario's job.effect for a
  /// side-effect job, fenced otherwise. Part of the resource's design, set when it starts: kind
  /// store passes it as fencecheck-store --effect-mode (no request can change it); kinds without
  /// side effects ignore it.
  EffectMode effect_mode = EffectMode::kFenced;
  /// Holds a process group the kind started itself (kind http's `start`: the user's service) in
  /// the run's fault ledger while it runs, so that `fencecheck cleanup` ends what is left of it
  /// after a kill -9 of the harness (faults/worker_group.h). `leader` leads its own group
  /// (ChildSpec::own_process_group). Returns the release: ends the group's members (SIGKILL) and
  /// records the heal; call it once the leader was stopped. Empty (tests): nothing is recorded.
  /// Called by the main thread (child_process.h); the release too.
  std::function<std::function<void()>(pid_t leader, const std::string& name)> hold_process_group;
};

/// The environment lacks what the kind needs (a server binary, an endpoint that does not
/// answer): the run's exit code 3. what() names it and how to fix it.
class ResourceUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The scenario's resource fields are wrong in a way only the resource itself can tell (an SQL
/// statement the database rejects, a read_back query without a `token` column): found by open()
/// before any worker starts. The harness reports it as bad input (exit 2) located at `field` of
/// the scenario's `resource:` mapping (file:line:col).
class ResourceConfigError : public std::runtime_error {
 public:
  ResourceConfigError(std::string field, const std::string& message)
      : std::runtime_error(message), field_(std::move(field)) {}
  /// The `resource:` field at fault ("write", "read_back"); "" for the mapping as a whole.
  [[nodiscard]] const std::string& field() const noexcept { return field_; }

 private:
  std::string field_;
};

/// One resource for one run: embedded (started by open(), stopped by stop()) or the user's.
class ResourceInstance {
 public:
  virtual ~ResourceInstance() = default;
  /// What workers are told (writer.h): {"kind": NAME, ...resolved fields}. Never holds a password.
  [[nodiscard]] virtual nlohmann::json endpoint() const = 0;
  /// One line for logs: "postgres 127.0.0.1:41234 (embedded)"; never a password.
  [[nodiscard]] virtual std::string describe() const = 0;
  /// True when the resource answers (HTTP /healthz, SELECT 1).
  [[nodiscard]] virtual bool healthy() = 0;
  /// Everything the checkers read. Throws std::runtime_error naming the resource when it does not
  /// answer or answers in the wrong shape.
  [[nodiscard]] virtual ReadBack readback() = 0;
  /// readback(), with the accept log's entries handed to `log` one at a time, in log order
  /// (ReadBack::log is then empty): a kind that reads its reply as it arrives (the store kind)
  /// never holds a long run's log as AcceptedWrites (112 bytes each). The default calls readback()
  /// and hands its log over, so its peak is readback()'s. Throws what readback() throws, and what
  /// `log` throws.
  [[nodiscard]] virtual ReadBack readback_into(const ReadBackLogSink& log) {
    ReadBack rb = readback();
    log.clear();
    for (AcceptedWrite& w : rb.log) log.add(std::move(w));
    std::vector<AcceptedWrite>().swap(rb.log);
    return rb;
  }
  /// Scopes every later readback() to `keys`, the keys the run wrote (issue 34, "Your real rows
  /// are judged"; the orchestrator: the scenario's job and workers' keys and every key a worker's
  /// event names; the probe: its own keys). A kind whose queries can take them reads only those
  /// keys' rows (postgres: the `$keys` parameter; http: `?keys=` on the read-back path) and puts
  /// what it knows of the others in ReadBack::ignored. Whatever a kind returns, its callers drop
  /// rows of other keys before any checker sees them (drop_foreign_rows, readback.h), so a kind
  /// may ignore the scope. Without a call, readback() reads unscoped (tests). Default: kept for
  /// read_scope(). Main thread.
  virtual void set_read_scope(std::set<std::string> keys) { read_scope_ = std::move(keys); }
  /// The scope set_read_scope() gave; nullopt: none.
  [[nodiscard]] const std::optional<std::set<std::string>>& read_scope() const { return read_scope_; }

  /// What remove_keys() did.
  struct Removal {
    bool removed = false;     ///< the kind ran its delete and it succeeded
    std::int64_t rows = -1;   ///< rows the delete reported; -1 when it said none (or nothing ran)
    std::string said;         ///< one sentence: what was removed, or why nothing was (what is left)
  };
  /// Removes every row of `keys` from the resource: `fencecheck probe`'s cleanup of what it wrote
  /// (docs/probe.md, "What the probe leaves behind"). Default: nothing, `said` names the kind. A
  /// resource that does not answer is `said`, never thrown. Main thread.
  [[nodiscard]] virtual Removal remove_keys(const std::vector<std::string>& /*keys*/) {
    return {false, -1, "this resource kind cannot remove rows: the probe's keys are left in it"};
  }

  /// Stops an embedded instance (no-op for the user's). Idempotent; never throws.
  virtual void stop() = 0;
  /// Stops and starts an embedded instance again on the same data and address (the probe's
  /// "the high-water mark survives a restart" rule). False when the kind cannot (external).
  virtual bool restart() { return false; }

 protected:
  std::optional<std::set<std::string>> read_scope_;  ///< set_read_scope()'s keys
};

/// What `fencecheck cleanup` found of a kind's embedded instances left running for one run
/// directory, and did: the lock-service axis's OrphanReport (locks/lock_service_kind.h), same shape.
struct OrphanReport {
  std::vector<std::string> said;  ///< one sentence per instance found, for the user
  int not_stopped = 0;            ///< found orphaned and not proven stopped: cleanup exits 3
};

class ResourceKind {
 public:
  virtual ~ResourceKind() = default;
  /// The registered name: "store", "postgres", "http".
  [[nodiscard]] virtual std::string_view name() const = 0;
  /// The fields of `resource:` this kind accepts besides `kind`, in documentation order.
  [[nodiscard]] virtual std::vector<std::string_view> fields() const = 0;
  /// Validates the kind's fields and returns them normalized (every default filled in, durations
  /// in the loader's spelling), the scenario's `resource` as scenario.json shows it minus "kind".
  /// parse(fields of to_json(parse(x))) == parse(x). Throws through fields.fail().
  [[nodiscard]] virtual nlohmann::json parse(const KindFields& fields) const = 0;
  /// True when open() starts the instance itself (no address, DSN or URL of the user's).
  [[nodiscard]] virtual bool embedded(const nlohmann::json& config) const = 0;
  /// What the read-back of this configuration can tell.
  [[nodiscard]] virtual Evidence evidence(const nlohmann::json& config) const = 0;
  /// A short label of the resource's fencing design for reports ("per-key", "user SQL").
  [[nodiscard]] virtual std::string design(const nlohmann::json& config) const = 0;
  /// Starts (embedded) or connects to (external) the resource and waits until it answers. Throws
  /// ResourceUnavailable (exit 3: missing binary, unreachable address or DSN, named),
  /// ResourceConfigError (exit 2: a field the resource refuses) or std::runtime_error. Main
  /// thread only.
  [[nodiscard]] virtual std::unique_ptr<ResourceInstance> open(const nlohmann::json& config,
                                                               const ResourceRunContext& ctx) const = 0;
  /// The programs open() runs from the harness's bin directory (ResourceRunContext::bin_dir) for
  /// this configuration: kind store "fencecheck-store". `fencecheck run` checks them before
  /// anything starts (harness/preflight.h). Default: none. Pure.
  [[nodiscard]] virtual std::vector<std::string> programs(const nlohmann::json& /*config*/) const { return {}; }
  /// The kind's own variables for a command worker, from the endpoint its instance gave
  /// (ResourceInstance::endpoint()): the resource's address in the form its clients take
  /// (docs/worker-protocol.md: store and http FENCECHECK_RESOURCE_URL, postgres
  /// FENCECHECK_RESOURCE_DSN). Never a password. Default: none. Pure.
  [[nodiscard]] virtual std::vector<std::pair<std::string, std::string>> worker_env(
      const nlohmann::json& /*endpoint*/) const {
    return {};
  }
  /// The worker's writer for an endpoint this kind's instance gave; what make_resource_writer
  /// (writer.h) builds for {"kind": name(), ...}. Throws std::invalid_argument naming the field an
  /// endpoint lacks.
  // ---- network: namespaces with the user's resource: the lab's relay (docs/architecture.md,
  // "Relays"). The harness relays the address workers connect to from the lab's resource address,
  // and workers get endpoint_at() of it; the harness's own connections (health, read-back) go to
  // the real address. A kind that does not override these cannot be relayed.
  /// The TCP address a worker's connections to `endpoint` (this kind's endpoint() JSON) go to.
  /// nullopt with *why set when none can be relayed. Pure.
  [[nodiscard]] virtual std::optional<NetAddress> endpoint_address(const nlohmann::json& /*endpoint*/,
                                                                   std::string* why) const {
    *why = "resource kind " + std::string(name()) + " does not say how workers reach it, so it cannot be relayed";
    return std::nullopt;
  }
  /// `endpoint` with that address replaced by `at` (the relay's), every other field kept. Pure.
  [[nodiscard]] virtual nlohmann::json endpoint_at(const nlohmann::json& endpoint, const NetAddress& /*at*/) const {
    return endpoint;
  }
  /// `fencecheck validate` of a scenario with `network: namespaces`: for the user's resource
  /// (embedded(config) false) the field (a key of `resource:`, "" for the mapping) and why workers
  /// in namespaces cannot reach it through a relay; nullopt when they can or the resource is
  /// embedded (it runs in the lab). Pure.
  [[nodiscard]] virtual std::optional<std::pair<std::string, std::string>> relay_problem(const nlohmann::json& config) const {
    if (embedded(config)) return std::nullopt;
    return std::pair<std::string, std::string>{"", "resource kind " + std::string(name()) +
                                                       " cannot be relayed into network: namespaces (use network: host)"};
  }
  [[nodiscard]] virtual std::unique_ptr<ResourceWriter> make_writer(const nlohmann::json& endpoint,
                                                                    std::chrono::milliseconds timeout) const = 0;
  /// `fencecheck cleanup`: ends an embedded instance of this kind that a dead harness left running
  /// for the run directory `run_dir` (each kind records its own there); one sentence per instance
  /// found, and how many it could not prove stopped (their record is kept, so that the next cleanup
  /// retries). One whose harness still runs is left alone unless `force`. Default: finds nothing
  /// (an instance that PR_SET_PDEATHSIG always takes along with its harness). Never throws.
  [[nodiscard]] virtual OrphanReport stop_orphans(const std::filesystem::path& /*run_dir*/, bool /*force*/) const {
    return {};
  }
};

/// The kind registered under `name` (built in or registered at run time), or nullptr. Thread-safe.
[[nodiscard]] const ResourceKind* find_resource_kind(std::string_view name);
/// Every registered name: the built-in table's order ("store", "postgres", "http"), then the kinds
/// registered at run time in registration order. Thread-safe.
[[nodiscard]] std::vector<std::string_view> resource_kind_names();
/// Adds `kind` to the registry at run time, after the built-in table, together with its writer
/// (register_resource_writer with kind.make_writer), so that the scenario loader, the harness and
/// make_resource_writer find it by name like a built-in kind. For tests and out-of-tree kinds; the
/// built-in kinds are rows of resources/kinds.h. `kind` must outlive every later use of the
/// registry (a static). Throws std::invalid_argument when a kind or writer of that name is already
/// registered (nothing is then added). Thread-safe; there is no unregistration.
void register_resource_kind(const ResourceKind& kind);
/// stop_orphans of every registered kind for one run directory (`fencecheck cleanup`): the
/// sentences in registry order, and the sum of what was not stopped. Never throws.
[[nodiscard]] OrphanReport stop_orphaned_resources(const std::filesystem::path& run_dir, bool force);

}  // namespace fencecheck::resources
