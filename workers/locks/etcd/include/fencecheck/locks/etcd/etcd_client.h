// fencecheck — a small etcd v3 client speaking etcd's JSON gateway (grpc-gateway), enough to take a
// lock the way a real system would, and to watch the lock service's own history.
//
// Wire rules (etcd 3.4, "gRPC gateway" doc: https://etcd.io/docs/v3.4/dev-guide/api_grpc_gateway/),
// each checked against a real etcd 3.4.23 (see tests/worker/etcd_client_test.cpp):
//   * Every call is POST /v3/<service>/<method> with a JSON body, except GET /health.
//   * Keys and values are base64 (standard alphabet, padded) in both directions.
//   * int64/uint64 fields (revisions, lease ids, TTLs) come back as JSON *strings*
//     ("revision":"6"); requests may send them as strings or numbers (we send strings).
//   * proto3 JSON omits default values: a missing field means 0 / false / "" / PUT. Seen in
//     practice: an empty value has no "value"; a key without a lease has no "lease"; a PUT watch
//     event has no "type"; a keepalive for a lease that is gone has no "TTL".
//   * Errors: non-2xx with {"error":"...","message":"...","code":<gRPC code>}, e.g. revoking an
//     unknown lease gives HTTP 404, code 5 "etcdserver: requested lease not found"; locking
//     with an unknown lease gives HTTP 500, code 2 with the same message.
//
// API semantics: "etcd API" (https://etcd.io/docs/v3.4/learning/api/: KV, Watch, Lease) and the
// concurrency API reference (https://etcd.io/docs/v3.4/dev-guide/api_concurrency_reference_v3/:
// Lock/Unlock).
//
// Lease facts (etcd server/lease/lessor.go and etcdserver/server.go, v3.4), observed on 3.4.23:
//   * Minimum TTL = ceil(1.5 * election timeout): with the default election timeout of 1000 ms
//     it is 2 s, so a grant asking for 1 s returns TTL 2 (observed: {"TTL":1} -> "TTL":"2").
//     A lease can therefore never be shorter than 2 s against a default-configured etcd.
//   * Expiry is checked by the leader's lessor every 500 ms (runLoop ticker), so a lease is
//     revoked between TTL and about TTL + 0.5 s after its last renewal (plus the raft round trip);
//     the revoke deletes every key attached to the lease in one revision.
//   * Only the leader expires leases; after a leader change remaining TTLs are extended.
//
// Transport: plain HTTP/1.1 on Boost.Beast (fencecheck/http/client.h), one connection per call,
// closed when the call returns. Options::connect_timeout bounds the connect, request_timeout the
// sending of the request and each wait for the reply's next bytes.
//
// Thread-safety: an EtcdClient holds only immutable configuration (every call is const). Every
// call opens its own HTTP connection and shares nothing with another call, so any member function
// may be called concurrently from any number of threads on one EtcdClient (the worker's keepalive
// thread and main thread share one).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fencecheck {

/// An etcd call that failed. what() names the endpoint, method and path, the HTTP status (or that
/// there was no reply, and why) and etcd's own error message, e.g.
///   "etcd http://127.0.0.1:2379 POST /v3/lease/revoke: HTTP 404, grpc code 5: etcdserver: requested lease not found"
///   "etcd endpoint http://127.0.0.1:1 unreachable: POST /v3/lease/grant: Connection (Connection refused)"
///   "etcd http://127.0.0.1:2379 POST /v3/kv/put: Read timeout (no reply within 5000 ms)"
class EtcdError : public std::runtime_error {
 public:
  EtcdError(std::string endpoint, std::string path, int http_status, int grpc_code, std::string etcd_message,
            std::string what, bool unsent = false);

  [[nodiscard]] const std::string& endpoint() const { return endpoint_; }
  [[nodiscard]] const std::string& path() const { return path_; }
  /// HTTP status of etcd's reply; 0 when there was no reply (unreachable, timeout, reset).
  [[nodiscard]] int http_status() const { return http_status_; }
  /// gRPC status code from etcd's error body ("code"); -1 when the body had none.
  [[nodiscard]] int grpc_code() const { return grpc_code_; }
  /// etcd's own message ("etcdserver: requested lease not found"), or the transport error.
  [[nodiscard]] const std::string& etcd_message() const { return etcd_message_; }
  /// True when no HTTP reply came back (connection refused, timeout, reset).
  [[nodiscard]] bool transport() const { return http_status_ == 0; }
  /// True when the request never left this client: the connection could not be made (refused,
  /// unreachable, or the connect timeout passed), so the member did nothing it asked. False for
  /// every other failure, a read timeout or reset after the request was written included: then
  /// what the request did is unknown.
  [[nodiscard]] bool unsent() const { return unsent_; }

 private:
  std::string endpoint_;
  std::string path_;
  int http_status_;
  int grpc_code_;
  std::string etcd_message_;
  bool unsent_ = false;
};

/// mvccpb.KeyValue. Revisions are etcd store revisions (int64, start at 1, never go backwards
/// within one cluster's life). `lease` is 0 when the key has no lease.
struct KeyValue {
  std::string key;
  std::string value;
  std::int64_t create_revision = 0;  ///< revision of the put that created this key (0 on a DELETE event's kv)
  std::int64_t mod_revision = 0;     ///< revision of the last change (for a DELETE event: the delete's revision)
  std::int64_t version = 0;          ///< number of puts since creation; 0 on a DELETE event's kv
  std::int64_t lease = 0;
  bool operator==(const KeyValue&) const = default;
};

/// Reply to LeaseGrant.
struct LeaseGrant {
  std::int64_t id = 0;
  std::chrono::seconds ttl{0};  ///< the TTL etcd granted: at least its minimum TTL (2 s by default)
};

/// Reply to LeaseTimeToLive.
struct LeaseTimeToLive {
  std::int64_t id = 0;
  std::chrono::seconds ttl{0};          ///< remaining TTL, whole seconds; -1 when the lease is gone
  std::chrono::seconds granted_ttl{0};  ///< TTL at grant / last renewal; 0 when the lease is gone
  [[nodiscard]] bool exists() const { return ttl.count() >= 0; }
};

/// Reply to Lock (v3lock.LockResponse).
struct LockResult {
  std::string key;  ///< the holder's own key: "<name>/<lease id in hex>"; attached to the lease
  /// The reply's header revision. NOT the fencing token: etcd's Lock (concurrency.Mutex) creates
  /// the key first and then waits for every key with a lower create_revision under the prefix to
  /// be deleted; the header it returns is the one of that last wait, i.e. a revision at or after
  /// the previous holder's delete. Uncontended it equals the key's create_revision; contended it
  /// is larger (observed on 3.4.23: key created at revision 3, Lock returned header revision 6 =
  /// the revision of the first holder's unlock). Two holders can thus see header revisions that
  /// do not order them by acquisition, so the token must be the key's create_revision — read it
  /// with range(key) after Lock returns.
  std::int64_t header_revision = 0;
};

/// Reply to DeleteRange for one key.
struct DeleteResult {
  std::int64_t revision = 0;  ///< header revision: the delete's revision when deleted > 0
  std::int64_t deleted = 0;   ///< number of keys deleted (0 when the key did not exist)
};

/// Reply to DeleteRange over a prefix (with prev_kv).
struct DeletePrefixResult {
  std::int64_t revision = 0;      ///< header revision: the delete's revision when anything was deleted
  std::vector<KeyValue> deleted;  ///< every key deleted, as it was just before (create_revision, lease)
};

/// Reply to create_all().
struct CreateAllResult {
  bool created = false;        ///< every key was put
  std::int64_t revision = 0;   ///< the txn's header revision
  std::vector<KeyValue> existing;  ///< when not created: the keys that already existed, in request order
};

/// One watch event (mvccpb.Event) with the header of the watch response that carried it.
struct WatchEvent {
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;
  /// For a PUT: the new key-value. For a DELETE: only key and mod_revision (= the delete's revision).
  KeyValue kv;
  /// The key-value before this event (asked for with prev_kv). For a DELETE of a lock key this
  /// carries its create_revision and lease. Absent when etcd had no previous value (first put)
  /// or the previous revision was compacted.
  std::optional<KeyValue> prev_kv;
  /// Header revision of the response carrying the event. One response may batch events of several
  /// revisions; the event's own revision is kv.mod_revision.
  std::int64_t header_revision = 0;
  [[nodiscard]] std::int64_t revision() const { return kv.mod_revision; }
};

/// Reply to Maintenance.Status of one member (etcdserverpb.StatusResponse): who it is, whom it
/// follows. Member ids are uint64.
struct MemberStatus {
  std::uint64_t member_id = 0;  ///< the answering member's id (header.member_id)
  std::uint64_t leader = 0;     ///< the leader's id as this member knows it; 0: none known
  std::uint64_t raft_term = 0;
  std::uint64_t raft_index = 0;
  std::int64_t revision = 0;    ///< header revision
};

/// Talks to one etcd member at endpoint "http://host:port" through its v3 JSON gateway.
class EtcdClient {
 public:
  struct Options {
    std::chrono::milliseconds connect_timeout{2000};
    /// Bounds every call except lock() and watch(), which have their own bounds.
    std::chrono::milliseconds request_timeout{5000};
  };

  /// Throws std::invalid_argument unless endpoint is "http://host:port" (an optional trailing
  /// "/" is dropped). https is not supported.
  explicit EtcdClient(std::string endpoint);
  EtcdClient(std::string endpoint, Options options);

  [[nodiscard]] const std::string& endpoint() const { return endpoint_; }

  /// POST /v3/lease/grant {"TTL":ttl}. etcd raises a TTL below its minimum (see top of file).
  /// Throws EtcdError.
  LeaseGrant lease_grant(std::chrono::seconds ttl) const;

  /// One renewal: POST /v3/lease/keepalive {"ID":id}; the gateway's stream ends with the request
  /// body, so one POST is one LeaseKeepAliveRequest/Response. Returns the renewed TTL, or nullopt
  /// when the reply has no TTL (proto3 default 0): etcd's way of saying the lease does not exist
  /// (expired or revoked). Throws EtcdError on a transport or HTTP error: then the lease's state
  /// is unknown.
  std::optional<std::chrono::seconds> lease_keepalive(std::int64_t id) const;

  /// POST /v3/lease/revoke: deletes the lease and every key attached to it (one revision).
  /// Returns false when etcd said the lease was not found (already expired or revoked: HTTP 404,
  /// grpc code 5); true when revoked. Throws EtcdError on any other failure.
  bool lease_revoke(std::int64_t id) const;

  /// POST /v3/lease/timetolive. A lease that is gone comes back with TTL -1 (not an error).
  /// Throws EtcdError.
  LeaseTimeToLive lease_time_to_live(std::int64_t id) const;

  /// POST /v3/lock/lock {"name":b64(name),"lease":id}: etcd's distributed lock (v3lock, built on
  /// concurrency.Mutex). It puts "<name>/<lease hex>" attached to `lease_id` and blocks until every
  /// key under "<name>/" with a lower create_revision is gone. Always pass a lease of your own
  /// (never 0): the key lives exactly as long as the lease.
  ///
  /// Blocks for up to `timeout`, or until `stop` is requested; returns nullopt in both cases. The
  /// HTTP connection is then closed, which cancels the server-side call and deletes the waiting
  /// key (observed: a waiter's key created at revision 21 was deleted at 22 once the client
  /// disconnected). If the grant raced with the give-up, the key may still exist: revoke the
  /// lease after a nullopt.
  ///
  /// Pitfall (observed on 3.4.23): if the lease expires while Lock is waiting, Lock still returns
  /// the (already deleted) key once the earlier holders are gone. Always range(key) afterwards and
  /// treat a missing key as "not acquired". Throws EtcdError (unknown lease: HTTP 500, code 2).
  std::optional<LockResult> lock(std::string_view name, std::int64_t lease_id, std::chrono::milliseconds timeout,
                                 std::stop_token stop = {}) const;

  /// POST /v3/lock/unlock {"key":b64(key)}: deletes the holder's key. Returns the reply's header
  /// revision, which is the revision of the delete when the key existed. When the key was already
  /// gone (lease expired) etcd still answers 200 with the current revision: no delete happened at
  /// that revision. Throws EtcdError.
  std::int64_t unlock(std::string_view key) const;

  /// POST /v3/kv/range for exactly one key; nullopt when it does not exist. Throws EtcdError.
  std::optional<KeyValue> range(std::string_view key) const;

  /// Every key with the given prefix, in key order. Throws EtcdError.
  std::vector<KeyValue> range_prefix(std::string_view prefix) const;

  /// POST /v3/kv/put; lease 0 = no lease. Returns the put's revision (header revision).
  /// Throws EtcdError (e.g. unknown lease: HTTP 404, grpc code 5).
  std::int64_t put(std::string_view key, std::string_view value, std::int64_t lease = 0) const;

  /// POST /v3/kv/txn: puts every (key, value), attached to `lease` (0: none), only if none of the
  /// keys exists (one compare per key: CREATE revision == 0), all in one revision; otherwise puts
  /// nothing and ranges every key in the failure branch, returning those that exist. Atomic: of
  /// two such calls on an overlapping key, exactly one creates. Throws EtcdError;
  /// std::invalid_argument for an empty list.
  CreateAllResult create_all(const std::vector<std::pair<std::string, std::string>>& kvs, std::int64_t lease) const;

  /// POST /v3/kv/deleterange for exactly one key, whoever holds it (this is how a "release by
  /// lock name" mistake deletes another holder's key). Throws EtcdError.
  DeleteResult delete_key(std::string_view key) const;

  /// POST /v3/kv/deleterange {"key":b64(prefix),"range_end":b64(prefix_range_end(prefix)),
  /// "prev_kv":true}: deletes EVERY key under the prefix in one revision, whoever holds them (the
  /// "release by lock name" mistake). Returns the revision and the deleted key-values. Throws
  /// EtcdError; std::invalid_argument for an empty prefix (it would delete the whole keyspace).
  DeletePrefixResult delete_prefix(std::string_view prefix) const;

  /// POST /v3/maintenance/status: this member's id and the leader it knows (0: none). Answered by
  /// the member itself, leader or not, with or without a quorum. Throws EtcdError.
  MemberStatus status() const;

  /// POST /v3/maintenance/transfer-leadership {"targetID"}: etcd's MoveLeader, asked of the
  /// leader (a follower answers "etcdserver: not leader"); returns once the target leads. Throws
  /// EtcdError.
  void move_leader(std::uint64_t target_id) const;

  /// GET /health -> {"health":"true"}. Never throws: false on any error or timeout.
  bool health() const;

  using WatchCallback = std::function<void(const WatchEvent&)>;

  /// Watches every key under `prefix` from `start_revision` (0 = from now): POST /v3/watch with
  /// {"create_request":{"key":b64(prefix),"range_end":b64(prefix+1),"start_revision":N,
  /// "prev_kv":true,"progress_notify":true}} and reads the chunked response: one JSON object per
  /// line, {"result":{"header":{...},"events":[...]}}. Calls `callback` once per event, in order,
  /// on the calling thread. Returns the last header revision seen when `stop` is requested or the
  /// server ends the stream. Throws EtcdError when the watch cannot start, etcd reports an error,
  /// or etcd cancels it (e.g. start_revision was compacted: "compact_revision" N). An exception
  /// thrown by `callback` ends the watch and propagates. An empty prefix is rejected
  /// (std::invalid_argument).
  std::int64_t watch(std::string_view prefix, std::int64_t start_revision, const WatchCallback& callback,
                     std::stop_token stop) const;

 private:
  std::string endpoint_;
  std::string host_;
  int port_ = 0;
  Options options_;
};

/// The lock range end for a prefix: the prefix with its last byte incremented (etcd's
/// clientv3.GetPrefixRangeEnd). "lock/" -> "lock0". A prefix of only 0xff bytes gives "\0"
/// (= every key from prefix on). Pure.
[[nodiscard]] std::string prefix_range_end(std::string_view prefix);

}  // namespace fencecheck
