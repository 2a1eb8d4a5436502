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
#include "fencecheck/locks/etcd/etcd_cluster.h"
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
  ///
  /// `urls`: one member's client URL, or every member of a cluster (issue 35): the watch then runs
  /// against one member at a time and moves to the next when that member stops answering or is cut
  /// off from the quorum (its status names no leader: a member out of touch with the others'
  /// heartbeats for an election timeout drops its leader), resuming from the revision after the
  /// last one it delivered, so no grant and no delete is missed (etcd keeps every revision until a
  /// compaction, and the embedded cluster never compacts).
  EtcdIssuerWatch(std::vector<std::string> urls, std::string name, std::function<void(Event)> sink)
      : urls_(std::move(urls)), prefix_(std::move(name)), sink_(std::move(sink)) {
    if (urls_.empty()) throw std::invalid_argument("EtcdIssuerWatch: no endpoint");
    // "/locks/x/" and "/locks/x" name one lock (v3lock appends the '/' itself).
    while (prefix_.size() > 1 && prefix_.back() == '/') prefix_.pop_back();
    end_marker_ = prefix_ + "/~fencecheck-end";
    // The cluster's current revision: a DeleteRange's header carries it (and removes a stale end
    // marker a crashed run may have left; deleting nothing changes no revision).
    start_revision_ = on_some_member([&](const EtcdClient& c) { return c.delete_key(end_marker_).revision; }) + 1;
    seen_revision_ = start_revision_ - 1;
    thread_ = std::jthread([this](std::stop_token stop) { run(std::move(stop)); });
  }

  /// Every member it moved to, in order, with why ("member 2: member 1 did not answer its
  /// status"). For tests and the log. Thread-safe.
  std::vector<std::string> moves() const {
    std::lock_guard lock(moves_mu_);
    return moves_;
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
      const std::int64_t target = on_some_member([&](const EtcdClient& c) { return c.put(end_marker_, "end"); });
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (seen_revision_.load() < target && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      if (seen_revision_.load() < target)
        spdlog::warn("lock watch on {}: the end marker did not arrive within 5 s; the lock history may be short", prefix_);
      on_some_member([&](const EtcdClient& c) { return c.delete_key(end_marker_).revision; });
    } catch (const std::exception& err) {
      spdlog::warn("lock watch on {}: cannot place the end marker: {}", prefix_, err.what());
    }
    thread_.request_stop();
    thread_.join();
  }

 private:
  /// `call` on the member being watched, then each other in turn; the first answer. Throws the
  /// last EtcdError when none answers.
  template <typename Call>
  std::int64_t on_some_member(Call&& call) const {
    const std::size_t first = current_.load();
    for (std::size_t k = 0;; ++k) {
      try {
        return call(EtcdClient(urls_[(first + k) % urls_.size()]));
      } catch (const EtcdError&) {
        if (k + 1 >= urls_.size()) throw;
      }
    }
  }

  /// Whether the member at `url` is fit to be watched: it answers its status and knows a leader.
  static std::string member_problem(const std::string& url) {
    try {
      const MemberStatus st = EtcdClient(url, EtcdClient::Options{std::chrono::milliseconds(200), std::chrono::milliseconds(400)}).status();
      if (st.leader == 0) return "it knows no leader (cut off from the quorum, or an election under way)";
      return "";
    } catch (const EtcdError& err) {
      return std::string("it did not answer its status: ") + err.what();
    }
  }

  void run(std::stop_token stop) {
    if (urls_.size() > 1) return run_cluster(std::move(stop));
    EtcdClient watcher(urls_.front());
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

  /// The cluster's loop: one member at a time, a guard thread checking it every 200 ms; a member
  /// that fails the check or ends the watch is left for the next (in index order, wrapping).
  void run_cluster(std::stop_token stop) {
    std::int64_t from = start_revision_;
    int failures = 0;
    while (!stop.stop_requested()) {
      const std::size_t at = current_.load();
      const std::string url = urls_[at];
      std::stop_source inner;
      std::stop_callback link(stop, [&] { inner.request_stop(); });
      std::string problem;
      std::mutex problem_mu;
      std::jthread guard([&](std::stop_token gs) {
        std::mutex m;
        std::condition_variable_any cv;
        while (!gs.stop_requested()) {
          {
            std::unique_lock lock(m);
            cv.wait_for(lock, gs, std::chrono::milliseconds(200), [] { return false; });
          }
          if (gs.stop_requested()) return;
          if (std::string p = member_problem(url); !p.empty()) {
            std::lock_guard lock(problem_mu);
            problem = std::move(p);
            inner.request_stop();
            return;
          }
        }
      });
      try {
        EtcdClient(url).watch(prefix_, from, [&](const WatchEvent& w) { failures = 0; deliver(w, from); }, inner.get_token());
        if (!stop.stop_requested()) {
          std::lock_guard lock(problem_mu);
          if (problem.empty()) problem = "its watch ended";
        }
      } catch (const std::exception& err) {
        std::lock_guard lock(problem_mu);
        if (problem.empty()) problem = err.what();
      }
      guard.request_stop();
      guard.join();
      if (stop.stop_requested()) break;
      const std::size_t next = (at + 1) % urls_.size();
      current_ = next;
      const std::string said = "member " + std::to_string(next + 1) + " (" + urls_[next] + "): member " +
                               std::to_string(at + 1) + " left because " + problem + "; from revision " + std::to_string(from);
      {
        std::lock_guard lock(moves_mu_);
        moves_.push_back(said);
      }
      if (failures++ < static_cast<int>(urls_.size())) spdlog::warn("lock watch on {} moves to {}", prefix_, said);
      else spdlog::debug("lock watch on {} moves to {}", prefix_, said);
      // Every member failed in a row (no quorum anywhere): pause before the next round.
      if (failures % static_cast<int>(urls_.size()) == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
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

  std::vector<std::string> urls_;
  std::atomic<std::size_t> current_{0};  // the member watched now (index into urls_)
  mutable std::mutex moves_mu_;
  std::vector<std::string> moves_;
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
  /// An embedded cluster of ctx.members members (issue 35), started by start_server().
  EtcdInstance(const LockServiceRunContext& ctx, EtcdCluster::Options cluster)
      : embedded_(true), ctx_(ctx), cluster_options_(std::move(cluster)) {}
  ~EtcdInstance() override { stop(); }

  /// Every member's URL for a cluster (a worker's client and the issuer watch take them all),
  /// else the one.
  std::vector<std::string> urls() const {
    if (cluster_) return cluster_->client_urls();
    return {url_};
  }
  std::string joined_urls() const { return fmt::format("{}", fmt::join(urls(), ",")); }

  nlohmann::json endpoint() const override { return {{"kind", "etcd"}, {"endpoints", urls()}}; }
  std::string endpoints_text() const override { return joined_urls(); }
  std::map<std::string, std::string> worker_env() const override {
    return {{"ETCDCTL_ENDPOINTS", joined_urls()}, {"ETCDCTL_API", "3"}};
  }
  std::string describe() const override {
    if (cluster_options_)
      return fmt::format("etcd cluster of {} members {} (embedded, data etcd-data-1..{})", cluster_options_->members,
                         joined_urls(), cluster_options_->members);
    return "etcd " + url_ + (embedded_ ? " (embedded, data " + data_name() + ")" : " (external)");
  }
  bool healthy() override {
    for (const auto& u : urls())
      if (EtcdClient(u).health()) return true;
    return false;
  }
  std::unique_ptr<IssuerWatch> watch(const std::string& name, std::function<void(Event)> sink) override {
    return std::make_unique<EtcdIssuerWatch>(urls(), name, std::move(sink));
  }

  // ---- members (a cluster: lock_service.members > 1)
  std::vector<LockServiceMember> members() const override {
    std::vector<LockServiceMember> out;
    if (!cluster_) return out;
    for (int i = 1; i <= cluster_->size(); ++i) {
      LockServiceMember m;
      m.index = i;
      m.pid = cluster_->pid(i);
      m.endpoint = cluster_->client_url(i);
      m.netns = cluster_->place(i).netns;
      m.address = cluster_->place(i).host;
      m.data_dir = cluster_->data_dir(i);
      out.push_back(std::move(m));
    }
    return out;
  }
  std::optional<int> leader_member(std::string& why) override {
    if (!cluster_) return LockServiceInstance::leader_member(why);
    return cluster_->leader(why);
  }
  void stop_member(int index, bool kill9) override {
    if (!cluster_) return LockServiceInstance::stop_member(index, kill9);
    if (index < 1 || index > cluster_->size())
      throw std::out_of_range("etcd has no member " + std::to_string(index) + " (members 1.." + std::to_string(cluster_->size()) + ")");
    cluster_->stop_member(index, kill9);
  }
  void start_member(int index) override {
    if (!cluster_) return LockServiceInstance::start_member(index);
    if (index < 1 || index > cluster_->size())
      throw std::out_of_range("etcd has no member " + std::to_string(index) + " (members 1.." + std::to_string(cluster_->size()) + ")");
    cluster_->start_member(index);
  }

  void advance(std::int64_t count) override {
    if (count <= 0) return;
    // One put is one revision (a txn of many puts would be one revision too).
    const EtcdClient etcd(urls().front());
    std::int64_t revision = 0;
    for (std::int64_t i = 0; i < count; ++i) revision = etcd.put(kPriorRevisionsKey, std::to_string(i));
    spdlog::info("etcd {}: {} prior revisions (now at revision {})", url_, count, revision);
  }

  /// A cluster: member 1's (the member that leads at the start).
  int pid() const override {
    if (cluster_) return cluster_->pid(1);
    return etcd_ ? etcd_->pid() : 0;
  }

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
    if (cluster_) {  // the whole cluster down: every member, its data kept
      for (int i = 1; i <= cluster_->size(); ++i) cluster_->stop_member(i, false);
      return;
    }
    if (etcd_) etcd_->stop();
    etcd_.reset();
  }

  void start_server(bool fresh_data) override {
    if (!embedded_) throw std::logic_error("the lock service is external: not starting it");
    if (cluster_options_) return start_cluster(fresh_data);
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
    if (cluster_) cluster_->stop();
    cluster_.reset();
    if (etcd_) etcd_->stop();
    etcd_.reset();
  }

 private:
  /// The cluster's first start, or its restart after stop_server() on the same data (every member
  /// launched, then each waited for: one alone has no quorum). Fresh data is refused: a cluster's
  /// members would have to be bootstrapped anew, which is a new cluster, not a restart.
  void start_cluster(bool fresh_data) {
    if (!cluster_) {
      auto cluster = std::make_unique<EtcdCluster>(*cluster_options_);
      const auto log_path = ctx_.log_path;
      cluster->start(ctx_.run_dir, [&](int i) { return log_path("etcd-" + std::to_string(i)); });
      cluster_ = std::move(cluster);
      spdlog::info("embedded etcd cluster: {} (member 1 leads)", joined_urls());
      return;
    }
    if (fresh_data)
      throw std::runtime_error("an embedded etcd cluster restarts on its own data only (fresh_data would be a new cluster)");
    cluster_->start_all();
  }


  std::string data_name() const {
    return generation_ <= 1 ? "etcd-data" : "etcd-data-" + std::to_string(generation_);
  }

  bool embedded_ = false;
  LockServiceRunContext ctx_;
  EmbeddedEtcd::Options options_;
  std::optional<EtcdCluster::Options> cluster_options_;
  std::unique_ptr<EtcdCluster> cluster_;
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

  /// Measured (docs/lock-service-etcd.md, "Clock faults"): etcd with the shim preloaded and its
  /// offset at +1 h logged and answered (HTTP Date) the machine's time.
  std::string member_clock_problem() const override {
    return "etcd's members are Go programs, and Go's runtime reads the wall clock through the vDSO with its own "
           "code, not through libc, so fencecheck's clock shim (an LD_PRELOAD library) cannot move it "
           "(docs/lock-service-etcd.md, \"Clock faults\")";
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
      if (ctx.members > 1) {
        EtcdCluster::Options cluster;
        cluster.members = ctx.members;
        for (const auto& p : ctx.member_places) cluster.places.push_back({p.host, p.netns});
        if (cluster.places.empty())
          for (int i = 0; i < ctx.members; ++i) cluster.places.push_back({ctx.host, ""});
        cluster.cluster_token = "fencecheck-" + ctx.run_id;
        auto instance = std::make_unique<EtcdInstance>(ctx, cluster);
        try {
          instance->start_server(false);
        } catch (const std::runtime_error& err) {
          throw LockServiceUnavailable(std::string("embedded etcd cluster: ") + err.what());
        }
        return instance;
      }
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
