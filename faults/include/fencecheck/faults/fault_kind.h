// fencecheck — the fault axis: one interface per fault kind, the kinds registered by name
// (docs/architecture.md, "The fault axis"; the same shape as the lock-service axis,
// fencecheck/locks/lock_service_kind.h, and the resource axis, fencecheck/resources/resource_kind.h).
//
// A fault kind is one place (faults/kinds/<kind>.cpp) holding everything the harness knows of it:
//  - its name as scenarios spell it ("sigstop", "cpu-throttle", ...) and what it acts on (a worker
//    or the lock service);
//  - its own parameters in a `faults:` or `schedule.faults` item (fields(), parse(): read and
//    validated through the loader's field reader, so its errors carry file:line:col; the loader owns
//    the fields every kind shares: kind, target, trigger, duration, and a schedule's weight);
//  - what it needs of the scenario (network namespaces) and of the machine (missing_prerequisites:
//    root, a cgroup controller, a kernel module), checked before anything starts;
//  - how it is built for one injection (make(): a Fault, fault.h) from its parameters and what the
//    run gives it (FaultContext: the target's process, the network lab, the lock service);
//  - its ledger healer (heal_record()): how `fencecheck cleanup` undoes what a harness that is
//    gone left of it, from the record its Fault wrote (Fault::ledger_record()).
//
// Built-in kinds: sigstop, cpu-throttle, freeze, partition, netem, lock-service-restart, clock-jump,
// self-stop; their table is faults/kinds/registry.cpp (a constant table: a static library drops
// an object file nothing refers to, and with it a self-registering kind). register_fault_kind()
// adds a kind at run time: for tests and out-of-tree kinds.
//
// Thread-safety: FaultKind objects are immutable and callable from any thread. The registry's
// functions may be called from any thread; register_fault_kind() must happen before the kind is
// looked up (a kind registered while another thread loads a scenario may or may not be seen).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fencecheck/faults/fault.h"
#include "fencecheck/faults/netns.h"
#include "fencecheck/faults/process.h"
#include "fencecheck/proto/kind_fields.h"  // KindFields: the loader's field reader, shared by every axis

namespace fencecheck::faults {

/// What a fault acts on: one worker (its process, its cgroup, its network namespace), or the lock
/// service fencecheck runs (its target is written "lock-service").
enum class FaultTarget { kWorker, kLockService };

/// The harness's handle on the embedded lock service, for kinds that act on it
/// (lock-service-restart). Implemented by the orchestrator; called on its main thread.
class LockServiceControl {
 public:
  virtual ~LockServiceControl() = default;
  /// Stops the lock service. `fresh_data_next`: the next start is on an empty data directory (the
  /// harness tells the issuer watch that the token counter will reset). Throws on failure.
  virtual void stop_lock_service(bool fresh_data_next) = 0;
  /// Starts it again at the same address, on an empty data directory with fresh_data. Throws on
  /// failure (the lock service stays down).
  virtual void start_lock_service(bool fresh_data) = 0;
  /// A clustered lock service (issue 35): ends member `index` (1-based; SIGKILL with kill9, else
  /// SIGTERM), its data directory kept. Throws on failure or for a service without members
  /// (the default: std::logic_error).
  virtual void stop_member(int /*index*/, bool /*kill9*/) {
    throw std::logic_error("this lock service has no members");
  }
  /// Starts member `index` again on its own data at its own address; returns once it answers.
  /// Throws on failure (the member stays down). Default: std::logic_error.
  virtual void start_member(int /*index*/) { throw std::logic_error("this lock service has no members"); }
};

/// One member of a clustered lock service that a fault acts on, resolved when the fault fires
/// (locks::resolve_members over the scenario's `target: {lock_service: ...}`). Value type.
struct MemberRef {
  int index = 0;                      ///< 1-based, the lock service's own numbering
  std::optional<ProcessRef> process;  ///< its process; nullopt while it is down
  std::string netns;                  ///< its network namespace in the lab; "" on the host's network
  std::string address;                ///< the IP address it listens on (the lab's address for it)
  std::string endpoint;               ///< its client endpoint, the kind's spelling
  /// Its data directory (LockServiceMember::data_dir): the clock-jump fault writes the member's
  /// clock offset file there (fencecheck/faults/clock_offset.h). Empty when not embedded.
  std::filesystem::path data_dir;
};

/// What one injection is built from, beside the kind's parameters. Owned by the caller; the
/// pointers outlive the Fault made from it.
struct FaultContext {
  std::string target;                     ///< the scenario's target: a worker id, or "lock-service"
  std::optional<ProcessRef> process;      ///< the target worker's process while it runs
  const NetworkLab* lab = nullptr;        ///< the run's network lab (`network: namespaces`), or null
  LockServiceControl* lock_service = nullptr;  ///< the embedded lock service, or null
  std::string run_id;                     ///< names the run's cgroups and ledger entries
  /// A member target (`target: {lock_service: leader}`): the members it resolved to when the fault
  /// fired, and the service's other members (partition cuts the first from the second). Empty for
  /// every other target.
  std::vector<MemberRef> members;
  std::vector<MemberRef> other_members;
  /// Why those members (resolve_members' sentence): the fault's target() and ledger record say it.
  std::string members_why;

  /// process, or throws FaultError("<kind> on <target>: no such process").
  [[nodiscard]] const ProcessRef& need_process(std::string_view kind) const;
  /// *lab, or throws std::invalid_argument("<kind> needs network: namespaces").
  [[nodiscard]] const NetworkLab& need_lab(std::string_view kind) const;
  /// *lock_service, or throws std::invalid_argument("<kind> needs the embedded lock service").
  [[nodiscard]] LockServiceControl& need_lock_service(std::string_view kind) const;
};

/// What a fault asks of the lock service's kind beyond its target (FaultKind::lock_service_needs).
/// The scenario loader checks each against the scenario's lock-service kind
/// (locks::LockServiceKind::member_clock_problem, fresh_restart_problem, member_peer_problem) and
/// refuses the fault at
/// load when the kind cannot give it. Value type.
struct LockServiceNeeds {
  /// It moves the wall clock of the members it is aimed at through the clock shim (clock-jump).
  bool member_clock = false;
  /// It restarts the whole service on empty data directories (lock-service-restart with
  /// fresh_data: true; the loader's error points at that field).
  bool fresh_data = false;
  /// It cuts the members it is aimed at from the other members only (partition from: members);
  /// the loader's error points at `from`.
  bool member_peers = false;
};

/// One fault kind. Immutable; see the file comment for what a kind holds.
class FaultKind {
 public:
  virtual ~FaultKind() = default;
  /// The registered name as scenarios spell it ("sigstop"). It is also the `kind` of the ledger
  /// records its Faults write (Fault::kind()), which is how heal_record() is found again.
  [[nodiscard]] virtual std::string_view name() const = 0;
  /// What it acts on. Default: a worker.
  [[nodiscard]] virtual FaultTarget target() const { return FaultTarget::kWorker; }
  /// Its own parameter names, beside the shared ones (kind, target, trigger, duration, weight).
  /// The loader refuses any other key, naming the kind a parameter belongs to. Default: none.
  [[nodiscard]] virtual std::vector<std::string_view> fields() const { return {}; }
  /// Reads and validates its own fields (only those in fields() are present) and returns its
  /// parameters in their written form with every default filled ({"quota": "2%", "period":
  /// "100ms"}): what the scenario's JSON carries and make() reads; parse of that JSON gives it
  /// back unchanged. Errors through fields.fail() (ScenarioError with file:line:col). Default: {}.
  [[nodiscard]] virtual nlohmann::json parse(const KindFields& fields) const;
  /// Whether it takes the target it was given, with these parameters (parse()'s result):
  /// `member_target` says the scenario named lock-service members (`target: {lock_service:
  /// leader}`, issue 35), else a worker or "lock-service" as target() says. "" when it does, else
  /// why not in one sentence (the loader fails at the target). Default: no member targets.
  [[nodiscard]] virtual std::string check_target(const nlohmann::json& params, bool member_target) const;
  /// What it asks of the lock service's kind with these parameters (parse()'s result): checked
  /// at load against the scenario's kind (LockServiceNeeds). Default: nothing.
  [[nodiscard]] virtual LockServiceNeeds lock_service_needs(const nlohmann::json& /*params*/) const { return {}; }
  /// Needs `network: namespaces` (the loader refuses it on the host network). Default: false.
  [[nodiscard]] virtual bool needs_network_namespaces() const { return false; }
  /// Stops every thread of its target, so the target's own ticker measures it as a pause (what
  /// `expect.pause_tolerance` compares against). Default: false.
  [[nodiscard]] virtual bool stops_process() const { return false; }
  /// The target stops itself (self-stop): the item has no trigger, the target's design must say
  /// where it stops, and a schedule cannot draw it. Default: false.
  [[nodiscard]] virtual bool self_triggered() const { return false; }
  /// What this machine lacks to inject it: one sentence each, starting with `what` ("cpu-throttle
  /// on w1"), naming the piece and the fix ("... needs root (it writes to /sys/fs/cgroup)").
  /// Empty when nothing is missing. Reads the machine (euid, /sys/fs/cgroup, /lib/modules);
  /// changes nothing. Default: nothing is missing.
  [[nodiscard]] virtual std::vector<std::string> missing_prerequisites(const nlohmann::json& params,
                                                                      const std::string& what) const;
  /// The Fault for one injection, not yet injected. Throws FaultError (its target is gone),
  /// FaultUnavailable (the machine cannot give it) or std::invalid_argument (the run lacks what
  /// it needs: FaultContext::need_*).
  [[nodiscard]] virtual std::unique_ptr<Fault> make(const nlohmann::json& params, const FaultContext& ctx) const = 0;
  /// Heals one outstanding ledger record of this kind (as its Fault's ledger_record() wrote it,
  /// plus "kind", "id", "run_id", "pid") left by a harness that is gone: returns the sentence that
  /// says what was done ("continued w1 (pid 42)"); throws std::runtime_error when something of it
  /// is still in effect and could not be undone (the entry then stays outstanding and `cleanup`
  /// exits non-zero). A target already gone is healed.
  [[nodiscard]] virtual std::string heal_record(const nlohmann::json& entry) const = 0;
};

/// The kind registered under `name`, or nullptr. Thread-safe.
[[nodiscard]] const FaultKind* find_fault_kind(std::string_view name);
/// Every registered name: the built-in table's order, then kinds registered at run time in their
/// order. For messages ("expected one of: ...") and docs. Thread-safe.
[[nodiscard]] std::vector<std::string_view> fault_kind_names();
/// Adds `kind` to the registry for the rest of the process (tests, out-of-tree kinds). `kind` must
/// outlive every use (a static object). Throws std::invalid_argument when its name is empty or
/// already registered. Thread-safe.
void register_fault_kind(const FaultKind& kind);

}  // namespace fencecheck::faults
