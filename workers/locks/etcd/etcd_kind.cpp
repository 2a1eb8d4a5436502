// The etcd lock-service kind (lock_service_kind.h): an embedded etcd-server (Debian's etcd-server
// 3.4) or the user's cluster; the issuer's history from an etcd watch on the lock prefix.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include <spdlog/fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "fencecheck/process/child_process.h"  // find_on_path
#include "fencecheck/locks/etcd/embedded_etcd.h"
#include "fencecheck/locks/etcd/etcd_client.h"
#include "fencecheck/locks/lock_service_kind.h"
#include "fencecheck/locks/renewed_claim.h"
#include "kinds.h"

namespace fencecheck::locks {
namespace {

constexpr int kLabClientPort = 2379;  // etcd's IANA ports: free in a network namespace of our own
constexpr int kLabPeerPort = 2380;
/// Where prior_revisions' puts go: outside every lock prefix ("fencecheck/..."), so no watch sees it.
constexpr std::string_view kPriorRevisionsKey = "fencecheck-prior-revisions";

/// The issuer's history of one lock: the key "<lock>" itself and every key under "<lock>/".
///
/// Two layouts keep a lock there: etcd's v3lock (and `etcdctl lock`) puts "<lock>/<lease hex>",
/// python-etcd3's Lock puts the key "<lock>" itself (its lock named N is "/locks/N"). One etcd watch
/// on the range of keys that begin with "<lock>" covers both; a key that merely shares the prefix
/// ("<lock>x", "<lock>-2": another lock's) is read past, not reported (covers()).
///
/// Every put of a covered key becomes a `lock.grant` event (lock_key, lease_id, token = the key's
/// create_revision, revision) and every delete a `lock.delete` event (lock_key, token = the
/// deleted key's create_revision from prev_kv, lease_id, revision = the delete's revision). etcd's
/// watch does not say why a key was deleted: the checkers tell an expiry from a release by matching
/// a delete's revision with a worker's release.ok revision (analysis.h). Events reach `sink` on the
/// watch thread, in revision order.
class EtcdIssuerWatch final : public IssuerWatch {
 public:
  /// Whether `key` is one of lock `name`'s keys: `name` itself or a key under "<name>/".
  static bool covers(std::string_view name, std::string_view key) {
    return key.substr(0, name.size()) == name && (key.size() == name.size() || key[name.size()] == '/');
  }

  /// Starts watching lock `name`'s keys from the revision after the cluster's current one, and returns once
  /// that start revision is fixed (so nothing that happens after the constructor is missed).
  /// Throws std::runtime_error (an EtcdError) when etcd does not answer.
  EtcdIssuerWatch(std::string etcd_url, std::string name, std::function<void(Event)> sink)
      : url_(std::move(etcd_url)), prefix_(std::move(name)), sink_(std::move(sink)) {
    // "/locks/x/" and "/locks/x" name one lock (v3lock appends the '/' itself).
    while (prefix_.size() > 1 && prefix_.back() == '/') prefix_.pop_back();
    end_marker_ = prefix_ + "/~fencecheck-end";
    EtcdClient client(url_);
    // The cluster's current revision: a DeleteRange's header carries it (and removes a stale end
    // marker a crashed run may have left; deleting nothing changes no revision).
    start_revision_ = client.delete_key(end_marker_).revision + 1;
    seen_revision_ = start_revision_ - 1;
    thread_ = std::jthread([this](std::stop_token stop) { run(std::move(stop)); });
  }
  ~EtcdIssuerWatch() override { stop(); }

  void restarted_fresh() override { from_scratch_ = true; }

  /// Puts an end marker key under the prefix, waits until the watch has delivered it (so every
  /// earlier change has been delivered; bounded: 5 s), deletes it and stops the thread.
  void stop() override {
    if (!thread_.joinable()) return;
    // A watch delivers changes in revision order, so once it has seen our own end marker it has
    // delivered every change before it. The marker sorts after every lock key ('~' > hex digits)
    // and, being the newest key, never blocks a Lock call (Lock waits only on older keys).
    try {
      EtcdClient client(url_);
      const std::int64_t target = client.put(end_marker_, "end");
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (seen_revision_.load() < target && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      if (seen_revision_.load() < target)
        spdlog::warn("lock watch on {}: the end marker did not arrive within 5 s; the lock history may be short", prefix_);
      client.delete_key(end_marker_);
    } catch (const std::exception& err) {
      spdlog::warn("lock watch on {}: cannot place the end marker: {}", prefix_, err.what());
    }
    thread_.request_stop();
    thread_.join();
  }

 private:
  void run(std::stop_token stop) {
    EtcdClient watcher(url_);
    std::int64_t from = start_revision_;
    // An outage (a lock-service-restart fault, a partition) fails every 100 ms retry: one warning
    // when it starts, the retries at debug level, one line when events arrive again.
    int failures = 0;
    auto outage_began = std::chrono::steady_clock::now();
    const auto on_event = [&](const WatchEvent& w) {
      if (failures > 0) {
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - outage_began);
        spdlog::info("lock watch on {}: events arrive again after {} failed attempt(s) over {} ms", prefix_, failures, ms.count());
        failures = 0;
      }
      deliver(w, from);
    };
    while (!stop.stop_requested()) {
      try {
        watcher.watch(prefix_, from, on_event, stop);
      } catch (const std::exception& err) {
        if (stop.stop_requested()) break;
        if (from_scratch_.exchange(false)) {
          from = 1;
          seen_revision_ = 0;
        }
        if (failures++ == 0) {
          outage_began = std::chrono::steady_clock::now();
          spdlog::warn("lock watch on {}: {}; re-watching from revision {} every 100 ms (further failures at debug level)",
                       prefix_, err.what(), from);
        } else {
          spdlog::debug("lock watch on {}: {}; re-watching from revision {} (attempt {})", prefix_, err.what(), from, failures);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
  }

  void deliver(const WatchEvent& w, std::int64_t& from) {
    seen_revision_ = std::max(seen_revision_.load(), w.revision());
    from = w.revision() + 1;
    if (w.kv.key == end_marker_) return;      // our own marker, not a lock event
    if (!covers(prefix_, w.kv.key)) return;  // another lock's key that shares the prefix ("<lock>x")
    Event e;
    e.t_ns = monotonic_ns();
    e.src_ns = e.t_ns;
    e.source = "lock";
    e.revision = w.revision();
    e.lock_key = w.kv.key;
    if (w.type == WatchEvent::Type::kPut) {
      e.kind = EventKind::kLockGrant;
      e.token = w.kv.create_revision;
      if (w.kv.lease) e.lease_id = w.kv.lease;
    } else {
      e.kind = EventKind::kLockDelete;
      if (w.prev_kv) {
        e.token = w.prev_kv->create_revision;
        if (w.prev_kv->lease) e.lease_id = w.prev_kv->lease;
      }
    }
    sink_(std::move(e));
  }

  std::string url_;
  std::string prefix_;  // the lock's name without a trailing '/': the watch's key prefix
  std::function<void(Event)> sink_;
  std::string end_marker_;
  std::int64_t start_revision_ = 0;
  std::atomic<std::int64_t> seen_revision_{0};
  std::atomic<bool> from_scratch_{false};
  std::jthread thread_;  // last: starts after the fields above are initialised
};

/// Where a run's claim names go: outside every lock prefix ("fencecheck/<scenario>"), so no issuer
/// watch sees a claim as a grant.
constexpr std::string_view kClaimPrefix = "fencecheck-claims/";

/// A run's claim in the user's etcd (LockServiceInstance::claim): the names put in one txn, only
/// where absent, attached to a lease of the claim's TTL that RenewedClaim's thread keeps alive every
/// third of it. Release revokes the lease, which deletes exactly this claim's keys (a key another
/// run put after a lapse has that run's lease).
class EtcdHeldClaim final : public RenewedClaim {
 public:
  EtcdHeldClaim(std::string url, std::int64_t lease, std::vector<std::string> keys, std::chrono::seconds ttl)
      : RenewedClaim("etcd " + url, ttl), url_(std::move(url)), lease_(lease), keys_(std::move(keys)),
        renewer_(url_, renew_options()) {
    start();
  }
  ~EtcdHeldClaim() override { finish(); }

  std::string describe() const override {
    return fmt::format("etcd {} lease {:x} (TTL {} s) on {}", url_, lease_, ttl().count(), fmt::join(keys_, ", "));
  }

 private:
  static EtcdClient::Options renew_options() {
    EtcdClient::Options options;
    options.request_timeout = std::chrono::milliseconds(2000);
    return options;
  }
  std::optional<std::string> renew_once() override {
    if (renewer_.lease_keepalive(lease_)) return std::nullopt;
    return fmt::format("its lease {:x} was gone at a renewal (expired or revoked by someone else)", lease_);
  }
  void release_once() override { EtcdClient(url_).lease_revoke(lease_); }

  std::string url_;
  std::int64_t lease_;
  std::vector<std::string> keys_;
  EtcdClient renewer_;  // used by the renewal thread only
};

/// One etcd for one run: an embedded etcd-server (restartable at the same URL) or the user's member
/// that answered /health first.
class EtcdInstance final : public LockServiceInstance {
 public:
  /// The user's member at `url`.
  explicit EtcdInstance(std::string url) : url_(std::move(url)) {}
  /// An embedded etcd, started by start_server().
  EtcdInstance(const LockServiceRunContext& ctx, EmbeddedEtcd::Options options)
      : embedded_(true), ctx_(ctx), options_(std::move(options)) {}
  ~EtcdInstance() override { stop(); }

  nlohmann::json endpoint() const override { return {{"kind", "etcd"}, {"endpoints", {url_}}}; }
  std::string endpoints_text() const override { return url_; }
  std::map<std::string, std::string> worker_env() const override {
    return {{"ETCDCTL_ENDPOINTS", url_}, {"ETCDCTL_API", "3"}};
  }
  std::string describe() const override {
    return "etcd " + url_ + (embedded_ ? " (embedded, data " + data_name() + ")" : " (external)");
  }
  bool healthy() override { return EtcdClient(url_).health(); }
  std::unique_ptr<IssuerWatch> watch(const std::string& name, std::function<void(Event)> sink) override {
    return std::make_unique<EtcdIssuerWatch>(url_, name, std::move(sink));
  }

  void advance(std::int64_t count) override {
    if (count <= 0) return;
    // One put is one revision (a txn of many puts would be one revision too).
    const EtcdClient etcd(url_);
    std::int64_t revision = 0;
    for (std::int64_t i = 0; i < count; ++i) revision = etcd.put(kPriorRevisionsKey, std::to_string(i));
    spdlog::info("etcd {}: {} prior revisions (now at revision {})", url_, count, revision);
  }

  int pid() const override { return etcd_ ? etcd_->pid() : 0; }

  std::unique_ptr<HeldClaim> claim(const RunClaim& claim, std::string& why) override {
    if (embedded_) {
      why = "the etcd is embedded: no other run can reach it";
      return nullptr;
    }
    const EtcdClient etcd(url_);
    const std::string value = claim.to_json().dump();
    std::vector<std::pair<std::string, std::string>> kvs;
    for (const auto& name : claim.names()) kvs.emplace_back(std::string(kClaimPrefix) + name, value);
    try {
      const LeaseGrant lease = etcd.lease_grant(claim.ttl);
      CreateAllResult r;
      try {
        r = etcd.create_all(kvs, lease.id);
      } catch (...) {
        try {
          etcd.lease_revoke(lease.id);
        } catch (const std::exception&) {  // it lapses by itself within claim.ttl
        }
        throw;
      }
      if (!r.created) {
        etcd.lease_revoke(lease.id);
        // The first name taken, as the caller lists them (the lock before the keys).
        for (const auto& [key, unused] : kvs)
          for (const auto& held : r.existing)
            if (held.key == key) {
              const auto parsed = nlohmann::json::parse(held.value, nullptr, false);
              std::optional<RunClaim> holder;
              if (!parsed.is_discarded()) holder = RunClaim::from_json(parsed);
              const std::string name = key.substr(kClaimPrefix.size());
              throw ClaimRefused(name, holder, claim_refusal_message(claim, name, holder, "etcd " + url_));
            }
        // Gone again between the txn and now: the holder ended; say so rather than retry blindly.
        throw ClaimRefused(kvs.front().first, std::nullopt,
                           claim_refusal_message(claim, kvs.front().first.substr(kClaimPrefix.size()), std::nullopt,
                                                 "etcd " + url_));
      }
      std::vector<std::string> keys;
      for (const auto& kv : kvs) keys.push_back(kv.first);
      return std::make_unique<EtcdHeldClaim>(url_, lease.id, std::move(keys), claim.ttl);
    } catch (const EtcdError& err) {
      throw LockServiceUnavailable("etcd " + url_ + ": cannot claim this run's lock and keys: " + err.what());
    }
  }

  void stop_server() override {
    if (!embedded_) throw std::logic_error("the lock service is external: not stopping it");
    if (etcd_) etcd_->stop();
    etcd_.reset();
  }

  void start_server(bool fresh_data) override {
    if (!embedded_) throw std::logic_error("the lock service is external: not starting it");
    if (etcd_) return;
    if (fresh_data || generation_ == 0) ++generation_;
    auto etcd = std::make_unique<EmbeddedEtcd>(options_);
    etcd->start(ctx_.run_dir / data_name(), ctx_.log_path("etcd"));
    url_ = etcd->client_url();
    // Same URL on a restart: the clients keep the address they were given.
    options_.client_port = std::stoi(url_.substr(url_.rfind(':') + 1));
    const auto& peer = etcd->peer_url();
    options_.peer_port = std::stoi(peer.substr(peer.rfind(':') + 1));
    etcd_ = std::move(etcd);
    spdlog::info("embedded etcd at {} (data {})", url_, data_name());
  }

  void stop() noexcept override {
    if (etcd_) etcd_->stop();
    etcd_.reset();
  }

 private:
  std::string data_name() const {
    return generation_ <= 1 ? "etcd-data" : "etcd-data-" + std::to_string(generation_);
  }

  bool embedded_ = false;
  LockServiceRunContext ctx_;
  EmbeddedEtcd::Options options_;
  std::unique_ptr<EmbeddedEtcd> etcd_;
  int generation_ = 0;
  std::string url_;
};

class EtcdKind final : public LockServiceKind {
 public:
  std::string_view name() const override { return "etcd"; }
  std::vector<ClientLayout> clients() const override {
    // etcd's v3lock service (server/etcdserver/api/v3lock), `etcdctl lock` and Go's
    // clientv3/concurrency.NewMutex(session, pfx) all keep the holder at <pfx>/<lease hex>;
    // python-etcd3's Lock(name) keeps it at the key /locks/<name> itself (etcd3.Lock.lock_prefix).
    return {{"v3lock", "", "", "<lock>/<lease hex>"},
            {"etcdctl", "", "", "<lock>/<lease hex>"},
            {"go-concurrency", "", "", "<lock>/<lease hex>"},
            {"python-etcd3", "/locks/", "", "/locks/<name> (the lock must be /locks/<name>)"}};
  }
  std::vector<std::string_view> fields() const override { return {}; }
  nlohmann::json parse(const KindFields& /*fields*/) const override { return nlohmann::json::object(); }
  /// 1 (one process), or a cluster of 3 or 5 (an odd size: an even one tolerates no more failures
  /// than the odd size below it; etcd's FAQ, "Why an odd number of cluster members?").
  std::string check_members(int count) const override {
    if (count == 1 || count == 3 || count == 5) return "";
    return "etcd runs 1 member or a cluster of 3 or 5, got " + std::to_string(count);
  }

  std::string check_endpoint(std::string_view endpoint) const override {
    if (valid_url(endpoint)) return "";
    return "expected an endpoint URL like \"http://127.0.0.1:2379\", got \"" + std::string(endpoint) + "\"";
  }

  std::optional<NetAddress> endpoint_address(std::string_view endpoint, std::string* why) const override {
    return url_address(endpoint, 0, why);
  }
  std::string endpoint_at(std::string_view endpoint, const NetAddress& at) const override { return url_at(endpoint, at); }

  std::string check_lease_ttl(std::chrono::milliseconds ttl, std::string_view written) const override {
    if (ttl.count() % 1000 == 0) return "";
    return "etcd leases are whole seconds: expected a whole number of seconds like \"2s\", got \"" + std::string(written) + "\"";
  }

  std::string token_description() const override {
    return "the lock key's create_revision (the etcd store revision of the put that created it)";
  }

  std::string restart_effect(const nlohmann::json& /*config*/) const override {
    return "same data: revisions, leases and keys survive, tokens keep rising (a lease may outlive the outage: "
           "etcd extends remaining TTLs after a restart); fresh data: the revision counter starts again at 1, so "
           "new tokens fall below the resource's high-water mark";
  }

  std::unique_ptr<LockServiceInstance> open(const std::vector<std::string>& endpoints, const nlohmann::json& /*config*/,
                                            const LockServiceRunContext& ctx) const override {
    if (endpoints.empty()) {
      if (!process::find_on_path("etcd"))
        throw LockServiceUnavailable("etcd not found on PATH: install Debian's etcd-server (apt-get install etcd-server), "
                                     "or give lock_service.endpoints in the scenario");
      EmbeddedEtcd::Options options;
      options.host = ctx.host;
      if (ctx.lab) {
        options.client_port = kLabClientPort;
        options.peer_port = kLabPeerPort;
      }
      auto instance = std::make_unique<EtcdInstance>(ctx, options);
      instance->start_server(false);
      return instance;
    }
    std::string tried;
    for (const auto& ep : endpoints) {
      if (EtcdClient(ep).health()) {
        spdlog::info("external etcd at {}", ep);
        return std::make_unique<EtcdInstance>(ep);
      }
      tried += (tried.empty() ? "" : ", ") + ep;
    }
    throw LockServiceUnavailable("no etcd endpoint answered /health: " + tried);
  }

 private:
  /// "http(s)://host:port[/]" with a port 1..65535 and a host without '/', ' ' or '@'.
  static bool valid_url(std::string_view rest) {
    if (rest.substr(0, 7) == "http://") rest.remove_prefix(7);
    else if (rest.substr(0, 8) == "https://") rest.remove_prefix(8);
    else return false;
    if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
    const auto colon = rest.rfind(':');
    if (colon == std::string_view::npos || colon == 0) return false;
    const std::string_view host = rest.substr(0, colon), port = rest.substr(colon + 1);
    if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return false;
    const int p = std::stoi(std::string(port));
    if (p < 1 || p > 65535) return false;
    return std::none_of(host.begin(), host.end(), [](char c) { return c == '/' || c == ' ' || c == '@'; });
  }
};

}  // namespace

namespace detail {
const LockServiceKind& etcd_kind() {
  static const EtcdKind kind;
  return kind;
}
}  // namespace detail

}  // namespace fencecheck::locks
