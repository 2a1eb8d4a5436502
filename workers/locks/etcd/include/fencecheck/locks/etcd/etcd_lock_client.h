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
// Errors: every EtcdError is rethrown as LockServiceError with the same what() (which names the
// endpoint, method, path and etcd's message: etcd_client.h).
//
// Thread-safety: as EtcdClient: every call opens its own connection; any member may be called
// concurrently.
#pragma once

#include <memory>
#include <string>

#include "fencecheck/locks/etcd/etcd_client.h"
#include "fencecheck/locks/lock_client.h"

namespace fencecheck::locks {

class EtcdLockClient final : public LockClient {
 public:
  /// `endpoint` is "http://host:port" (std::invalid_argument otherwise, from EtcdClient).
  EtcdLockClient(std::string endpoint, const LockClientOptions& options);

  [[nodiscard]] std::string_view kind() const override { return "etcd"; }
  [[nodiscard]] std::string describe() const override { return "etcd " + etcd_.endpoint(); }
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

  /// The underlying client (tests).
  [[nodiscard]] const EtcdClient& etcd() const { return etcd_; }

 private:
  EtcdClient etcd_;
};

}  // namespace fencecheck::locks
