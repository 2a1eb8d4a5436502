// fencecheck — an embedded etcd cluster of 3 or 5 members, each its own etcd-server process with
// its own data directory, for `lock_service: {kind: etcd, members: 3}` (issue 35; docs/
// lock-service-etcd.md). Each member runs on loopback on ports of its own, or in a network
// namespace of its own at its own address (the network lab's "lock-service-<i>" host: member-level
// partitions are real), started through ChildSpec::prefix {"ip","netns","exec",<netns>}.
//
// Start-up (measured on this project's 2-core VM: docs/lock-service-etcd.md): the members are
// started one after another, each once the one before answers Maintenance.Status. Started all at
// once, each etcd 3.4 asks its peers for an existing cluster (isMemberBootstrapped) with a 1 s
// timeout per peer, and a peer whose listener is bound but whose server is not yet built holds
// that request for the whole second: 1-2 s lost. Started in turn, every peer it asks either
// refuses (not started) or answers at once. Then the harness moves the leadership to member 1
// (MoveLeader), so that every run starts with the same leader, and waits until every member's
// /health says true.
//
// Raft timing: heartbeat 50 ms, election timeout 500 ms by default (etcd's tuning guide: the
// election timeout ~10x the heartbeat, the heartbeat ~ the round trip, which on loopback is well
// under 1 ms). The minimum lease TTL is then ceil(1.5 x 500 ms) = 1 s, and a member stopped or cut
// off for more than 500 ms loses the leadership. Data is fsynced as etcd always does (3.4 has no
// --unsafe-no-fsync).
//
// Every member gets PR_SET_PDEATHSIG (ChildProcess): a kill -9'ed harness takes its cluster along.
//
// Thread-safety: not synchronised; one thread (the orchestrator's main thread, whose exit fires
// PR_SET_PDEATHSIG) drives it. client_urls() and pid() may be read concurrently once start() has
// returned.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fencecheck {

class EtcdCluster {
 public:
  /// Where one member runs.
  struct Place {
    std::string host = "127.0.0.1";  ///< the address it binds and advertises
    std::string netns;               ///< "" on the caller's network; else the namespace it is started in
  };
  struct Options {
    std::filesystem::path binary;  ///< empty: "etcd" on PATH
    int members = 3;               ///< 3 or 5 (1 works too)
    /// One place per member; empty: every member on 127.0.0.1 with free ports.
    std::vector<Place> places;
    /// In a namespace of its own a member uses etcd's own ports (2379 client, 2380 peer); on a
    /// shared address each gets two free ports.
    std::chrono::milliseconds heartbeat{50};
    std::chrono::milliseconds election{500};
    /// How long start() waits for each member to serve and for the whole cluster to be healthy;
    /// start_member() for the member to be healthy again.
    std::chrono::milliseconds start_timeout{10000};
    /// stop_member(i, false) and stop(): SIGTERM, then SIGKILL after this.
    std::chrono::milliseconds stop_grace{2000};
    std::string cluster_token = "fencecheck";  ///< --initial-cluster-token (the run id)
    int port_attempts = 3;                     ///< whole-cluster retries when a free port was taken
  };

  explicit EtcdCluster(Options options);
  ~EtcdCluster();
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  /// Starts every member (data under data_root/etcd-data-<i>, output appended to log_path(i)) and
  /// returns once each answers /health with member 1 leading. Throws std::runtime_error naming the
  /// member and the tail of its log (etcd missing, a member that exits or does not serve in time,
  /// no leader); whatever was started is stopped again.
  void start(const std::filesystem::path& data_root, const std::function<std::filesystem::path(int)>& log_path);
  /// Stops every member (SIGTERM together, SIGKILL after at most 500 ms: members ended together
  /// cannot hand the leadership on). Idempotent; never throws.
  void stop() noexcept;

  [[nodiscard]] int size() const { return static_cast<int>(members_.size()); }
  /// Every member's client URL, by index ("http://127.0.0.1:41235"); fixed for the cluster's life.
  [[nodiscard]] std::vector<std::string> client_urls() const;
  [[nodiscard]] const std::string& client_url(int index) const;
  /// The member's pid; 0 while it is down.
  [[nodiscard]] int pid(int index) const;
  [[nodiscard]] const Place& place(int index) const;
  [[nodiscard]] const std::filesystem::path& data_dir(int index) const;
  /// The member's raft id (from its status at start); 0 before start().
  [[nodiscard]] std::uint64_t member_id(int index) const;

  /// Ends member `index` (1-based): SIGKILL at once with kill9 (no leadership transfer, nothing
  /// flushed beyond what etcd fsynced), else SIGTERM (etcd hands the leadership on first) and
  /// SIGKILL after stop_grace; reaped. Its data directory stays. Idempotent. Throws
  /// std::out_of_range.
  void stop_member(int index, bool kill9);
  /// Starts member `index` again with the same flags on its own data directory (etcd then reads
  /// its WAL and ignores the --initial-* flags) and returns once its /health says true (it has
  /// rejoined a quorum). No-op when it runs. Throws std::runtime_error (it exits, or is not
  /// healthy within start_timeout: it is killed again), std::out_of_range.
  void start_member(int index);

  /// Starts every member that is down (launched all, then each waited for: one alone has no
  /// quorum), on its own data; returns once each is healthy. Throws as start_member().
  void start_all();

  /// The leader now, asked of each running member in turn (Maintenance.Status, 500 ms each): the
  /// answer with the highest raft term that names a member of this cluster. nullopt with `why`
  /// when none does (an election under way, no quorum). A member the harness has ended is never
  /// the answer, though the others name it until their election timeout passes ("leader member 1
  /// (which is down)"). `why` says who answered what ("member 2's status: leader member 1, term
  /// 3"). Never throws.
  [[nodiscard]] std::optional<int> leader(std::string& why) const;

 private:
  struct Member;
  void launch(Member& m, bool first_start);
  void wait_serving(Member& m, std::chrono::steady_clock::time_point deadline);
  Options options_;
  std::filesystem::path binary_;
  std::vector<std::unique_ptr<Member>> members_;
  std::string initial_cluster_;
};

}  // namespace fencecheck
