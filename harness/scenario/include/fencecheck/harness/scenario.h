// fencecheck — the scenario model: an immutable, validated plan for one chaos run.
//
// A scenario is a YAML file (docs/scenario-format.md). Loading checks everything up front — unknown
// keys, types, missing fields, durations, worker references, event kinds, fault windows, fencing
// modes, job kinds, worker designs, fault parameters and which fault kinds need what (network
// namespaces, the embedded lock service, a self-stopping worker), expected anomalies — and throws
// ScenarioError "file:line:col: message" on the first problem, so nothing starts from a plan that
// cannot run. A loaded Scenario exposes only const accessors; the random seed is part of the plan.
// The fields of the failure catalogue (resource modes, job kinds, worker designs, fault kinds and
// their parameters) are the contract in docs/catalogue-plan.md.
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

#include <map>
#include <utility>

#include <nlohmann/json.hpp>

#include "fencecheck/proto/lock_members.h"  // locks::MemberSelector: a fault's member target
#include "fencecheck/proto/design.h"
#include "fencecheck/proto/event.h"
#include "fencecheck/proto/units.h"
#include "fencecheck/resources/effect_mode.h"

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
// adding a kind later is one enumerator plus one table row (scenario.cpp). (Lock-service,
// resource and fault kinds are names on their axes instead: fencecheck/locks/lock_service_kind.h,
// fencecheck/resources/resource_kind.h, fencecheck/faults/fault_kind.h.)
/// host: every process on the host's loopback. namespaces: each worker in its own network
/// namespace, the services on a bridge, addresses from NetworkSpec::subnet (needed by partition
/// and netem faults; faults/include/fencecheck/faults/netns.h).
enum class NetworkMode { kHost, kNamespaces };
enum class Outcome { kSafe, kAnomaly };
/// What each worker does while holding the lock. segments: write `segments` x `chunks` chunks;
/// counter: `increments` read-modify-write increments of one counter; side-effect: segments, plus
/// one side effect ("webhook", "payout") after each completed segment, guarded per `effect`.
/// One enum with fencecheck-worker's --job (fencecheck/proto/design.h).
using JobKind = fencecheck::JobKind;
/// How the resource guards a side effect: fenced (the same token check as writes), unfenced
/// (always applied: partial fencing, catalogue item 8), idempotent (applied once per effect id,
/// catalogue item 11). One enum with the store's (effect_mode.h): the scenario's job.effect is the
/// store's --effect-mode.
using EffectMode = fencecheck::EffectMode;
/// Where a worker's fencing token comes from: issuer (the lock service's own token, e.g. etcd's
/// lock key create_revision: the only ordering authority; written "issuer", or "etcd", its old
/// name) or timestamp (wall-clock ns at acquire: NOT an ordering authority, catalogue item 6).
using TokenSource = fencecheck::TokenSource;
/// Where a self-stopping worker stops itself: never (the field absent); check: after its lease
/// check, before the write it guards (needs check_lease_before_write; catalogue item 10); effect:
/// after the last chunk of its first segment was accepted, before that segment's side effect
/// (needs job kind side-effect; catalogue items 8 and 11).
using SelfStopAt = fencecheck::SelfStopAt;
/// Where a worker renews its lease: its own thread (etcd clientv3's way), or inline on the job's
/// thread before a write once the keepalive interval has passed (a single-threaded event loop),
/// where work on that thread delays renewals (catalogue item 12, the throttle fault scenarios).
using KeepaliveMode = fencecheck::KeepaliveMode;
/// What the bytes a worker writes are (scenario `job.payload`; docs/scenario-format.md, "job").
/// self-describing: fencecheck's chunks (fencecheck/proto/chunk.h: worker, token, key, segment,
/// chunk and a CRC in the bytes), judged by corrupt-chunk and used by interleaved-segment as each
/// chunk's provenance. opaque: the system's own bytes (a shipment's JSON, a row of the team's
/// own): no chunk-byte rule applies, so corrupt-chunk answers unknown ("payload: opaque: the bytes
/// are the system's own", kOpaquePayloadReason in checker.h) and every other checker judges from
/// the resource's token and writer columns, its accept log and the workers' events.
enum class PayloadMode { kSelfDescribing, kOpaque };
[[nodiscard]] std::string_view to_string(NetworkMode m);
[[nodiscard]] std::string_view to_string(Outcome o);
[[nodiscard]] std::string_view to_string(JobKind k);
[[nodiscard]] std::string_view to_string(EffectMode m);
[[nodiscard]] std::string_view to_string(TokenSource t);
/// "check", "effect"; "never" for kNever (never written to a scenario).
[[nodiscard]] std::string_view to_string(SelfStopAt p);
[[nodiscard]] std::string_view to_string(KeepaliveMode m);  ///< "thread", "inline"
[[nodiscard]] std::string_view to_string(PayloadMode m);    ///< "self-describing", "opaque"

/// The names the loader accepts today, in table order (for messages and docs): the fault axis's
/// registered kinds (faults::fault_kind_names()), and the job kinds.
[[nodiscard]] std::vector<std::string_view> known_fault_kinds();
[[nodiscard]] std::vector<std::string_view> known_job_kinds();

/// The fault target that names the lock service (lock-service-restart's only target).
inline constexpr std::string_view kLockServiceTarget = "lock-service";
/// The network lab's host name of lock-service member `index` (1-based) of a cluster:
/// "lock-service-<index>" (its namespace "fc-<run>-lock-service-<index>"). Worker ids of that shape
/// are reserved. Pure.
[[nodiscard]] inline std::string member_host(int index) { return std::string(kLockServiceTarget) + "-" + std::to_string(index); }
/// Whether `id` has member_host()'s shape ("lock-service-" and digits). Pure.
[[nodiscard]] bool is_member_host(std::string_view id);
/// The lock-service kind for a lock fencecheck does not manage (workers/locks/none/): nothing is
/// started or watched, every worker has a command (the loader refuses fencecheck-worker), and the
/// checkers that need the issuer's history answer unknown (checker.h, CheckContext::lock_service_kind).
inline constexpr std::string_view kNoLockService = "none";
/// The subnet of `network: namespaces` when none is given (faults/netns.h's default).
inline constexpr std::string_view kDefaultSubnet = "10.213.0.0/24";

/// Fault kinds are names on the fault axis (fencecheck/faults/fault_kind.h, faults/kinds/): these
/// ask the kind registered under `kind`, and answer false for a name no kind has.
/// The kind's target is a worker (every built-in kind but lock-service-restart).
[[nodiscard]] bool targets_worker(std::string_view kind);
/// The kind needs `network: namespaces` (partition, netem).
[[nodiscard]] bool needs_network_namespaces(std::string_view kind);
/// The kind stops every thread of the target, so its own ticker measures the fault as a pause
/// (sigstop, freeze, self-stop): what `expect.pause_tolerance` compares against.
[[nodiscard]] bool stops_process(std::string_view kind);

/// The anomaly names a scenario's `expect.anomalies` may list (docs/architecture.md, "Checkers", plus
/// corrupt-chunk), in that order.
[[nodiscard]] const std::vector<std::string>& known_anomalies();
[[nodiscard]] bool is_known_anomaly(std::string_view name);

/// The event kinds a worker emits (what `start_after` and fault triggers may wait for):
/// acquire.*, keepalive.fail, lease.lost, write.*, pause, release.*, job.done, job.gave_up. (worker.exit is the
/// harness's own event about a worker, so it is not a trigger.)
[[nodiscard]] bool is_worker_event(EventKind kind);

/// Durations and percentages as scenarios write them: one definition for every layer
/// (fencecheck/proto/units.h).
using fencecheck::format_duration;
using fencecheck::format_percent;
using fencecheck::parse_duration;
using fencecheck::parse_percent;
using fencecheck::parse_signed_duration;

/// The lock-service event kinds a trigger may wait for (is_lock_service_trigger_event): lock.grant
/// (a lock key was created: with etcd's and ZooKeeper's recipes a waiter's key is created when it
/// queues, so the n-th grant is the n-th holder or waiter) and lock.delete (a key was deleted: a
/// release or an expiry). The harness sees them for every worker, a black box included, from the
/// lock service's own history (the issuer watch), so they aim a fault at a worker that says nothing.
[[nodiscard]] bool is_lock_service_trigger_event(EventKind kind);

/// "when worker W has emitted its count-th event of this kind", or, with `worker` empty, "when the
/// lock service's own history (the issuer watch: source `lock`) has shown its count-th event of
/// this kind" (lock.grant or lock.delete, is_lock_service_trigger_event). Counted in the order the
/// harness receives them, over the whole run, whoever's lock key.
struct EventTrigger {
  std::string worker;  ///< a worker id; "" for the lock service's own events
  EventKind event = EventKind::kAcquireOk;
  std::int64_t count = 1;  ///< >= 1
  /// Whether this trigger waits for the lock service's own event rather than a worker's.
  [[nodiscard]] bool on_lock_service() const { return worker.empty(); }
  /// The history source whose events it counts: the worker id, or "lock".
  [[nodiscard]] std::string_view source() const { return worker.empty() ? std::string_view("lock") : worker; }
  bool operator==(const EventTrigger&) const = default;
};
/// "at this offset after the run starts".
struct TimeTrigger {
  Duration at{};
  bool operator==(const TimeTrigger&) const = default;
};
/// self-stop's implicit trigger: the target worker stops itself (at its design's self_stop_at
/// point); the harness notices and continues it `duration` later. Written as no `trigger` at all.
struct SelfTrigger {
  bool operator==(const SelfTrigger&) const = default;
};
/// Every fault but self-stop has an EventTrigger or a TimeTrigger; self-stop has a SelfTrigger.
using FaultTrigger = std::variant<EventTrigger, TimeTrigger, SelfTrigger>;

/// The lock service (docs/scenario-format.md, "lock_service"). Its kind is a name registered on the
/// lock-service axis (fencecheck/locks/lock_service_kind.h: etcd, ...). The loader owns the fields
/// every kind shares (kind, endpoints, lock, prior_revisions, run_suffix); every other field belongs
/// to the kind, which validated it and returned it normalized (`config`, every default filled in).
struct LockServiceSpec {
  std::string kind = "etcd";
  /// Empty: the harness starts the kind's own embedded server. Otherwise the user's service, in the
  /// kind's own spelling (etcd: client URLs "http://host:port"; LockServiceKind::check_endpoint).
  std::vector<std::string> endpoints;
  /// The lock name (etcd: the key prefix); defaults to "fencecheck/<scenario name>".
  std::string lock;
  /// Embedded only: before any worker starts, the harness advances the new service's ordering
  /// counter by this many writes (LockServiceInstance::advance; etcd: puts to a key outside the
  /// lock's prefix), as a lock service that has been in service for a while has. Tokens (etcd:
  /// create_revisions) then start above it; a lock-service-restart with fresh_data starts again
  /// from 1 (catalogue item 7). 0..100000.
  std::int64_t prior_revisions = 0;
  /// The lock name gets "/<run id>" appended for each run (isolation between runs that share a
  /// cluster). Off by default: the lock name is used exactly as written, so a team's real lock
  /// name can be tested. Scenario::for_run() applies it.
  bool run_suffix = false;
  /// How many independent lock services of this kind the harness starts side by side (1..4;
  /// embedded only): the "two issuers exist" mistake (a split configuration, or a redeploy beside
  /// the old one). Issuer 1 is "the" lock service (prior_revisions and lock-service-restart act on
  /// it); the others start empty. Each worker takes its lock from one issuer
  /// (Scenario::issuer_of). Their tokens do not order each other.
  int issuers = 1;
  /// How many members the embedded lock service runs as (issue 35): 1, a single process (every
  /// kind's default but redlock's 5); etcd 3 or 5, each member its own process, data directory and
  /// (with `network: namespaces`) network namespace. LockServiceKind::check_members decides; the
  /// loader refuses it with endpoints (the user's cluster is theirs) and with issuers > 1.
  int members = 1;
  /// The client library whose key layout the workers use (locks::ClientLayout: "python-etcd3",
  /// "kazoo", ...), or "" (none said). Set: command workers get FENCECHECK_LOCK_CLIENT_NAME, the
  /// name to hand that library, and the loader checked that `lock` fits its layout.
  std::string client;
  /// With endpoints (a lock service of the user's): the TTL of the run's claim on it
  /// (locks::RunClaim::ttl; docs/scenario-format.md, "Runs that share a lock service"): how long a
  /// killed harness's claim outlives it. Whole seconds, 2 s to 300 s; 10 s (locks::kClaimTtl) by
  /// default. An embedded lock service takes no claim.
  std::chrono::seconds claim_ttl{10};
  /// The kind's own fields, normalized by LockServiceKind::parse ({} for etcd).
  nlohmann::json config = nlohmann::json::object();
  /// Where each field of `lock_service:` is in the scenario file (1-based line, column), "" for the
  /// mapping itself (absent when the scenario has no lock_service). Not part of the plan: equality
  /// ignores it.
  std::map<std::string, std::pair<int, int>> positions;
  [[nodiscard]] bool embedded() const { return endpoints.empty(); }
  bool operator==(const LockServiceSpec& o) const {
    return kind == o.kind && endpoints == o.endpoints && lock == o.lock && prior_revisions == o.prior_revisions &&
           run_suffix == o.run_suffix && issuers == o.issuers && members == o.members && client == o.client &&
           claim_ttl == o.claim_ttl &&
           config == o.config;
  }
};

/// The resource under test (docs/scenario-format.md, "resource"). Its kind is a name registered on
/// the resource axis (fencecheck/resources/resource_kind.h: store, postgres, http); every other
/// field belongs to the kind, which validated it and returned it normalized (`config`: every
/// default filled in, e.g. the store's {"fencing":"per-key"}).
struct ResourceSpec {
  std::string kind = "store";
  nlohmann::json config = nlohmann::json::object();
  /// Where each field of `resource:` is in the scenario file (1-based line, column), "" for the
  /// mapping itself: for errors only the resource can find (resources::ResourceConfigError), raised
  /// when it opens. Not part of the plan: equality ignores it.
  std::map<std::string, std::pair<int, int>> positions;
  /// The kind's `fencing` field ("per-key", "none", ...) when it has one, else "".
  [[nodiscard]] std::string fencing() const;
  bool operator==(const ResourceSpec& o) const { return kind == o.kind && config == o.config; }
};

struct NetworkSpec {
  NetworkMode mode = NetworkMode::kHost;
  /// namespaces only (set exactly then; default kDefaultSubnet): the IPv4 CIDR the run's
  /// addresses come from ("10.213.0.0/24"). Prefix 8..29, no host bits, room for the hub, the two
  /// services and every worker (faults/netns.h's rules). "" with host.
  std::string subnet;
  bool operator==(const NetworkSpec&) const = default;
};

struct JobSpec {
  JobKind kind = JobKind::kSegments;
  std::string key;                 ///< resource key, [A-Za-z0-9_.-]{1,256}; a worker's `key` overrides it
  std::int64_t segments = 3;       ///< >= 1 (segments, side-effect)
  std::int64_t chunks = 4;         ///< chunks per segment, >= 1 (segments, side-effect)
  std::int64_t chunk_bytes = 256;  ///< 1 .. 1 MiB (segments, side-effect)
  /// > 0: the pause between two writes of a holder (chunks; counter: increments).
  Duration chunk_interval = std::chrono::milliseconds(50);
  std::int64_t increments = 10;    ///< counter: increments per holder, 1 .. 1 000 000
  EffectMode effect = EffectMode::kFenced;  ///< side-effect: how the resource guards the effect
  /// segments, side-effect: what the chunks' bytes are. opaque needs a worker with a command (the
  /// user's program writes its own bytes; fencecheck-worker writes self-describing chunks only).
  /// With opaque, `segment` and `chunk` are the worker's own numbering of the slots (rows) it
  /// writes, the same numbers in its events and in the read-back, and the job's segments, chunks
  /// and chunk_bytes are what the harness suggests, not a shape anything checks.
  PayloadMode payload = PayloadMode::kSelfDescribing;
  /// The job repeats until the run's schedule ends (fencecheck-worker --repeat): each holding is
  /// one round (the whole job, then job.done and a release), and the worker acquires again for
  /// the next round until it is told to stop. Each holding writes segments of its own (segment
  /// ids numbered from token x segments), so a round cut short never leaves a segment mixed.
  /// True by default with a `schedule` (and only there: a schedule needs it, it needs a schedule).
  bool repeat = false;
  /// Every resource key (the job's and each worker's `key`) gets "-<run id>" appended for each run
  /// (Scenario::for_run), so that runs on the user's resource never meet an earlier run's rows of
  /// the same key (its accept log would read as unaccounted writes). Off by default.
  bool key_suffix = false;
  bool operator==(const JobSpec&) const = default;
};

/// How a worker gets fencing wrong on purpose (catalogue-plan.md, "workers[].design"). The
/// defaults are the correct design; each field is one mistake of the failure catalogue.
struct WorkerDesign {
  /// On a rejected write, resend the same chunk with the same token (up to 5 times) before
  /// re-acquiring (catalogue item 4: rejection-storm).
  bool retry_same_token = false;
  /// Release deletes every key under the lock NAME, not the holder's own key (no owner check;
  /// catalogue item 5: foreign-release).
  bool release_by_name = false;
  /// Ask the lock service for the lease's remaining TTL before each write (catalogue item 10).
  bool check_lease_before_write = false;
  /// When the worker's own ticker saw a pause at least this long, drop the holding and re-acquire
  /// before the next write (catalogue item 10). > 0.
  std::optional<Duration> abort_on_pause;
  /// Where the token comes from (catalogue item 6).
  TokenSource token_source = TokenSource::kIssuer;
  /// Run the worker under libfaketime with this offset (FAKETIME="-30s"); signed, non-zero.
  std::optional<Duration> clock_offset;
  /// The worker SIGSTOPs itself once, at this point; a self-stop fault on it continues it. check
  /// needs check_lease_before_write (the point is after the lease check); effect needs job kind
  /// side-effect.
  SelfStopAt self_stop_at = SelfStopAt::kNever;
  /// Where lease renewals run (fencecheck-worker --keepalive).
  KeepaliveMode keepalive = KeepaliveMode::kThread;
  /// CPU time (not wall time) the worker's job thread spends before each write, the work that
  /// produces it (fencecheck-worker --cpu-per-write-ms); a CPU quota stretches its wall time.
  /// > 0, whole milliseconds, at most 60 s.
  std::optional<Duration> cpu_per_write;

  /// True when every field has its default (the correct design).
  [[nodiscard]] bool is_default() const { return *this == WorkerDesign{}; }
  bool operator==(const WorkerDesign&) const = default;
};

/// A worker that is the user's own program (docs/worker-protocol.md), not fencecheck-worker.
struct WorkerCommand {
  /// argv, non-empty, as written. argv[0] without '/' is looked up on PATH when the run starts;
  /// with '/' a relative one is relative to `cwd`.
  std::vector<std::string> argv;
  /// Variables added to the protocol's environment ([A-Za-z_][A-Za-z0-9_]*, none FENCECHECK_*),
  /// in the order written.
  std::vector<std::pair<std::string, std::string>> env;
  /// The working directory, absolute: the scenario's `cwd` made absolute against the scenario
  /// file's directory, or that directory.
  std::filesystem::path cwd;
  /// Where `command:` is in the scenario file (1-based line, column), for errors found when the
  /// program is looked up (check_worker_commands). Not part of the plan: equality ignores it.
  std::pair<int, int> position{0, 0};
  /// Where each argument of `command:` is (line, column; parallel to argv when loaded from a
  /// file, else empty), for the script check. Not part of the plan either.
  std::vector<std::pair<int, int>> arg_positions;
  /// `user:` as written (an account name of [A-Za-z0-9._-], 1-32 characters, or a decimal uid):
  /// the account the program runs as. Unset: the default (resolve_worker_account(),
  /// worker_command.h: FENCECHECK_WORKER_USER, else the invoking user under sudo, else nobody).
  std::optional<std::string> user;
  /// Where `user:` is, for errors found when the account is looked up. Not part of the plan.
  std::pair<int, int> user_position{0, 0};
  bool operator==(const WorkerCommand& o) const {
    return argv == o.argv && env == o.env && cwd == o.cwd && user == o.user;
  }
};

struct WorkerSpec {
  std::string id;                          ///< [A-Za-z0-9_.-]{1,64}, not harness/lock/resource
  std::optional<EventTrigger> start_after;  ///< start when another worker's event happened
  std::optional<Duration> start_delay;      ///< or: start this long after the run starts
  // Neither set: starts with the run. Both set: rejected by the loader.
  /// The resource key this worker writes, when not the job's (cross-key scenarios). Use
  /// Scenario::key_of(worker) for the effective key.
  std::optional<std::string> key;
  /// The issuer (1-based, <= lock_service.issuers) this worker takes its lock from, when not the
  /// default. Use Scenario::issuer_of(worker) for the effective one.
  std::optional<int> issuer;
  WorkerDesign design;  ///< the reference worker's design; all defaults for a command worker
  /// Set: the user's program runs as this worker (docs/worker-protocol.md). Unset: fencecheck-worker.
  std::optional<WorkerCommand> command;
  bool operator==(const WorkerSpec&) const = default;
};

/// One planned fault: the fields every kind shares, and the kind's own parameters as its kind
/// parsed them (faults::FaultKind::parse: written form, defaults filled).
struct FaultSpec {
  /// A name on the fault axis (faults::find_fault_kind): "sigstop", "cpu-throttle", "freeze",
  /// "partition", "netem", "lock-service-restart", "clock-jump", "self-stop", or a kind registered at run time.
  std::string kind = "sigstop";
  /// A worker id; kLockServiceTarget ("lock-service") for a kind that acts on the lock service
  /// and for a member target (`member` set); for self-stop a worker whose design has self_stop_at.
  std::string target;
  /// `target: {lock_service: leader | follower | member: N | minority | majority}` (issue 35): the
  /// members of the embedded cluster it acts on, resolved when it fires (locks::resolve_members).
  /// Only for a kind whose check_target() takes it (sigstop, partition, lock-service-restart),
  /// a role the lock-service kind has, N within lock_service.members, and members > 1.
  std::optional<locks::MemberSelector> member;
  FaultTrigger trigger;  ///< SelfTrigger exactly for a self-triggered kind (self-stop)
  /// > 0. How long the fault lasts before it is healed; lock-service-restart: the downtime before
  /// the lock service starts again; self-stop: how long after the worker stopped itself it is continued.
  Duration duration{};
  /// The kind's own parameters in their written form, every default filled (cpu-throttle:
  /// {"quota": "2%", "period": "100ms"}; partition: {"from": "lock-service", "direction": "both"};
  /// netem: {"delay", "jitter", "loss"}; lock-service-restart: {"fresh_data": false}; {} for the
  /// kinds without any). What scenario.json carries; what the kind's make() reads.
  nlohmann::json params = nlohmann::json::object();
  bool operator==(const FaultSpec&) const = default;
};

/// Which workers a scheduled fault may hit, chosen when it fires (docs/scenario-format.md,
/// "schedule"): holders, the workers that hold the lock then (acquire.ok seen, no release.invoke
/// or exit since: a holder whose lease expired still counts, it still believes it holds);
/// workers, any worker running then.
enum class ScheduleTarget { kHolders, kWorkers };
[[nodiscard]] std::string_view to_string(ScheduleTarget t);  ///< "holders", "workers"

/// One kind of fault a schedule mixes in, with its weight, its duration range and its target rule.
struct ScheduleKind {
  /// The kind and the kind's own parameters (FaultSpec::params) as a FaultSpec of `faults:` has them; target, trigger and duration unused (the
  /// schedule draws the duration, the target is chosen when the fault fires; lock-service-restart's
  /// target is kLockServiceTarget). Never self-stop (a worker stops itself, the harness cannot).
  /// `target: {lock_service: leader | ...}` (issue 35) sets fault.member (and target
  /// kLockServiceTarget) as in `faults:`, for a kind whose check_target() takes it; `target` (the
  /// rule) is then unused.
  FaultSpec fault;
  std::int64_t weight = 1;  ///< 1 .. 1 000 000: the kind's share of the draws is weight / sum of weights
  Duration min_duration{};  ///< > 0, whole ms
  Duration max_duration{};  ///< >= min_duration, whole ms, below the schedule's duration
  ScheduleTarget target = ScheduleTarget::kHolders;  ///< unused for lock-service-restart and member targets
  bool operator==(const ScheduleKind&) const = default;
};

/// A seeded random mix of faults for a duration (docs/scenario-format.md, "schedule"; the shape of
/// Jepsen's nemesis generators and Chaos Mesh's Schedule). plan_schedule() (schedule.h) turns it
/// and its seed into the planned faults, a pure function.
struct ScheduleSpec {
  /// The generator's seed; unset: the scenario's seed (Scenario::schedule_seed()).
  std::optional<std::uint64_t> seed;
  /// How long the run goes on: the workers work (job.repeat) and faults fire until it ends, then
  /// the harness heals what is left and stops the workers. > 0, whole ms, below `timeout`.
  Duration duration{};
  Duration min_interval{};  ///< between one fault's start and the next's: > 0, whole ms
  Duration max_interval{};  ///< >= min_interval, whole ms
  /// At most this many scheduled faults in effect at once, 1 .. 64; a fault due while the limit
  /// is reached waits for one to heal.
  std::int64_t max_at_once = 1;
  std::vector<ScheduleKind> faults;  ///< non-empty
  bool operator==(const ScheduleSpec&) const = default;
};

struct Expectation {
  Outcome outcome = Outcome::kSafe;
  std::vector<std::string> anomalies;  ///< outcome anomaly: each must be found (non-empty); safe: empty
  std::optional<std::int64_t> min_rejected_writes;
  std::optional<std::int64_t> min_expiries_during_work;
  /// Fraction (0.10 for "10%"): for every worker a process-stopping fault (sigstop, freeze,
  /// self-stop) targets, its longest measured pause must be within this fraction of the injected
  /// duration.
  std::optional<double> pause_tolerance;
  /// Liveness: after the last heal, a write is accepted within lease TTL + one acquire allowance
  /// (check.h's CheckContext::acquire_allowance) whenever some worker still had work to do.
  /// Needs at least one fault.
  bool progress_after_heal = false;
  /// outcome safe: checkers (by name, each an anomaly name) whose *unknown* verdict the user accepts
  /// as the known limit of this system under test, e.g. those that need the issuer's history with
  /// `lock_service: {kind: none}`. The combined verdict stays unknown (never valid without the
  /// evidence); only the expectation counts it as met, and only when no other checker is unknown
  /// and none is invalid. Empty: an unknown verdict never meets a safe expectation.
  std::vector<std::string> accept_unknown;
  bool operator==(const Expectation&) const = default;
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
  /// The lease (session) TTL the holders ask for: whole milliseconds, > 0; the lock-service kind
  /// may be stricter (etcd: whole seconds, its lease TTLs being int64 seconds;
  /// LockServiceKind::check_lease_ttl).
  [[nodiscard]] std::chrono::milliseconds lease_ttl() const { return lease_ttl_; }
  /// Bound on the whole run.
  [[nodiscard]] Duration timeout() const { return timeout_; }
  [[nodiscard]] const LockServiceSpec& lock_service() const { return lock_service_; }
  [[nodiscard]] const ResourceSpec& resource() const { return resource_; }
  /// The network mode (network_spec().mode); kept for callers that need only the mode.
  [[nodiscard]] NetworkMode network() const { return network_.mode; }
  /// The whole `network` field: mode and, for namespaces, the subnet.
  [[nodiscard]] const NetworkSpec& network_spec() const { return network_; }
  [[nodiscard]] const JobSpec& job() const { return job_; }
  [[nodiscard]] const std::vector<WorkerSpec>& workers() const { return workers_; }
  [[nodiscard]] const std::vector<FaultSpec>& faults() const { return faults_; }
  [[nodiscard]] const Expectation& expect() const { return expect_; }
  /// The fault schedule, when the scenario has one (then job().repeat is true).
  [[nodiscard]] const std::optional<ScheduleSpec>& schedule() const { return schedule_; }
  /// The schedule's own seed when it gives one, else seed().
  [[nodiscard]] std::uint64_t schedule_seed() const {
    return schedule_ && schedule_->seed ? *schedule_->seed : seed_;
  }
  /// The file it was loaded from, as given to the loader (or the label given to parse_scenario).
  [[nodiscard]] const std::string& source() const { return source_; }
  /// The worker with this id, or nullptr.
  [[nodiscard]] const WorkerSpec* find_worker(std::string_view id) const;
  /// The resource key a worker writes: its own `key`, else the job's.
  [[nodiscard]] const std::string& key_of(const WorkerSpec& worker) const {
    return worker.key ? *worker.key : job_.key;
  }
  /// The issuer a worker takes its lock from, 0-based (< lock_service().issuers): its own
  /// `issuer` minus one, else its position in `workers` modulo the number of issuers (so with 2
  /// issuers w1, w3, ... use issuer 1 and w2, w4, ... issuer 2). Pure.
  [[nodiscard]] int issuer_of(const WorkerSpec& worker) const;

  /// The plan as one run carries it out: the lock name actually used (lock_service.lock with
  /// "/<run_id>" appended when run_suffix is set; run_suffix then off). The orchestrator runs, and
  /// writes to scenario.json, this copy, so the checkers, the report and the metrics see the
  /// name the workers used. Pure.
  [[nodiscard]] Scenario for_run(const std::string& run_id) const;

  /// Equal plans: every field, including source(); not where in the file `name` was.
  friend bool operator==(const Scenario& a, const Scenario& b);

 private:
  friend class detail::ScenarioParser;
  Scenario() = default;

  std::string name_;
  std::string description_;
  std::uint64_t seed_ = 1;
  std::chrono::milliseconds lease_ttl_{0};
  Duration timeout_ = std::chrono::seconds(120);
  LockServiceSpec lock_service_;
  ResourceSpec resource_;
  NetworkSpec network_;
  JobSpec job_;
  std::vector<WorkerSpec> workers_;
  std::vector<FaultSpec> faults_;
  Expectation expect_;
  std::optional<ScheduleSpec> schedule_;
  std::string source_;
  int name_line_ = 0;  // where `name:` is, for the suite's duplicate-name error
  int name_column_ = 0;
  friend std::vector<Scenario> load_suite(const std::filesystem::path& path);
  friend Scenario scenario_from_json(const nlohmann::json& j, std::string_view file_label);
  friend Scenario with_schedule_duration(const Scenario& s, Duration duration);
};

/// `fencecheck run --duration D`: the same plan with the schedule lasting `duration` (> 0, whole
/// ms) and the timeout moved by as much, so the margin the scenario left after its schedule
/// (timeout - schedule.duration) stays. Throws ScenarioError (file = source(), no line) when the
/// scenario has no schedule, or when the duration is not positive whole milliseconds, or shorter
/// than the longest fault the schedule can draw. Pure.
[[nodiscard]] Scenario with_schedule_duration(const Scenario& s, Duration duration);

/// The command workers' programs, looked up as the run will start them: argv[0] on PATH, or
/// relative to the worker's cwd; it must exist, be a regular file and be executable by this
/// process, and cwd must be a directory. Throws ScenarioError at the worker's `command:` naming the
/// worker and the path (exit 2 before anything starts). Reads the filesystem; not part of loading,
/// so that a stored run's scenario.json re-reads after its program is gone. Likewise kind http's
/// `start` program and `start_cwd` (docs/resource-http.md), at `resource.start`, unless the
/// program's path holds a placeholder ({bin_dir}...), which only the run resolves.
/// A known interpreter's script must name a readable file (worker_command.h, script_argument:
/// ScenarioError at that argument). Each command worker's account (resolve_worker_account with
/// AccountDefaults::from_environment(), or `defaults` when given) must exist and be able to enter
/// the cwd, execute the program and read the script (ScenarioError at `user:`, else at `command:`).
void check_worker_commands(const Scenario& scenario);
struct AccountDefaults;
void check_worker_commands(const Scenario& scenario, const AccountDefaults& defaults);
/// The absolute path check_worker_commands() finds for a command worker's argv[0]; nullopt when
/// there is none (not found, not executable).
[[nodiscard]] std::optional<std::filesystem::path> resolve_worker_program(const WorkerCommand& command);

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
/// YAML, every default filled in, durations in the loader's own spelling ("2s", "50ms"),
/// percentages as "2%", plus "source". Every worker has its "design" (the booleans and
/// token_source always; abort_on_pause, clock_offset, self_stop_at when set). Fields that belong
/// to another kind are left out (a counter job has no "segments", a sigstop fault no "quota", a
/// host network no subnet, a self-stop fault no trigger; a worker without its own key has no
/// "key"), so that scenario_from_json(to_json(s)) == s for every loadable s.
[[nodiscard]] nlohmann::json to_json(const Scenario& s);

/// Why the lock service `ls` cannot take fault `f` (issue 35), or nullopt when it can: what the
/// fault asks of the lock service's kind (faults::FaultKind::lock_service_needs) that the kind
/// cannot give: a clock-jump aimed at members of a kind that starts them without the clock shim
/// (locks::LockServiceKind::member_clock_problem: etcd), or a restart of a whole cluster on fresh
/// data (fresh_restart_problem). `field` is the fault item's field the refusal belongs at
/// ("target", "fresh_data"); `why` is the sentence, naming what is allowed instead. The loader
/// fails there; fencecheck run says it of a scenario moved to another kind by --lock-service
/// (harness::missing_prerequisites: the scenario is then unavailable). Nothing for the user's lock
/// service (endpoints: no fault acts on it). Pure.
struct LockServiceRefusal {
  std::string field;
  std::string why;
};
[[nodiscard]] std::optional<LockServiceRefusal> lock_service_refusal(const FaultSpec& f, const LockServiceSpec& ls);

/// The same plan against another lock-service kind (`fencecheck run --lock-service KIND`, so that
/// one suite runs against each lock service): lock_service.kind becomes `kind` and its config the
/// new kind's defaults; everything else is kept. Applies only to a scenario on the embedded lock
/// service that sets no field of its own kind. Throws ScenarioError (file = source(), no line)
/// saying why it cannot apply: an unknown kind (the known ones listed), lock_service.endpoints, a
/// kind-specific field, or a plan the new kind refuses (its lease_ttl rule: etcd takes whole
/// seconds). Pure.
[[nodiscard]] Scenario with_lock_service_kind(const Scenario& s, std::string_view kind);

/// Reads scenario.json back (what `fencecheck report` does): the same validation as a YAML file
/// (JSON is YAML), with "source" taken as source() (file_label when absent). Throws ScenarioError
/// located in `file_label` (line and column of the JSON as pretty-printed with 2-space indent).
[[nodiscard]] Scenario scenario_from_json(const nlohmann::json& j, std::string_view file_label = "scenario.json");

}  // namespace fencecheck::harness
