// fencecheck — the worker's side of the lock-service axis: one LockClient per lock-service kind
// (docs/architecture.md, "The lock-service axis"). The reference worker (worker.h) talks to "a lock
// client" and never to etcd, ZooKeeper or Redis by name, the way it talks to "a resource writer".
//
// The vocabulary is the generic one, with each kind's own meaning (docs/worker-protocol.md,
// "The lock, per lock service"):
//   session (lease_id)  etcd: a lease (LeaseGrant; its id).  zookeeper: the client's session (its
//                       64-bit session id; the session timeout is the lease).  redis: the holder's
//                       owner value (a random 63-bit id written as the lock key's value; the key's
//                       PX expiry is the lease).
//   lock_key            etcd: "<lock>/<lease hex>".  zookeeper: the ephemeral sequential znode's
//                       path "<lock>/lock-0000000012".  redis: the lock key "<lock>".
//   token               the fencing token from the issuer's one ordering authority. etcd: the lock
//                       key's create_revision.  zookeeper: the lock znode's czxid (creation zxid).
//                       redis: INCR of "<lock>:fence", taken in the same Lua script as the SET NX.
//   revision            the issuer's ordering number at which something happened (etcd revision,
//                       zookeeper zxid), when the kind can tell; redis has none (nullopt).
//
// Endpoint JSON (what the harness gives a worker with --lock-service; make_lock_client reads it):
//   {"kind":"etcd","endpoints":["http://127.0.0.1:2379"]}
//   {"kind":"zookeeper","endpoints":["127.0.0.1:2181"]}
//   {"kind":"redis","endpoints":["redis://127.0.0.1:6379"], "token":"fenced"|"none"}
// plus any field a kind documents in its own header.
//
// Errors: every call that can fail throws LockServiceError (the issuer's state is then unknown:
// a transport error or an unexpected reply); "the lease is gone" and "not acquired in time" are
// values, not errors.
//
// Thread-safety: a LockClient's member functions may be called concurrently from the worker's
// main thread (acquire, release, remaining) and its keepalive thread (keepalive) on one instance.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace fencecheck::locks {

/// A lock-service call whose outcome is unknown: no reply, a timeout, an unexpected reply.
/// what() names the kind, the endpoint and the call ("zookeeper 127.0.0.1:2181 create
/// /fencecheck/x/lock-: connection loss").
class LockServiceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A lease (etcd), a session (zookeeper) or an owner value (redis): what keeps a holding alive.
struct Session {
  std::int64_t id = 0;               ///< lease id / session id / owner value; never 0 once opened
  std::chrono::milliseconds ttl{0};  ///< the TTL the issuer granted (etcd raises it to its minimum)
};

/// A lock held.
struct Holding {
  std::string lock_key;  ///< the holder's own key (see the top of this file)
  std::int64_t token = 0;  ///< the fencing token (strictly greater than every earlier grant's)
  /// The issuer's ordering number at which the lock was seen held (etcd: the Lock reply's header
  /// revision; zookeeper: the lock znode's pzxid when the holder was seen lowest; redis: nullopt).
  std::optional<std::int64_t> revision;
};

/// One lock key a release deleted.
struct Released {
  std::string lock_key;
  std::optional<std::int64_t> token;     ///< the deleted key's token, when the issuer tells it
  std::optional<std::int64_t> revision;  ///< the delete's revision (etcd) or zxid (zookeeper), else nullopt
  std::optional<std::int64_t> lease_id;  ///< the deleted key's session, when the issuer tells it
  bool existed = true;  ///< false: the key was already gone (expired, or deleted by someone else)
  bool own = true;      ///< false: release-by-name deleted another holder's key
};

class LockClient {
 public:
  virtual ~LockClient() = default;
  /// "etcd", "zookeeper", "redis".
  [[nodiscard]] virtual std::string_view kind() const = 0;
  /// The endpoint in use, for messages.
  [[nodiscard]] virtual std::string describe() const = 0;

  /// The detail of the worker's lease.lost event when keepalive() said false: what the issuer
  /// said, in its own words (etcd: "keepalive reply has no TTL: etcd says the lease is gone").
  [[nodiscard]] virtual std::string session_lost_detail() const {
    return std::string(kind()) + " says the session is gone";
  }
  /// Opens a lease/session of (at least) `ttl`. Throws LockServiceError.
  virtual Session open_session(std::chrono::milliseconds ttl) = 0;
  /// One renewal. true: renewed (or, for a kind whose client renews by itself, still alive);
  /// false: the issuer says the session is gone (expired or revoked). Throws LockServiceError
  /// when the state is unknown (no reply).
  virtual bool keepalive(const Session& s) = 0;
  /// The remaining TTL of the session as the issuer sees it (--check-lease-before-write);
  /// nullopt when it is gone. Throws LockServiceError.
  virtual std::optional<std::chrono::milliseconds> remaining(const Session& s) = 0;
  /// Takes the lock `name` with session `s`: blocks until held, `timeout` passes or `stop` is
  /// requested (nullopt in the last two cases, leaving nothing behind that could be granted
  /// later). A holding returned was verified to exist after the grant: a session that expired
  /// while waiting throws LockServiceError saying so (etcd: "Lock returned key '...' but it no
  /// longer exists with lease N (the lease expired while waiting)"), never a key that is already
  /// gone. Throws LockServiceError.
  virtual std::optional<Holding> acquire(const std::string& name, const Session& s, std::chrono::milliseconds timeout,
                                         std::stop_token stop) = 0;
  /// Releases the holder's own key, owner-checked (never another holder's). Throws
  /// LockServiceError.
  virtual Released release(const std::string& name, const Holding& h, const Session& s) = 0;
  /// The "release by lock name" mistake: deletes whatever holds `name`, no owner check, one
  /// Released per key deleted (empty when nothing held it). Throws LockServiceError.
  virtual std::vector<Released> release_by_name(const std::string& name, const Session& s) = 0;
  /// Ends the session (etcd: revoke the lease; zookeeper: close the session; redis: nothing).
  /// false when it was already gone. Throws LockServiceError.
  virtual bool close_session(const Session& s) = 0;
};

/// Per-call bounds a worker gives its client, and where it hears of the client's failovers.
struct LockClientOptions {
  std::chrono::milliseconds connect_timeout{2000};
  std::chrono::milliseconds request_timeout{5000};  ///< every call but acquire
  /// Called when a client of a clustered service stops using a member that did not answer and
  /// moves to the next endpoint (etcd: etcd_lock_client.h, "Failover"), with one sentence naming
  /// both and why ("etcd member http://127.0.0.1:23791 did not answer (...); the client moves to
  /// http://127.0.0.1:23792"). On the thread that made the call (the worker's main or keepalive
  /// thread): it must be thread-safe and must not call the client. Empty: not told.
  std::function<void(const std::string&)> on_failover;
};

/// The client for an endpoint JSON (top of file). Throws std::invalid_argument naming what is
/// wrong (unknown kind: the known ones listed; a missing field).
[[nodiscard]] std::unique_ptr<LockClient> make_lock_client(const nlohmann::json& endpoint,
                                                           const LockClientOptions& options = {});

}  // namespace fencecheck::locks
