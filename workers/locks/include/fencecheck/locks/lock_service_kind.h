// fencecheck — the harness's side of the lock-service axis: one interface per lock-service kind,
// the kinds registered by name (docs/architecture.md, "The lock-service axis"; the same shape as
// the resource axis, fencecheck/resources/resource_kind.h, and Jepsen's DB protocol).
//
// A kind:
//  - validates its own `lock_service:` fields (parse(); errors keep file:line:col through
//    KindFields::fail). The loader itself owns the fields every kind shares: kind, endpoints,
//    lock, run_suffix, prior_revisions;
//  - starts an embedded server on loopback (or the network lab's lock-service address) with a
//    fresh data directory under the run directory, or connects to the user's endpoints, and waits
//    for health (open());
//  - gives what workers are told: the endpoint JSON (lock_client.h) and, for command workers,
//    FENCECHECK_LOCK_ENDPOINTS and the kind's own conventional variables (ETCDCTL_ENDPOINTS...);
//  - watches the issuer's own history of one lock (watch()): a lock.grant per grant and a
//    lock.delete per delete, with the token, telling an expiry from a release where the issuer
//    can (detail "expired" / "released"; "lost" after a restart on empty data; redis's "deleted",
//    a client's DEL, no expiry; no word when the kind cannot tell: etcd, zookeeper on endpoints);
//  - stops and restarts its embedded server (lock-service-restart), on the same data or a fresh
//    data directory, and says what that does to the token counter (restart_effect()).
//
// Kinds: etcd (workers/locks/etcd/), zookeeper (workers/locks/zookeeper/), redis
// (workers/locks/redis/), none (workers/locks/none/: a lock fencecheck does not manage; nothing
// started, no issuer history). The registry is a constant table (workers/locks/kinds.h's
// FC_LOCK_SERVICE_KINDS, one row per kind: static libraries drop self-registering objects), which
// register_lock_service_kind extends at run time (tests, out-of-tree kinds).
//
// Thread-safety: LockServiceKind objects are immutable and live as long as the program. A LockServiceInstance belongs
// to the orchestrator's main thread (it forks children: child_process.h); an IssuerWatch delivers
// events on a thread of its own.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fencecheck/proto/event.h"
#include "fencecheck/proto/net_address.h"
#include "fencecheck/proto/lock_members.h"  // MemberRole, MemberSelector, resolve_members: the member seam
#include "fencecheck/proto/kind_fields.h"  // KindFields: the loader's field reader, shared by every axis

namespace fencecheck::locks {

/// The environment lacks what the kind needs: its server binary ("redis-server not found: install
/// Debian's redis-server"), or none of the user's endpoints answers. The run's exit code 3.
class LockServiceUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// ---- members: a lock service run as a cluster (issue 35; docs/architecture.md, "Lock services as
// clusters: the member seam"). A single-process service (etcd, zookeeper, redis as embedded by
// default) has no members: members() is empty and every member call refuses. A cluster (etcd with
// lock_service.members: 3 or 5; redlock's independent masters) lists each member, numbered from 1
// for the whole run (a restarted member keeps its number, address and data directory).

/// One member of a clustered lock service, as the harness sees it at one moment. Value type.
struct LockServiceMember {
  int index = 0;           ///< 1-based, stable for the run
  int pid = 0;             ///< its process; 0 while it is down (stop_member) or not embedded
  std::string endpoint;    ///< as workers reach it, in the kind's spelling ("http://10.213.0.6:2379")
  std::string netns;       ///< the network namespace it runs in ("fc-<run>-ls1"); "" on the host's
  std::string address;     ///< the IP address it listens on ("10.213.0.6", "127.0.0.1")
  std::filesystem::path data_dir;  ///< its data directory (kept across stop_member/start_member)
  bool operator==(const LockServiceMember&) const = default;
};

/// Where one member of an embedded cluster runs, given by the orchestrator.
struct MemberPlace {
  std::string host = "127.0.0.1";  ///< the address it binds
  std::string netns;               ///< "" on the host's network; else its namespace (ip netns exec)
};

/// Where an instance runs, given by the orchestrator.
struct LockServiceRunContext {
  std::filesystem::path run_dir;  ///< embedded data directories go below it
  /// The log file of a named process ("etcd", "zookeeper", "redis"): RunDirectory::log_path.
  std::function<std::filesystem::path(const std::string&)> log_path;
  std::string run_id;
  /// The address an embedded server binds: 127.0.0.1, or the lab's lock-service address.
  std::string host = "127.0.0.1";
  /// In a network lab, the kind's own well-known port is free (its own namespace): use it.
  bool lab = false;
  /// The run's lock name (the plan's, after run_suffix). A kind whose ordering counter is per lock
  /// (redis: "<lock>:fence") needs it for advance(); etcd and zookeeper ignore it.
  std::string lock;
  /// lock_service.members (1: a single process, as before issue 35). A kind starts that many
  /// members (the loader checked LockServiceKind::check_members).
  int members = 1;
  /// With members > 1 under `network: namespaces`: one place per member, each its own namespace
  /// and address in the lab (so member-level partitions are real). Empty: every member on `host`
  /// (loopback), each on ports of its own.
  std::vector<MemberPlace> member_places;
  /// The plan moves a member's wall clock (a clock-jump under `faults:` or `schedule:`). A kind
  /// whose members take the clock shim only when asked (zookeeper: the JVM's every clock read then
  /// goes through the shim, about 35,000 calls to start) preloads it then; redlock always does.
  bool member_clock_faults = false;
};

/// The issuer's own history of one lock, running on a thread of its own from construction.
class IssuerWatch {
 public:
  virtual ~IssuerWatch() = default;
  /// Makes sure every change made before the call has been delivered (bounded: 5 s), then stops.
  /// Idempotent; never throws.
  virtual void stop() = 0;
  /// The server was restarted on empty data: its ordering numbers start over; pick the history up
  /// from the new server's beginning once the old connection breaks. Thread-safe.
  virtual void restarted_fresh() = 0;
};

/// How long a claim outlives its harness by default (RunClaim::ttl; lock_service.claim_ttl): a
/// killed harness's claim lapses by itself within its TTL (etcd: the lease's TTL, plus up to 0.5 s
/// for etcd's lessor; redis: the keys' PX; zookeeper: the session timeout). A held claim is
/// renewed every third of it.
inline constexpr std::chrono::seconds kClaimTtl{10};

/// What one run claims in a lock service it may share with other runs (docs/scenario-format.md,
/// "Runs that share a lock service"; issue 34 item 3): its lock name and, when the resource is the
/// user's, the resource keys its workers write. Two runs on one lock or one key judge each other's
/// writes (a lost-acknowledged-write caused by the other run's w2), so the second is refused before
/// any worker starts. Value type.
struct RunClaim {
  std::string run_id;
  std::string host;      ///< the harness's host name (gethostname)
  long pid = 0;          ///< the harness's pid
  std::string started;   ///< when the run started, ISO 8601 UTC ("2026-12-06T03:00:00Z")
  std::string scenario;
  std::string lock;      ///< the run's lock name (after run_suffix)
  std::string resource;  ///< the resource kind whose keys are claimed ("postgres"); "" when no keys
  std::vector<std::string> keys;  ///< the resource keys, sorted and unique; empty for an embedded resource
  /// How long the claim outlives a harness that stopped renewing it (killed): the scenario's
  /// lock_service.claim_ttl, kClaimTtl by default. 2 s or more (ZooKeeper's smallest session is
  /// 2 ticks); the kinds renew every third of it.
  std::chrono::seconds ttl = kClaimTtl;

  /// {"run_id","host","pid","started","scenario","lock","resource","keys","ttl_s"}: the claim's
  /// value in the lock service (another run's refusal says from ttl_s how soon it lapses). Pure.
  [[nodiscard]] nlohmann::json to_json() const;
  /// The inverse of to_json(); a field missing or of the wrong type is left at its default (a
  /// claim written by another version still names what it can). Never throws.
  [[nodiscard]] static RunClaim from_json(const nlohmann::json& j);
  /// The names this claim takes, each kind storing them under its own prefix: "lock/<lock>", then
  /// "key/<resource>/<key>" per key. Keys are scoped by the resource kind only (the lock service
  /// cannot tell two databases apart): two runs writing key "ledger" to two different PostgreSQL
  /// servers are refused too, on the safe side. Pure.
  [[nodiscard]] std::vector<std::string> names() const;
};


/// The sentence a refused run ends with (exit 3): which name `mine` wanted, the holder's run id,
/// host, pid, scenario and start (or that the holder's claim could not be read), where (`service`,
/// e.g. "etcd http://10.0.0.5:2379"), and how to isolate the run: lock_service.run_suffix: true
/// for a lock, keys of its own (job.key, workers[].key) for a resource key. `name` is one of
/// mine.names(). Pure.
[[nodiscard]] std::string claim_refusal_message(const RunClaim& mine, const std::string& name,
                                                const std::optional<RunClaim>& holder, const std::string& service);

/// Another run holds one of the names this run claims (exit 3 at the start: no worker started).
class ClaimRefused : public LockServiceUnavailable {
 public:
  ClaimRefused(std::string name, std::optional<RunClaim> holder, const std::string& message)
      : LockServiceUnavailable(message), name_(std::move(name)), holder_(std::move(holder)) {}
  /// The name refused (RunClaim::names()).
  [[nodiscard]] const std::string& name() const { return name_; }
  /// The holder's claim as read back; nullopt when it vanished or could not be read.
  [[nodiscard]] const std::optional<RunClaim>& holder() const { return holder_; }

 private:
  std::string name_;
  std::optional<RunClaim> holder_;
};

/// A claim held for one run: renewed on a thread of its own until released. The destructor
/// releases it.
class HeldClaim {
 public:
  virtual ~HeldClaim() = default;
  /// Deletes the claim's names (only while they are still this claim's) and stops renewing.
  /// Idempotent; never throws (a release that fails leaves the claim to lapse within its ttl).
  virtual void release() noexcept = 0;
  /// "" while the claim is held; otherwise why it lapsed during the run (a renewal found it gone):
  /// another run may then have started on the same names. Thread-safe.
  [[nodiscard]] virtual std::string lost() const = 0;
  /// One line for logs and claim.json: "etcd lease 694d8c2c5e9e1f04 (TTL 10 s) on
  /// fencecheck-claims/lock/staging/payments".
  [[nodiscard]] virtual std::string describe() const = 0;
};

/// One lock service for one run: embedded or the user's.
class LockServiceInstance {
 public:
  virtual ~LockServiceInstance() = default;
  /// What a reference worker is told (lock_client.h's endpoint JSON).
  [[nodiscard]] virtual nlohmann::json endpoint() const = 0;
  /// FENCECHECK_LOCK_ENDPOINTS for a command worker: comma-separated, in the kind's own spelling
  /// (etcd "http://h:p", zookeeper "h:p", redis "redis://h:p").
  [[nodiscard]] virtual std::string endpoints_text() const = 0;
  /// The kind's conventional variables for a command worker (etcd: ETCDCTL_ENDPOINTS and
  /// ETCDCTL_API; zookeeper: ZOOKEEPER_HOSTS; redis: REDIS_URL).
  [[nodiscard]] virtual std::map<std::string, std::string> worker_env() const = 0;
  /// One line for logs: "zookeeper 127.0.0.1:41234 (embedded, data zookeeper-data)".
  [[nodiscard]] virtual std::string describe() const = 0;
  /// True when the service answers.
  [[nodiscard]] virtual bool healthy() = 0;
  /// Starts watching the lock `name`'s grants and deletes (events with source "lock"), from now:
  /// nothing that happens after this returns is missed. Throws LockServiceUnavailable /
  /// std::runtime_error when the service does not answer.
  [[nodiscard]] virtual std::unique_ptr<IssuerWatch> watch(const std::string& name,
                                                           std::function<void(Event)> sink) = 0;
  /// Advances the issuer's ordering counter by `count` (lock_service.prior_revisions), so tokens
  /// start above it. Embedded only.
  virtual void advance(std::int64_t count) = 0;
  /// The embedded server's pid; 0 when external or stopped.
  [[nodiscard]] virtual int pid() const = 0;
  /// Stops the embedded server (SIGTERM): an outage. Idempotent.
  virtual void stop_server() = 0;
  /// Starts it again at the same address; with fresh_data on an empty data directory.
  virtual void start_server(bool fresh_data) = 0;
  /// Stops the embedded server for good (no-op for the user's). Idempotent; never throws.
  virtual void stop() noexcept = 0;
  // ---- members (a cluster; see LockServiceMember). Default: a single process, no members.
  /// Every member, by index; empty for a single-process service. Main thread.
  [[nodiscard]] virtual std::vector<LockServiceMember> members() const { return {}; }
  /// The member that leads now, asked of the service itself (etcd: the members' Status; zookeeper:
  /// `srvr`'s Mode). nullopt with `why` when there is none now (an election under way, a majority
  /// down) or the kind has none ("redlock has no leader: its masters are independent"); `why` also
  /// says, when there is one, whom the service asked ("etcd member 2's status: leader 1, term 3").
  /// Main thread; bounded by the kind's own timeouts (etcd: 1 s a member).
  [[nodiscard]] virtual std::optional<int> leader_member(std::string& why) {
    why = "a single-process lock service has no leader";
    return std::nullopt;
  }
  /// Ends member `index` (1-based): SIGKILL with kill9, else SIGTERM (then SIGKILL after the kind's
  /// grace). Its data directory stays. Throws std::out_of_range for an unknown index,
  /// std::logic_error for a service without members, std::runtime_error when it did not end.
  /// Idempotent for a member already down. Main thread.
  virtual void stop_member(int /*index*/, bool /*kill9*/) {
    throw std::logic_error("this lock service runs as one process: it has no members to stop");
  }
  /// Starts member `index` again on its own data directory at its own address, and returns once
  /// it answers (etcd: /health of that member, which needs a quorum; a member that cannot rejoin
  /// in the kind's start timeout throws std::runtime_error). No-op for a member that runs.
  /// Main thread.
  virtual void start_member(int /*index*/) {
    throw std::logic_error("this lock service runs as one process: it has no members to start");
  }
  /// Claims `claim`'s names (RunClaim::names) for the run, atomically (all or none), bound to a
  /// lease of kClaimTtl that the returned HeldClaim renews: etcd a txn putting
  /// "fencecheck-claims/<name>" only where absent (create_revision == 0); redis a Lua script
  /// setting "fencecheck-claims:<name>" only where absent, with PX; zookeeper ephemeral znodes
  /// "/fencecheck-claims/<name, '/' as %2F>" in one multi. Returns nullptr when this instance takes
  /// no claim, with the reason in `why`: an embedded server (no other run can reach it), or a kind
  /// that cannot (none: fencecheck talks to no lock service). Throws ClaimRefused when another run
  /// holds a name; LockServiceUnavailable when the service does not answer. Main thread.
  [[nodiscard]] virtual std::unique_ptr<HeldClaim> claim(const RunClaim& /*claim*/, std::string& why) {
    why = "this lock-service kind keeps no claims";
    return nullptr;
  }
};

/// What `fencecheck cleanup` found of a kind's embedded servers left running, and did.
struct OrphanReport {
  std::vector<std::string> said;  ///< one sentence per server found
  int not_stopped = 0;            ///< found orphaned and not proven stopped: cleanup exits 3
};

/// How one client library spells a lock of this kind (`lock_service.client`, issue 34 item 5):
/// the name a worker hands the library for the scenario's lock, and the keys the library makes.
/// The scenario's `lock` is always what the lock service sees (what the issuer watch watches);
/// the client's name is `add` + the lock without `strip` (which the lock must start with).
/// Plain data.
struct ClientLayout {
  std::string_view client;  ///< "python-etcd3", "v3lock", "kazoo"
  std::string_view strip;   ///< a prefix the library adds itself: python-etcd3's "/locks/"
  std::string_view add;     ///< a prefix the library wants that the lock name lacks: ZooKeeper's "/"
  std::string_view keys;    ///< the keys it makes, for errors and docs: "<lock>/<lease hex>"
};

/// The name to hand `layout`'s library for `lock` (which starts with layout.strip: the loader
/// checked). Pure.
[[nodiscard]] inline std::string client_lock_name(const ClientLayout& layout, const std::string& lock) {
  return std::string(layout.add) + lock.substr(std::min(lock.size(), layout.strip.size()));
}

class LockServiceKind {
 public:
  virtual ~LockServiceKind() = default;
  /// The registered name: "etcd", "zookeeper", "redis".
  [[nodiscard]] virtual std::string_view name() const = 0;
  /// The kind's own fields of `lock_service:` (besides the shared ones), in documentation order.
  [[nodiscard]] virtual std::vector<std::string_view> fields() const = 0;
  /// Validates the kind's own fields and returns them normalized (every default filled in).
  /// Throws through fields.fail().
  [[nodiscard]] virtual nlohmann::json parse(const KindFields& fields) const = 0;
  /// Checks one endpoint's spelling ("http://h:p" for etcd, "h:p" for zookeeper, "redis://h:p" for
  /// redis); the error message says what was expected, or "" when fine. Pure.
  [[nodiscard]] virtual std::string check_endpoint(std::string_view endpoint) const = 0;
  /// The kind's rule for the scenario's lease_ttl (already a positive whole number of
  /// milliseconds; `written` is how the scenario spelled it): the error message, or "" when fine.
  /// etcd: whole seconds (its lease TTLs are int64 seconds). Default: no rule of its own. Pure.
  [[nodiscard]] virtual std::string check_lease_ttl(std::chrono::milliseconds /*ttl*/, std::string_view /*written*/) const {
    return "";
  }
  /// Whether the reference worker's client of this kind can renew its lease or session from the
  /// job's own thread only (a worker design's `keepalive: inline`, starved together with the job
  /// under a CPU throttle): "" when it can, else why not, in one sentence. etcd and Redis can (the
  /// worker sends each renewal itself); ZooKeeper cannot (its C client pings from its own IO
  /// thread: docs/lock-service-zookeeper.md). The scenario loader refuses the combination in a
  /// scenario of this kind; a scenario moved to this kind by --lock-service is unavailable there
  /// (exit 3, or skipped with --skip-unavailable). Pure.
  [[nodiscard]] virtual std::string inline_keepalive_problem() const { return ""; }
  /// Whether fencecheck-worker (a worker without `command`) can take this kind's lock: "" when it
  /// can, else why not, in one sentence (redlock: it has no Redlock client). The loader refuses a
  /// worker without a command in a scenario of this kind, and --lock-service refuses to move a
  /// scenario with one to it. Kind none says its own sentence. Pure.
  [[nodiscard]] virtual std::string reference_client_problem() const { return ""; }
  /// lock_service.members: "" when the kind can run `count` members (count >= 1; 1 always can),
  /// else why not ("etcd runs 1, 3 or 5 members"). Pure.
  [[nodiscard]] virtual std::string check_members(int count) const {
    if (count == 1) return "";
    return "lock service kind " + std::string(name()) + " runs as one process (members: 1)";
  }
  /// lock_service.members when the scenario does not say (1; redlock: 5). Pure.
  [[nodiscard]] virtual int default_members() const { return 1; }
  /// The member roles a fault's `target: {lock_service: ...}` may name for this kind (etcd,
  /// zookeeper: all five; redlock: member, minority, majority). Default: all five. The loader
  /// refuses a role not listed, with no_role_reason(). Pure.
  [[nodiscard]] virtual std::vector<MemberRole> member_roles() const {
    return {MemberRole::kLeader, MemberRole::kFollower, MemberRole::kMember, MemberRole::kMinority, MemberRole::kMajority};
  }
  /// Why the kind has no `role` (one sentence: "redlock has no leader: its masters are
  /// independent"). Called only for a role member_roles() lacks. Pure.
  [[nodiscard]] virtual std::string no_role_reason(MemberRole role) const {
    return "lock service kind " + std::string(name()) + " has no " + std::string(to_string(role));
  }
  /// Whether a fault that moves one member's wall clock (clock-jump) can act on this kind's
  /// embedded members: "" when each member runs with fencecheck's clock shim preloaded
  /// (faults/clockshim/clock_shim.cpp, an LD_PRELOAD library: redlock's masters, ZooKeeper's
  /// ensemble members), else why not, in one sentence (etcd: Go reads the clock past libc). The
  /// loader refuses a clock-jump aimed at this kind's members with it; a scenario moved to this kind
  /// by --lock-service is unavailable there. Default: the kind starts no member with the shim. Pure.
  [[nodiscard]] virtual std::string member_clock_problem() const {
    return "lock service kind " + std::string(name()) + " does not start its members with fencecheck's clock shim";
  }
  /// Whether the whole embedded service, run as `members` members (>= 1), can restart on fresh data
  /// (a lock-service-restart with fresh_data: true and target lock-service): "" when it can, else
  /// why not, in one sentence. Default: one process can; a cluster cannot (every member's data
  /// wiped at once, the history's majority with it: a new cluster, not a restart). The loader
  /// refuses the fault with it; a scenario moved to this kind by --lock-service is unavailable
  /// there. Pure.
  [[nodiscard]] virtual std::string fresh_restart_problem(int members) const {
    if (members <= 1) return "";
    return "a restart of all " + std::to_string(members) + " " + std::string(name()) +
           " members on empty data directories wipes every copy of the history at once (a majority's included), "
           "so nothing can bring it back: that is a new cluster, not a restart";
  }
  /// Whether this kind's members talk to each other, so that a partition from: members (the
  /// members hit cut from the others, their clients still reaching them) cuts something: "" when
  /// they do (etcd's Raft peers, ZooKeeper's quorum), else why not, in one sentence (redlock: its
  /// masters are independent). The loader refuses such a partition with it, at `from`. Default:
  /// they do. Pure.
  [[nodiscard]] virtual std::string member_peer_problem() const { return ""; }
  /// The client libraries whose key layout this kind knows (`lock_service.client`), first the
  /// kind's own recipe. Default: none (the field is then refused). Pure.
  [[nodiscard]] virtual std::vector<ClientLayout> clients() const { return {}; }
  /// What the fencing token is (for reports and docs): "the lock key's create_revision".
  [[nodiscard]] virtual std::string token_description() const = 0;
  /// What a restart does to the token counter, on the same data and on fresh data (docs, report).
  [[nodiscard]] virtual std::string restart_effect(const nlohmann::json& config) const = 0;
  /// Starts (no endpoints) or connects to (endpoints) the service and waits until it answers.
  /// Throws LockServiceUnavailable (exit 3) naming the binary or the endpoints and how to fix it.
  /// Main thread only.
  [[nodiscard]] virtual std::unique_ptr<LockServiceInstance> open(const std::vector<std::string>& endpoints,
                                                                  const nlohmann::json& config,
                                                                  const LockServiceRunContext& ctx) const = 0;
  // ---- network: namespaces with the user's lock service: the lab's relay (docs/architecture.md,
  // "Relays"). The harness relays each endpoint's address from the lab's lock-service address and
  // workers get endpoint_at() of it; the harness itself (health, the issuer watch) talks to the
  // real endpoint. A kind that does not override these cannot be relayed.
  /// The TCP address one of the scenario's endpoints (check_endpoint() accepted it, or the
  /// instance's own spelling of it) connects to. nullopt with *why set when it cannot be relayed.
  /// Pure.
  [[nodiscard]] virtual std::optional<NetAddress> endpoint_address(std::string_view /*endpoint*/, std::string* why) const {
    *why = "lock service kind " + std::string(name()) + " does not say how its endpoints are reached, so they cannot be "
           "relayed into network: namespaces";
    return std::nullopt;
  }
  /// `endpoint` spelled at `at` (the relay's address) in the kind's own form. Pure.
  [[nodiscard]] virtual std::string endpoint_at(std::string_view endpoint, const NetAddress& /*at*/) const {
    return std::string(endpoint);
  }
  /// `fencecheck cleanup`: ends an embedded server of this kind that a dead harness left running
  /// for the run directory `run_dir` (each kind records its own server there); one sentence per
  /// server found, and how many it could not prove stopped (their record is kept, so that the
  /// next cleanup retries). One whose harness still runs is left alone unless `force`. The default
  /// finds nothing (a server that PR_SET_PDEATHSIG always takes along with its harness). Never
  /// throws.
  [[nodiscard]] virtual OrphanReport stop_orphans(const std::filesystem::path& /*run_dir*/, bool /*force*/) const {
    return {};
  }
};

/// The kind registered under `name` (built in or registered at run time), or nullptr. Thread-safe.
[[nodiscard]] const LockServiceKind* find_lock_service_kind(std::string_view name);
/// Every registered name: the built-in table's order ("etcd", "zookeeper", "redis", "redlock", "none"), then
/// the kinds registered at run time in registration order. Thread-safe.
[[nodiscard]] std::vector<std::string_view> lock_service_kind_names();
/// Adds `kind` to the registry at run time, after the built-in table, so that the scenario loader
/// and the harness find it by name like a built-in kind (the worker side's make_lock_client does
/// not: a kind registered this way is for command workers). For tests and out-of-tree kinds; the
/// built-in kinds are rows of workers/locks/kinds.h. `kind` must outlive every later use of the
/// registry (a static). Throws std::invalid_argument when a kind of that name is already
/// registered (nothing is then added). Thread-safe; there is no unregistration.
void register_lock_service_kind(const LockServiceKind& kind);
/// stop_orphans of every registered kind for one run directory: the sentences in registry order,
/// and the sum of what was not stopped.
[[nodiscard]] OrphanReport stop_orphaned_lock_services(const std::filesystem::path& run_dir, bool force);

}  // namespace fencecheck::locks
