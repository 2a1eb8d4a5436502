// The redlock lock-service kind (lock_service_kind.h): Redlock over independent Redis masters
// (https://redis.io/docs/latest/develop/use/patterns/distributed-locks/), each an embedded
// redis-server 7 with the clock shim preloaded (so that the clock-jump fault can move one master's
// wall clock: fencecheck/faults/clock_offset.h), or the user's masters; the issuer's history from
// every master (redlock_watch.h); and, since Redlock gives no fencing token, an embedded etcd
// beside the masters whose store revision is the linearizable counter a correct client takes its
// token from. docs/lock-service-redlock.md is the user's side of this file.
//
//   lock_service:
//     kind: redlock
//     counter: etcd | none   # etcd (default): an embedded etcd for fencing tokens
//                            # (FENCECHECK_TOKEN_COUNTER); none: no counter at all
//     clock_drift: 1%        # Redlock's clock drift factor, handed to workers
//                            # (REDLOCK_DRIFT_FACTOR): validity = TTL - elapsed - drift
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "../kinds.h"
#include "../redis/embedded_redis.h"
#include "../redis/redis_connection.h"
#include "fencecheck/faults/clock_offset.h"
#include "fencecheck/locks/lock_service_kind.h"
#include "fencecheck/proto/units.h"
#include "redlock_watch.h"

namespace fencecheck::locks {
namespace {

namespace fs = std::filesystem;
using redis_detail::EmbeddedRedis;
using redis_detail::Endpoint;

/// Redlock's own example deployment: five masters (redis.io, "The Redlock algorithm").
constexpr int kDefaultMasters = 5;
/// In a network lab each master listens on Redis's own port at the address of its own namespace
/// (member_places, which the orchestrator gives for every embedded cluster); a caller that gives
/// no places gets the masters on the lab's lock-service address, ports 6379, 6380, ...
constexpr int kLabFirstPort = 6379;
const std::vector<std::string_view> kCounters{"etcd", "none"};

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

/// One embedded master: its server and the file that moves its wall clock.
struct Master {
  int index = 0;
  fs::path data_dir;
  std::string netns;  ///< its own network namespace (network: namespaces), else ""
  std::unique_ptr<faults::ClockOffsetFile> clock;  ///< null when the shim is not built
  std::unique_ptr<EmbeddedRedis> server;
};

class RedlockInstance final : public LockServiceInstance {
 public:
  /// Embedded masters (endpoints empty) or the user's.
  RedlockInstance(const nlohmann::json& config, const LockServiceRunContext& ctx, std::vector<Endpoint> user_masters)
      : ctx_(ctx), config_(config) {
    if (user_masters.empty()) {
      start_masters(ctx_.members > 1 ? ctx_.members : kDefaultMasters);
    } else {
      endpoints_ = std::move(user_masters);
    }
    if (config_.value("counter", "etcd") == "etcd") {
      const LockServiceKind* etcd = find_lock_service_kind("etcd");
      if (etcd == nullptr) throw std::logic_error("redlock: the etcd lock-service kind is not registered");
      // One etcd process, whatever the masters' count: lock_service.members counts the masters
      // (the context's members and member places are theirs, not the counter's).
      LockServiceRunContext counter_ctx = ctx_;
      counter_ctx.members = 1;
      counter_ctx.member_places.clear();
      counter_ = etcd->open({}, nlohmann::json::object(), counter_ctx);
      counter_url_ = counter_->endpoints_text();
    }
  }
  ~RedlockInstance() override { stop(); }

  nlohmann::json endpoint() const override {
    nlohmann::json j{{"kind", "redlock"}, {"endpoints", urls()}, {"drift_factor", drift_factor()}};
    if (!counter_url_.empty()) j["counter"] = counter_url_;
    return j;
  }
  std::string endpoints_text() const override { return join(urls(), ","); }
  std::map<std::string, std::string> worker_env() const override {
    std::map<std::string, std::string> env{{"REDIS_URLS", endpoints_text()},
                                           {"REDLOCK_DRIFT_FACTOR", nlohmann::json(drift_factor()).dump()}};
    if (!counter_url_.empty()) env["FENCECHECK_TOKEN_COUNTER"] = counter_url_;
    return env;
  }
  std::string describe() const override {
    std::string s = "redlock over " + std::to_string(endpoints_.size()) + " " +
                    (masters_.empty() ? "masters of the user's" : "embedded masters") + " (" + endpoints_text() + ")";
    if (!masters_.empty()) s += masters_.front().clock ? ", clock shim preloaded" : ", no clock shim (clock-jump unavailable)";
    s += counter_ ? "; token counter: " + counter_->describe() : "; no token counter";
    return s;
  }
  bool healthy() override {
    int up = 0;
    for (const auto& ep : endpoints_) up += redis_detail::pings(ep, nullptr) ? 1 : 0;
    return up >= redlock_detail::quorum(static_cast<int>(endpoints_.size())) && (!counter_ || counter_->healthy());
  }
  std::unique_ptr<IssuerWatch> watch(const std::string& name, std::function<void(Event)> sink) override {
    return std::make_unique<redlock_detail::RedlockWatch>(endpoints_, name, std::move(sink));
  }
  /// prior_revisions advances the token counter (etcd's revisions), the only ordering there is.
  void advance(std::int64_t count) override {
    if (count <= 0) return;
    if (!counter_) throw std::logic_error("redlock with counter: none has no counter to advance (prior_revisions)");
    counter_->advance(count);
  }
  int pid() const override {
    return masters_.empty() || !masters_.front().server ? 0 : masters_.front().server->pid();
  }
  /// Every master stops (an outage of the whole service); the counter keeps running.
  void stop_server() override {
    if (masters_.empty()) throw std::logic_error("the redlock masters are the user's: not stopping them");
    for (auto& m : masters_) m.server->stop();
  }
  /// Every master starts again at its address. Without persistence a master always starts empty,
  /// so fresh_data changes nothing but the log line.
  void start_server(bool fresh_data) override {
    if (masters_.empty()) throw std::logic_error("the redlock masters are the user's: not starting them");
    for (auto& m : masters_) start_master(m);
    spdlog::info("redlock: {} masters started again{}", masters_.size(), fresh_data ? " (empty, as always)" : "");
  }
  void stop() noexcept override {
    for (auto& m : masters_)
      if (m.server) m.server->stop();
    if (counter_) counter_->stop();
  }

  // ---- members (the member seam): each master is a member, numbered from 1 in endpoint order.
  std::vector<LockServiceMember> members() const override {
    std::vector<LockServiceMember> out;
    for (std::size_t i = 0; i < endpoints_.size(); ++i) {
      LockServiceMember m;
      m.index = static_cast<int>(i) + 1;
      m.endpoint = endpoints_[i].url();
      m.address = endpoints_[i].host;
      if (i < masters_.size()) {
        m.pid = masters_[i].server->pid();
        m.netns = masters_[i].netns;
        m.data_dir = masters_[i].data_dir;
      }
      out.push_back(std::move(m));
    }
    return out;
  }
  std::optional<int> leader_member(std::string& why) override {
    why = "redlock has no leader: its masters are independent";
    return std::nullopt;
  }
  /// kill -9 (or SHUTDOWN NOSAVE / SIGTERM) of one master; it comes back empty (no persistence).
  void stop_member(int index, bool kill9) override {
    Master& m = master(index);
    if (kill9) m.server->kill();
    else m.server->stop();
  }
  void start_member(int index) override { start_master(master(index)); }

 private:
  Master& master(int index) {
    if (masters_.empty()) throw std::logic_error("the redlock masters are the user's: fencecheck does not stop or start them");
    if (index < 1 || index > static_cast<int>(masters_.size()))
      throw std::out_of_range("redlock has no member " + std::to_string(index) + " (members 1.." +
                              std::to_string(masters_.size()) + ")");
    return masters_[static_cast<std::size_t>(index) - 1];
  }

  double drift_factor() const { return parse_percent(config_.value("clock_drift", "1%")).value_or(0.01); }

  std::vector<std::string> urls() const {
    std::vector<std::string> out;
    for (const auto& ep : endpoints_) out.push_back(ep.url());
    return out;
  }

  void start_masters(int count) {
    const fs::path shim = faults::clock_shim_library();
    if (shim.empty())
      spdlog::warn("redlock: libfencecheck-clockshim.so is not beside fencecheck: the masters run without it, and a "
                   "clock-jump fault cannot act on them");
    for (int i = 1; i <= count; ++i) {
      Master m;
      m.index = i;
      m.data_dir = ctx_.run_dir / ("redlock-data-" + std::to_string(i));
      fs::create_directories(m.data_dir);
      redis_detail::EmbeddedRedisOptions o;
      o.host = ctx_.host;
      o.port = ctx_.lab ? kLabFirstPort + i - 1 : 0;
      if (static_cast<std::size_t>(i) <= ctx_.member_places.size()) {
        // network: namespaces: each master in a namespace of its own, at its own lab address, on
        // Redis's own port (free there), so member-level partitions are real.
        const MemberPlace& place = ctx_.member_places[static_cast<std::size_t>(i) - 1];
        o.host = place.host;
        o.port = kLabFirstPort;
        m.netns = place.netns;
        if (!place.netns.empty()) o.prefix = {"ip", "netns", "exec", place.netns};
      }
      if (!shim.empty()) {
        m.clock = std::make_unique<faults::ClockOffsetFile>(m.data_dir / "clock-offset");
        o.env = {{"LD_PRELOAD", shim.string()}, {faults::kClockFileVariable, m.clock->path().string()}};
      }
      m.server = std::make_unique<EmbeddedRedis>(std::move(o));
      start_master(m);
      endpoints_.push_back(m.server->endpoint());
      masters_.push_back(std::move(m));
    }
  }

  void start_master(Master& m) {
    if (m.server->running()) return;
    const std::string name = "redlock-" + std::to_string(m.index);
    const fs::path log = ctx_.log_path ? ctx_.log_path(name) : ctx_.run_dir / "logs" / (name + ".log");
    m.server->start(m.data_dir, log);
    spdlog::info("redlock master {} at {} (data {})", m.index, m.server->endpoint().url(), m.data_dir.string());
  }

  LockServiceRunContext ctx_;
  nlohmann::json config_;
  std::vector<Master> masters_;      ///< embedded; empty with the user's masters
  std::vector<Endpoint> endpoints_;  ///< every master, in member order
  std::unique_ptr<LockServiceInstance> counter_;
  std::string counter_url_;
};

class RedlockKind final : public LockServiceKind {
  static const LockServiceKind& redis() { return detail::redis_kind(); }

 public:
  std::string_view name() const override { return "redlock"; }
  /// Redlock's majority wants an odd count of independent masters; 5 is its description's own.
  std::string check_members(int count) const override {
    if (count == 3 || count == 5 || count == 7) return "";
    return "redlock runs 3, 5 or 7 independent masters (an odd count: a majority of an even count tolerates no "
           "more failures than the odd count below it), got " + std::to_string(count);
  }
  int default_members() const override { return kDefaultMasters; }
  std::string reference_client_problem() const override {
    return "fencecheck-worker has no Redlock client: redlock's workers are commands (the example "
           "workers/examples/redlock-node uses node-redlock; docs/lock-service-redlock.md)";
  }
  std::vector<MemberRole> member_roles() const override {
    return {MemberRole::kMember, MemberRole::kMinority, MemberRole::kMajority};
  }
  std::string no_role_reason(MemberRole role) const override {
    return "redlock has no " + std::string(to_string(role)) + ": its masters are independent (aim at member: N, "
           "minority or majority)";
  }
  /// Every embedded master runs with the clock shim (start_masters).
  std::string member_clock_problem() const override { return ""; }
  /// A partition from: members cuts the links between masters, and there are none.
  std::string member_peer_problem() const override {
    return "its masters are independent Redis servers that never talk to each other (Redlock replicates nothing "
           "between them)";
  }
  /// A master keeps nothing (no persistence): every restart is on empty data, fresh_data or not.
  std::string fresh_restart_problem(int /*members*/) const override { return ""; }
  std::vector<ClientLayout> clients() const override {
    // node-redlock's acquire([name]) and Redis's own description both use the name as the key on
    // every master.
    return {{"redlock", "", "", "<lock> on every master"}};
  }
  std::vector<std::string_view> fields() const override { return {"counter", "clock_drift"}; }
  nlohmann::json parse(const KindFields& f) const override {
    nlohmann::json out = nlohmann::json::object();
    out["counter"] = f.has("counter") ? std::string(kCounters[f.choice("counter", kCounters, "redlock token counter")]) : "etcd";
    // As written ("1%"): the normalized config is read again as fields (scenario.json).
    out["clock_drift"] = format_percent(f.has("clock_drift") ? f.percentage("clock_drift", 0.0, 50.0, "1%") : 0.01);
    return out;
  }
  // Each master is spelled, reached and relayed as the redis kind's one server ("redis://h:p").
  std::string check_endpoint(std::string_view endpoint) const override { return redis().check_endpoint(endpoint); }
  std::optional<NetAddress> endpoint_address(std::string_view endpoint, std::string* why) const override {
    return redis().endpoint_address(endpoint, why);
  }
  std::string endpoint_at(std::string_view endpoint, const NetAddress& at) const override {
    return redis().endpoint_at(endpoint, at);
  }
  std::string token_description() const override {
    return "none from Redlock itself (a random value per holding); counter: etcd gives workers an embedded etcd "
           "whose store revision (a put's header revision) is the fencing token a correct client takes after "
           "acquiring";
  }
  std::string restart_effect(const nlohmann::json& config) const override {
    std::string s = "the masters keep nothing (no persistence): a master restarted loses the keys it held, which "
                    "Redlock's own description answers with delayed restarts; ";
    s += config.value("counter", "etcd") == "etcd"
             ? "the token counter (etcd) is not restarted with them, so tokens keep rising"
             : "there is no token to lose";
    return s;
  }
  std::unique_ptr<LockServiceInstance> open(const std::vector<std::string>& endpoints, const nlohmann::json& config,
                                            const LockServiceRunContext& ctx) const override {
    std::vector<Endpoint> masters;
    std::string tried;
    for (const auto& url : endpoints) {
      std::string why;
      auto ep = redis_detail::parse_endpoint(url, &why);
      if (!ep || !redis_detail::pings(*ep, &why)) {
        tried += (tried.empty() ? "" : "; ") + url + ": " + why;
        continue;
      }
      try {
        redis_detail::ensure_notifications(*ep);
      } catch (const LockServiceError& err) {
        throw LockServiceUnavailable("redlock master " + url + " answers, but its keyspace notifications cannot be "
                                     "enabled (the lock watch needs them: notify-keyspace-events Kg$x): " + err.what());
      }
      masters.push_back(*ep);
    }
    if (!endpoints.empty() && !tried.empty())
      throw LockServiceUnavailable("redlock: every master must answer at the start (the watch reads each); " + tried);
    if (endpoints.empty() && !redis_detail::find_redis_server().empty()) {
      // embedded: below
    } else if (endpoints.empty()) {
      throw LockServiceUnavailable("redis-server not found on PATH: install Debian's redis-server (scripts/install-deps.sh "
                                   "redis), or give lock_service.endpoints (the masters)");
    }
    return std::make_unique<RedlockInstance>(config, ctx, std::move(masters));
  }
};

}  // namespace

namespace detail {

const LockServiceKind& redlock_kind() {
  static const RedlockKind kind;
  return kind;
}

}  // namespace detail
}  // namespace fencecheck::locks
