// The lock-service kind "zookeeper" (lock_service_kind.h; docs/lock-service-zookeeper.md).
//
//   lock_service:
//     kind: zookeeper
//     tick_time: 100ms        # the embedded server's tickTime (10ms..5s); not with endpoints
//     members: 3              # an embedded ensemble of 3 (or 5) servers (issue 35); 1 by default
//     init_limit: 50          # ensemble only: initLimit in ticks (2..1000)
//     sync_limit: 20          # ensemble only: syncLimit in ticks (2..1000)
//     endpoints: [h:p, ...]   # optional: the user's ensemble instead of the embedded server
//
// Without endpoints the harness runs its own standalone ZooKeeper 3.8 (embedded_zookeeper.h) on a
// free port of the run's host with a fresh data directory, or with members: 3 an ensemble
// (ZooKeeperEnsemble, the member seam: members(), leader_member() from `srvr`, stop_member /
// start_member on the member's own data); workers get
// {"kind":"zookeeper","endpoints":["h:p"]} (lock_client.h), command workers ZOOKEEPER_HOSTS and
// FENCECHECK_LOCK_ENDPOINTS ("h:p,h:p": the connection string of the C client, kazoo and Curator).
// Token: the lock znode's czxid (zookeeper_lock_client.h says why). History: zookeeper_watch.h.
// prior_revisions (advance): that many setData transactions on /fencecheck-prior-revisions, outside
// every lock znode, so the zxids (tokens) start above it.
#include <algorithm>
#include <memory>
#include <optional>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "embedded_zookeeper.h"
#include "fencecheck/faults/clock_offset.h"
#include "kinds.h"
#include "zk_handle.h"
#include "zookeeper_watch.h"

namespace fencecheck::locks::zk {
namespace {

using namespace std::chrono_literals;

constexpr const char* kAdvancePath = "/fencecheck-prior-revisions";
constexpr Millis kDefaultTick{100};
/// An ensemble's initLimit and syncLimit in ticks (embedded_zookeeper.h, ZooKeeperEnsemble): 5 s
/// for a follower to sync with a new leader (a JVM on a busy 2-core machine), 2 s without its
/// leader's ping before a follower gives it up.
constexpr int kDefaultInitLimit = 50;
constexpr int kDefaultSyncLimit = 20;

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

/// The normalized tick_time ("100ms", parse()'s spelling), or the default.
Millis tick_of(const nlohmann::json& config) {
  if (!config.is_object() || !config.contains("tick_time") || !config["tick_time"].is_string()) return kDefaultTick;
  try {
    return Millis(std::stol(config["tick_time"].get<std::string>()));
  } catch (const std::logic_error&) {
    return kDefaultTick;
  }
}

/// An ensemble's init_limit / sync_limit (ticks) as parse() wrote it, or `fallback`.
int limit_of(const nlohmann::json& config, const char* field, int fallback) {
  if (!config.is_object() || !config.contains(field) || !config[field].is_number_integer()) return fallback;
  return config[field].get<int>();
}

/// Where a run's claim names go: one persistent parent outside every lock znode, one ephemeral
/// child per name.
constexpr const char* kClaimRoot = "/fencecheck-claims";

/// A claim name as one znode name: '%' and '/' percent-encoded ("lock/a/b" -> "lock%2Fa%2Fb").
std::string claim_znode(const std::string& name) {
  std::string out = std::string(kClaimRoot) + "/";
  for (char c : name) {
    if (c == '%') out += "%25";
    else if (c == '/') out += "%2F";
    else out += c;
  }
  return out;
}

/// A run's claim in the user's ensemble (LockServiceInstance::claim): an ephemeral znode per name
/// under kClaimRoot, owned by a session of the claim's TTL that the C client keeps alive from its own
/// thread (the server may negotiate another timeout within its [2, 20] x tickTime: describe()
/// says the one granted). Release deletes the znodes and closes the session; a killed harness's
/// session expires and takes them along.
class ZooKeeperHeldClaim final : public HeldClaim {
 public:
  ZooKeeperHeldClaim(std::unique_ptr<Handle> session, std::vector<std::string> paths)
      : session_(std::move(session)), paths_(std::move(paths)) {}
  ~ZooKeeperHeldClaim() override { release(); }

  void release() noexcept override {
    if (!session_) return;
    for (const auto& p : paths_) (void)session_->remove(p, -1, 5s);
    session_.reset();  // zookeeper_close: the session ends, with whatever ephemeral znode is left
  }

  std::string lost() const override {
    if (session_ && session_->expired())
      return "its ZooKeeper session " + session_hex(session_->session_id()) + " expired";
    return "";
  }

  std::string describe() const override {
    if (!session_) return "zookeeper claim (released)";
    return session_->what() + " session " + session_hex(session_->session_id()) + " (timeout " +
           std::to_string(session_->negotiated().count()) + " ms) with ephemeral " + joined(paths_);
  }

 private:
  std::unique_ptr<Handle> session_;
  std::vector<std::string> paths_;
};

class ZooKeeperInstance final : public LockServiceInstance {
 public:
  /// Embedded: one standalone server, or an ensemble of ctx.members servers (issue 35).
  ZooKeeperInstance(const nlohmann::json& config, const LockServiceRunContext& ctx)
      : expiries_(std::make_shared<ExpiryLog>()) {
    if (ctx.members > 1) {
      ZooKeeperEnsemble::Options eo;
      eo.members = ctx.members;
      for (const auto& p : ctx.member_places) eo.places.push_back({p.host, p.netns});
      eo.host = ctx.host;
      eo.run_dir = ctx.run_dir;
      eo.log_path = ctx.log_path;
      eo.tick_time = tick_of(config);
      eo.init_limit = limit_of(config, "init_limit", kDefaultInitLimit);
      eo.sync_limit = limit_of(config, "sync_limit", kDefaultSyncLimit);
      // Only when the plan moves a member's clock: the shim costs the JVM a call of its own for
      // every clock read (docs/lock-service-zookeeper.md, "Clock faults").
      if (ctx.member_clock_faults) eo.clock_shim = faults::clock_shim_library();
      if (ctx.member_clock_faults && eo.clock_shim.empty())
        spdlog::warn("zookeeper: libfencecheck-clockshim.so is not beside fencecheck: the ensemble's members run "
                     "without it, and a clock-jump fault cannot act on them");
      ensemble_ = std::make_unique<ZooKeeperEnsemble>(std::move(eo));
      for (const auto& l : ensemble_->logs()) expiries_->add(l);
      endpoints_ = ensemble_->endpoints();
      return;
    }
    process::EmbeddedOptions o;
    o.run_dir = ctx.run_dir;
    o.log_path = ctx.log_path;
    o.run_id = ctx.run_id;
    o.host = ctx.host;
    if (ctx.lab) o.port = 2181;  // the lab's lock-service address is the server's own: its usual port
    server_ = std::make_unique<EmbeddedZooKeeper>(std::move(o), tick_of(config));
    expiries_->add(server_->logs().back());
    endpoints_ = {server_->endpoint()};
  }
  /// The user's servers: answers or throws LockServiceUnavailable.
  explicit ZooKeeperInstance(std::vector<std::string> endpoints) : endpoints_(std::move(endpoints)) {
    // A refused TCP connection fails at once; the client itself would retry until its timeout.
    const bool any_listens = std::any_of(endpoints_.begin(), endpoints_.end(), [](const std::string& e) {
      return four_letter_word(e, "srvr", 2s).has_value();
    });
    if (!any_listens)
      throw LockServiceUnavailable("lock_service endpoints: nothing answers at " + joined(endpoints_) +
                                   "; is a ZooKeeper server listening there?");
    try {
      Handle probe(joined(endpoints_), 10s, 5s, "zookeeper " + joined(endpoints_));
    } catch (const std::runtime_error& e) {
      throw LockServiceUnavailable(std::string("lock_service endpoints: ") + e.what() +
                                   "; is a ZooKeeper server listening there?");
    }
  }
  ~ZooKeeperInstance() override { stop(); }

  nlohmann::json endpoint() const override { return {{"kind", "zookeeper"}, {"endpoints", endpoints_}}; }
  std::string endpoints_text() const override { return joined(endpoints_); }
  std::map<std::string, std::string> worker_env() const override { return {{"ZOOKEEPER_HOSTS", joined(endpoints_)}}; }
  std::string describe() const override {
    if (ensemble_)
      return "zookeeper ensemble of " + std::to_string(ensemble_->size()) + " servers " + joined(endpoints_) +
             " (embedded, data zookeeper-data-1.." + std::to_string(ensemble_->size()) +
             (ensemble_->clock_shim() ? ", clock shim preloaded)" : ")");
    if (!server_) return "zookeeper " + joined(endpoints_) + " (endpoints)";
    return "zookeeper " + joined(endpoints_) + " (embedded, data " + server_->data_dir().filename().string() + ")";
  }

  bool healthy() override {
    if (ensemble_) {  // a member that serves (leader or follower) is in a quorum
      std::string why;
      return ensemble_->leader(why).has_value();
    }
    if (server_) {
      if (!server_->running()) return false;
      const auto reply = four_letter_word(server_->host(), server_->port(), "srvr", 2s);
      return reply && reply->find("Mode: ") != std::string::npos;
    }
    try {
      Handle probe(joined(endpoints_), 10s, 2s, "zookeeper " + joined(endpoints_));
      return true;
    } catch (const std::runtime_error&) {
      return false;
    }
  }

  std::unique_ptr<IssuerWatch> watch(const std::string& name, std::function<void(Event)> sink) override {
    try {
      return make_watch(joined(endpoints_), name, std::move(sink), expiries_);
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(std::string("zookeeper: ") + e.what());
    }
  }

  void advance(std::int64_t count) override {
    if (count <= 0) return;
    if (!server_ && !ensemble_) {
      spdlog::warn("zookeeper: prior_revisions advances the embedded server's zxid; {} has its own history",
                   joined(endpoints_));
      return;
    }
    Handle h(joined(endpoints_), 10s, 5s, "zookeeper " + joined(endpoints_));
    int rc = h.ensure_path(kAdvancePath, 5s);
    if (rc == ZOK) rc = h.advance_zxid(kAdvancePath, count, Millis(std::max<std::int64_t>(10000, count)));
    if (rc != ZOK) throw std::runtime_error(h.error("setData", kAdvancePath, rc) + " (prior_revisions)");
  }

  /// An ensemble: member 1's.
  int pid() const override {
    if (ensemble_) return ensemble_->pid(1);
    return server_ ? server_->pid() : 0;
  }

  void stop_server() override {
    if (ensemble_) {  // the whole ensemble down: every member, its data kept
      for (int i = 1; i <= ensemble_->size(); ++i) ensemble_->stop_member(i, false);
      return;
    }
    if (server_) server_->stop();
  }

  // ---- members (an ensemble: lock_service.members > 1)
  std::vector<LockServiceMember> members() const override {
    std::vector<LockServiceMember> out;
    if (!ensemble_) return out;
    for (int i = 1; i <= ensemble_->size(); ++i) {
      LockServiceMember m;
      m.index = i;
      m.pid = ensemble_->pid(i);
      m.endpoint = ensemble_->endpoint(i);
      m.netns = ensemble_->place(i).netns;
      m.address = ensemble_->place(i).host;
      m.data_dir = ensemble_->data_dir(i);
      out.push_back(std::move(m));
    }
    return out;
  }
  std::optional<int> leader_member(std::string& why) override {
    if (!ensemble_) return LockServiceInstance::leader_member(why);
    return ensemble_->leader(why);
  }
  void stop_member(int index, bool kill9) override {
    if (!ensemble_) return LockServiceInstance::stop_member(index, kill9);
    ensemble_->stop_member(index, kill9);
  }
  void start_member(int index) override {
    if (!ensemble_) return LockServiceInstance::start_member(index);
    ensemble_->start_member(index);
    const auto logs = ensemble_->logs();  // the member's new log: a leader it becomes writes expiries there
    for (const auto& l : logs) expiries_->add(l);
  }

  std::unique_ptr<HeldClaim> claim(const RunClaim& claim, std::string& why) override {
    if (server_ || ensemble_) {
      why = "the zookeeper is embedded: no other run can reach it";
      return nullptr;
    }
    const std::string where = "zookeeper " + joined(endpoints_);
    std::unique_ptr<Handle> session;
    try {
      session = std::make_unique<Handle>(joined(endpoints_), std::chrono::duration_cast<Millis>(claim.ttl), 5s, where);
    } catch (const std::runtime_error& err) {
      throw LockServiceUnavailable(std::string(err.what()) + ": cannot claim this run's lock and keys");
    }
    if (const int rc = session->ensure_path(kClaimRoot, 5s); rc != ZOK)
      throw LockServiceUnavailable(session->error("create", kClaimRoot, rc) + ": cannot claim this run's lock and keys");
    const std::string value = claim.to_json().dump();
    std::vector<std::string> created;
    // One create per name, not a multi: a name already held is read back at once. Two runs racing
    // for overlapping names may then both be refused (each holding one name a moment): never both
    // started.
    for (const auto& name : claim.names()) {
      const std::string path = claim_znode(name);
      const int rc = session->create(path, value, ZOO_EPHEMERAL, 5s).rc;
      if (rc == ZOK) {
        created.push_back(path);
        continue;
      }
      for (const auto& p : created) (void)session->remove(p, -1, 5s);
      if (rc != ZNODEEXISTS)
        throw LockServiceUnavailable(session->error("create", path, rc) + ": cannot claim this run's lock and keys");
      std::optional<RunClaim> holder;
      if (const auto held = session->get(path, 5s); held.rc == ZOK) {
        const auto parsed = nlohmann::json::parse(held.data, nullptr, false);
        if (!parsed.is_discarded()) holder = RunClaim::from_json(parsed);
      }
      throw ClaimRefused(name, holder, claim_refusal_message(claim, name, holder, where));
    }
    return std::make_unique<ZooKeeperHeldClaim>(std::move(session), std::move(created));
  }

  void start_server(bool fresh_data) override {
    if (ensemble_) {
      if (fresh_data)
        throw std::runtime_error("an embedded ZooKeeper ensemble restarts on its own data only (fresh data would be a "
                                 "new ensemble, not a restart)");
      ensemble_->start_all();
      for (const auto& l : ensemble_->logs()) expiries_->add(l);
      return;
    }
    if (!server_) throw std::logic_error("zookeeper: the user's servers (endpoints) are not the harness's to start");
    server_->start(fresh_data);
    expiries_->add(server_->logs().back());
  }

  void stop() noexcept override {
    if (ensemble_) ensemble_->stop();
    if (server_) server_->stop();
  }

 private:
  std::shared_ptr<ExpiryLog> expiries_;  // null with endpoints: their log is not ours to read
  std::unique_ptr<EmbeddedZooKeeper> server_;
  std::unique_ptr<ZooKeeperEnsemble> ensemble_;  // lock_service.members > 1 (server_ is then null)
  std::vector<std::string> endpoints_;
};

class ZooKeeperKind final : public LockServiceKind {
 public:
  std::string_view name() const override { return "zookeeper"; }
  std::vector<ClientLayout> clients() const override {
    // The ZooKeeper lock recipe: sequential ephemeral children of the lock's znode. kazoo's
    // Lock(path) names them <uuid>__lock__<seq>, Curator's InterProcessMutex(path)
    // _c_<uuid>-lock-<seq>; both take the znode's absolute path.
    return {{"recipe", "", "/", "/<lock>/<child>-<seq>"},
            {"kazoo", "", "/", "/<lock>/<uuid>__lock__<seq>"},
            {"curator", "", "/", "/<lock>/_c_<uuid>-lock-<seq>"}};
  }
  std::vector<std::string_view> fields() const override { return {"tick_time", "init_limit", "sync_limit"}; }
  /// 1 (a standalone server), or an ensemble of 3 or 5 (an odd size: ZooKeeper Administrator's
  /// Guide, "Clustered (Multi-Server) Setup": an even ensemble tolerates no more failures).
  std::string check_members(int count) const override {
    if (count == 1 || count == 3 || count == 5) return "";
    return "zookeeper runs 1 server or an ensemble of 3 or 5, got " + std::to_string(count);
  }

  /// Every ensemble member runs with the clock shim (ZooKeeperEnsemble::Options::clock_shim): the
  /// JVM reads the wall clock (System.currentTimeMillis) through libc's clock_gettime, which the
  /// shim replaces. Measured: docs/lock-service-zookeeper.md, "Clock faults".
  std::string member_clock_problem() const override { return ""; }
  nlohmann::json parse(const KindFields& f) const override {
    nlohmann::json out = nlohmann::json::object();
    Millis tick = kDefaultTick;
    // `endpoints: []` is the embedded server (what scenario.json writes for one); the loader has
    // already checked the list, so a list this reader refuses is the empty one.
    bool external = false;
    if (f.has("endpoints")) {
      try {
        external = !f.string_list("endpoints").empty();
      } catch (const std::exception&) {
        external = false;
      }
    }
    if (external) {  // the user's servers: nothing of the embedded one applies
      for (const char* field : {"tick_time", "init_limit", "sync_limit"})
        if (f.has(field))
          f.fail(field, std::string(field) + " configures the embedded ZooKeeper; with endpoints the servers' own "
                        "zoo.cfg sets it");
      return out;
    }
    // init_limit / sync_limit (ticks): an ensemble's (members: 3 or 5); a standalone server has none.
    const bool ensemble = f.has("members") && f.integer("members", 1, 9) > 1;
    for (const auto& [field, fallback] : {std::pair{"init_limit", kDefaultInitLimit}, std::pair{"sync_limit", kDefaultSyncLimit}}) {
      if (f.has(field) && !ensemble)
        f.fail(field, std::string(field) + " configures an ensemble's followers (lock_service.members: 3 or 5); a "
                      "standalone server has none");
      if (ensemble) out[field] = f.has(field) ? static_cast<int>(f.integer(field, 2, 1000)) : fallback;
    }
    if (f.has("tick_time")) {
      const auto ns = f.duration("tick_time");
      if (ns.count() % 1'000'000 != 0)
        f.fail("tick_time", "\"" + f.string("tick_time") + "\" is not a whole number of milliseconds (ZooKeeper's "
                            "tickTime is in milliseconds)");
      tick = std::chrono::duration_cast<Millis>(ns);
      if (tick < 10ms || tick > 5s)
        f.fail("tick_time", "must be 10ms..5s (the session clock: sessions expire up to one tick late, and the "
                            "shortest session timeout granted is two ticks)");
    }
    out["tick_time"] = std::to_string(tick.count()) + "ms";
    return out;
  }

  std::optional<NetAddress> endpoint_address(std::string_view endpoint, std::string* why) const override {
    return host_port_address(endpoint, why);
  }
  std::string endpoint_at(std::string_view /*endpoint*/, const NetAddress& at) const override { return at.text(); }

  std::string check_endpoint(std::string_view endpoint) const override {
    const std::string e(endpoint);
    const std::string expected = "expected host:port (a ZooKeeper client address, e.g. 127.0.0.1:2181), got \"" + e + "\"";
    if (e.find("://") != std::string::npos || e.find(',') != std::string::npos || e.find('/') != std::string::npos)
      return expected;
    const auto colon = e.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == e.size()) return expected;
    const std::string port = e.substr(colon + 1);
    if (port.size() > 5 || !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return expected;
    const long n = std::stol(port);
    if (n < 1 || n > 65535) return "port " + port + " of \"" + e + "\" is not 1..65535";
    return "";
  }

  std::string inline_keepalive_problem() const override {
    return "ZooKeeper's C client keeps the session alive from its own IO thread (a ping after a third of the "
           "session timeout), not from the job's thread, so a throttled job cannot starve its renewals: whether the "
           "session expires would be a race (docs/lock-service-zookeeper.md)";
  }

  std::string token_description() const override {
    return "the lock znode's czxid (the zxid of its create: zxids totally order every change to ZooKeeper)";
  }

  std::string restart_effect(const nlohmann::json& /*config*/) const override {
    return "same data: the server reloads its snapshot and transaction log and continues its zxid counter (a "
           "standalone server stays in epoch 0; in an ensemble every new leader raises the epoch, the zxid's high 32 "
           "bits), so the next token is larger; sessions are restored and get their whole timeout again. Fresh data: "
           "the zxid counter starts again at 0, every lock znode and session is gone, and the next token is lower "
           "than the ones before (token-regression)";
  }

  std::unique_ptr<LockServiceInstance> open(const std::vector<std::string>& endpoints, const nlohmann::json& config,
                                            const LockServiceRunContext& ctx) const override {
    if (!endpoints.empty()) return std::make_unique<ZooKeeperInstance>(endpoints);
    try {
      return std::make_unique<ZooKeeperInstance>(config, ctx);
    } catch (const LockServiceUnavailable&) {
      throw;
    } catch (const std::runtime_error& e) {
      throw LockServiceUnavailable(std::string("the embedded ZooKeeper: ") + e.what());
    }
  }

  OrphanReport stop_orphans(const std::filesystem::path& run_dir, bool force) const override {
    return stop_orphaned_zookeeper(run_dir, force);
  }
};

}  // namespace
}  // namespace fencecheck::locks::zk

namespace fencecheck::locks::detail {

const LockServiceKind& zookeeper_kind() {
  static const zk::ZooKeeperKind kind;
  return kind;
}

}  // namespace fencecheck::locks::detail
