// fencecheck — the etcd kind's LockClient (fencecheck/locks/lock_client.h): what the reference
// worker does with an etcd lock, on EtcdClient (etcd_client.h).
//
//   open_session   LeaseGrant(ceil(ttl) in whole seconds; etcd raises it to its minimum, 2 s by
//                  default). Session.id = the lease id, Session.ttl = the TTL etcd granted.
//   keepalive      one LeaseKeepAlive; false when the reply has no TTL (the lease is gone).
//   remaining      LeaseTimeToLive (whole seconds); nullopt when etcd says the lease is gone (TTL -1).
//   acquire        v3lock Lock(name, lease) — the key "<name>/<lease hex>" attached to the lease —
//                  then Range(key): token = the key's create_revision (NOT the Lock reply's header
//                  revision: etcd_client.h, LockResult), Holding.revision = the Lock reply's header
//                  revision. A key gone (or on another lease) after Lock returned means the lease
//                  expired while waiting: LockServiceError "Lock returned key '...' but it no longer
//                  exists with lease N (the lease expired while waiting)".
//   release        DeleteRange of the holder's own key (its name carries the lease: owner-checked by
//                  construction). Not v3lock's Unlock: its reply cannot say whether anything was
//                  deleted (for a key already gone it answers 200 with the current revision, which
//                  may even equal the expiry's delete revision); DeleteRange's `deleted` count does,
//                  so Released.revision is set only for a real delete and the checkers can tell this
//                  release from the lease's expiry by revision.
//   release_by_name  DeleteRange over the prefix "<name>/" with prev_kv: every holder's key, one
//                  revision; each Released carries that key's create_revision and lease.
//   close_session  LeaseRevoke; false when etcd said the lease was not found.
//
// Failover. The endpoint JSON lists every member of the cluster ({"endpoints": [m1, m2, m3]}; the
// harness puts worker k's own member first: orchestrator.cpp, member_first). The client talks to
// one member at a time, the first to begin with, and moves to the next in the list (cyclically)
// when the one it uses does not answer: no HTTP reply at all (refused, unreachable, a connect or
// read timeout, a reset), or an HTTP error with gRPC code 14, Unavailable ("etcdserver: no
// leader", "etcdserver: request timed out": this member cannot reach a leader now). Every later
// call goes to the member it moved to; LockClientOptions::on_failover is told of each move. What
// the failed call itself does next follows etcd's own client (clientv3/retry.go, etcd 3.4:
// isSafeRetryImmutableRPC, isSafeRetryMutableRPC; https://etcd.io/docs/v3.4/learning/design-client/,
// "client implements automatic failover between replicas"):
//   * repeatable calls (keepalive, remaining, and the Range after Lock) are tried again at once on
//     the next members, each member once, whatever became of the first try: a renewal or a read
//     sent twice does no harm;
//   * the other calls (LeaseGrant, Lock, DeleteRange, LeaseRevoke) are tried again on the next
//     member only when the request never left this client (EtcdError::unsent(): the connection
//     could not be made, so the member did nothing). When the request was sent and no reply
//     came, what it did is unknown: the call throws LockServiceError as with one member (the worker
//     does with it what it did before: acquire.fail, a revoke, a new lease), and only the
//     transport moves. (clientv3 also retries LeaseGrant and LeaseRevoke after an unknown outcome;
//     this client does not: a second grant leaks a lease, a second revoke says "not found".)
// The lease moves with the client: an etcd lease belongs to the cluster, not to the member that
// granted it, and any member takes its keepalive (a follower forwards the renewal to the leader
// over the peer API: etcdserver/v3_server.go, EtcdServer.LeaseRenew, "renewals don't go through
// raft; forward to leader manually", waiting for a leader while there is none, up to etcd's
// request timeout). A holder whose member is killed thus keeps its lease, and its lock, through
// another member, as a clientv3 holder does.
// A call that no member answers throws LockServiceError naming each member's failure. With one
// endpoint nothing changes: every error is rethrown as before.
//
// Errors: every EtcdError is rethrown as LockServiceError with the same what() (which names the
// endpoint, method, path and etcd's message: etcd_client.h); when no member answered, one
// LockServiceError "etcd: no member answered (N tried): <each member's what(), by "; ">".
//
// Thread-safety: as EtcdClient: every call opens its own connection; any member may be called
// concurrently. The member in use is an atomic index: two calls failing on one member at once
// move it by one member, not two.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fencecheck/locks/etcd/etcd_client.h"
#include "fencecheck/locks/lock_client.h"

namespace fencecheck::locks {

class EtcdLockClient final : public LockClient {
 public:
  /// `endpoints`: the members of one etcd cluster (or one etcd), each "http://host:port", the
  /// one to use first first. std::invalid_argument for an empty list or a malformed endpoint
  /// (from EtcdClient).
  EtcdLockClient(std::vector<std::string> endpoints, const LockClientOptions& options);
  /// One endpoint: no failover.
  EtcdLockClient(std::string endpoint, const LockClientOptions& options);

  [[nodiscard]] std::string_view kind() const override { return "etcd"; }
  /// "etcd http://127.0.0.1:2379": the member in use now.
  [[nodiscard]] std::string describe() const override { return "etcd " + etcd().endpoint(); }
  /// "keepalive reply has no TTL: etcd says the lease is gone".
  [[nodiscard]] std::string session_lost_detail() const override {
    return "keepalive reply has no TTL: etcd says the lease is gone";
  }
  Session open_session(std::chrono::milliseconds ttl) override;
  bool keepalive(const Session& s) override;
  std::optional<std::chrono::milliseconds> remaining(const Session& s) override;
  std::optional<Holding> acquire(const std::string& name, const Session& s, std::chrono::milliseconds timeout,
                                 std::stop_token stop) override;
  Released release(const std::string& name, const Holding& h, const Session& s) override;
  std::vector<Released> release_by_name(const std::string& name, const Session& s) override;
  bool close_session(const Session& s) override;

  /// The client of the member in use now (tests).
  [[nodiscard]] const EtcdClient& etcd() const { return members_[current_.load()]; }
  /// How many endpoints the client moves between.
  [[nodiscard]] std::size_t member_count() const { return members_.size(); }

 private:
  /// Whether a failed call is tried again on the next member (top of file, "Failover").
  enum class Retry { kRepeatable, kOnlyUnsent };
  /// Runs f(EtcdClient&) on the member in use, moving on as the top of the file says.
  template <typename F>
  auto on_member(Retry retry, F&& f) -> decltype(f(std::declval<const EtcdClient&>()));
  /// Moves from member `from` to the next, unless another call moved already; tells on_failover_.
  void move_from(std::size_t from, const std::string& why);

  std::vector<EtcdClient> members_;
  std::atomic<std::size_t> current_{0};
  std::function<void(const std::string&)> on_failover_;
};

}  // namespace fencecheck::locks
