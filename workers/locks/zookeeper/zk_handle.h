// fencecheck — internal to the zookeeper kind: one ZooKeeper session on Debian's multi-threaded C
// client (libzookeeper_mt, <zookeeper/zookeeper.h>), with a bound on every call.
//
// Why not the C client's synchronous calls: a zoo_create() blocks until the reply or until the
// client declares the connection lost, which it does only after 2/3 of the session timeout
// without hearing from the server (the C client's rule, zookeeper.h, zookeeper_interest's
// ZOPERATIONTIMEOUT): against a stopped server a call could block for seconds past any bound the
// worker has. Every call here is the asynchronous one with a completion, waited for at most the
// caller's bound; a call not answered by then gives ZOPERATIONTIMEOUT (its outcome unknown: the
// request may still be executed, and its completion still runs later, harmlessly).
//
// Session events and the one-shot watches set with watch=true (zoo_aexists / zoo_aget_children2
// with watch=1: the client's default watcher, ZooKeeper Programmer's Guide, "ZooKeeper Watches")
// bump a generation counter that wait_change() waits on, and are handed to an optional
// on_event callback. The callback runs on the C client's completion thread: it must not block
// and must not call this Handle's waiting functions (it would wait for itself).
//
// Thread-safety: every member function may be called from any thread concurrently, except the
// destructor (zookeeper_close: after it returns no callback runs). Not from on_event.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include <zookeeper/zookeeper.h>

namespace fencecheck::locks::zk {

using Millis = std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

/// The parts of a znode's Stat the kind reads (ZooKeeper Programmer's Guide, "ZooKeeper Stat
/// Structure").
struct NodeStat {
  std::int64_t czxid = 0;            ///< the zxid of the change that created the znode
  std::int64_t mzxid = 0;            ///< the zxid of the change that last modified it
  std::int64_t pzxid = 0;            ///< the zxid of the change that last modified its children
  std::int32_t version = 0;          ///< changes to its data
  std::int32_t cversion = 0;         ///< changes to its children
  std::int64_t ephemeral_owner = 0;  ///< the owning session of an ephemeral znode, else 0
  std::int32_t num_children = 0;
  /// When it was created, in ms since the Unix epoch, by the wall clock of the leader that
  /// stamped the creating transaction (PrepRequestProcessor: Time.currentWallTime()).
  std::int64_t ctime_ms = 0;
};

struct CreateResult {
  int rc = ZOK;
  std::string path;  ///< the created path (with the sequence suffix)
  NodeStat stat;
};
struct StatResult {
  int rc = ZOK;
  NodeStat stat;
};
struct DeleteResult {
  int rc = ZOK;           ///< the transaction's: ZOK, or the delete's error (ZNONODE, ZBADVERSION, ...)
  std::int64_t zxid = 0;  ///< with ZOK: the transaction's zxid, the delete's
};
struct DataResult {
  int rc = ZOK;
  std::string data;  ///< with ZOK: the znode's data
  NodeStat stat;
};
struct ChildrenResult {
  int rc = ZOK;
  std::vector<std::string> children;  ///< names, not paths, in the server's order
  NodeStat stat;                      ///< the parent's
};

/// "connected", "connecting", "expired", ... for messages.
[[nodiscard]] std::string state_name(int state);
/// "0x1000170e2b50003": a session id as ZooKeeper's own logs spell it.
[[nodiscard]] std::string session_hex(std::int64_t id);
/// A lock name (or lock key) as a znode path: "fencecheck/x" -> "/fencecheck/x"; a name already
/// starting with '/' is kept; trailing slashes are dropped. Throws std::invalid_argument for an
/// empty name or an empty component ("a//b").
[[nodiscard]] std::string znode_path(const std::string& name);
/// The sequence number a sequential znode's name ends with (its last 10 digits: ZooKeeper's
/// "%010d" suffix, Programmer's Guide "Sequence Nodes -- Unique Naming"); nullopt when the name
/// does not end with 10 digits.
[[nodiscard]] std::optional<std::int64_t> sequence_of(const std::string& child);

class Handle {
 public:
  /// type, state, path: what the C client's watcher receives.
  using EventFn = std::function<void(int type, int state, const std::string& path)>;

  /// Opens a new session on `hosts` ("h:p,h:p") asking for `session_timeout` and waits up to
  /// `connect_timeout` until it is connected. `what` names it in messages ("zookeeper
  /// 127.0.0.1:2181"). Throws std::runtime_error when the client cannot be created, when the
  /// server does not connect in time or refuses the session.
  Handle(std::string hosts, Millis session_timeout, Millis connect_timeout, std::string what, EventFn on_event = {});
  /// zookeeper_close(): ends the session on the server (its ephemeral znodes are deleted) when
  /// the connection still works; pending calls complete with ZCLOSING.
  ~Handle();
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  [[nodiscard]] int state() const;
  [[nodiscard]] bool expired() const;
  [[nodiscard]] bool connected() const;
  [[nodiscard]] std::int64_t session_id() const { return session_id_; }
  /// The timeout the server negotiated (clamped into its [minSessionTimeout, maxSessionTimeout]).
  [[nodiscard]] Millis negotiated() const { return negotiated_; }
  [[nodiscard]] const std::string& what() const { return what_; }
  /// The server this client talks to or is connecting to, as its connection string spells it
  /// ("127.0.0.1:2181": zoo_get_current_server); "" when it has none. Thread-safe.
  [[nodiscard]] std::string current_server() const;

  /// Increases on every session event and every watch event.
  [[nodiscard]] std::uint64_t generation() const;
  /// Waits until generation() differs from `seen`, `deadline` passes or `stop` is requested.
  /// True when it changed.
  bool wait_change(std::uint64_t seen, Clock::time_point deadline, const std::stop_token& stop = {});
  /// Waits until the session is connected (true) or expired, `deadline`, `stop` (false).
  bool wait_connected(Clock::time_point deadline, const std::stop_token& stop = {});
  /// Since when the client has had no connection (its last session event that was not
  /// "connected"); nullopt while connected.
  [[nodiscard]] std::optional<Clock::time_point> disconnected_since() const;

  CreateResult create(const std::string& path, const std::string& data, int flags, Millis bound);
  int remove(const std::string& path, int version, Millis bound);
  /// Deletes `path` (version-checked, -1: any) and learns the delete's zxid, which ZooKeeper's
  /// delete reply does not carry: one multi() transaction of the delete and an empty setData on
  /// `marker` (an existing znode: the lock znode), whose returned Stat's mzxid is the transaction's
  /// zxid (Programmer's Guide, "Multi-op": all ops or none, at one zxid). The marker's data and
  /// version change; no recipe here watches a lock znode's data.
  DeleteResult remove_at_zxid(const std::string& path, int version, const std::string& marker, Millis bound);
  StatResult exists(const std::string& path, bool watch, Millis bound);
  ChildrenResult children(const std::string& path, bool watch, Millis bound);
  /// zoo_aget: the znode's data and stat (no watch).
  DataResult get(const std::string& path, Millis bound);
  StatResult set(const std::string& path, const std::string& data, int version, Millis bound);
  /// zoo_async: the server this session talks to catches up with the leader (Programmer's Guide,
  /// "Consistency Guarantees": sync before a read to see every change committed before it).
  int sync(const std::string& path, Millis bound);
  /// Pipelines `count` zoo_aset calls on the existing znode `path` (each one transaction, so the
  /// zxid counter rises by `count`), at most `window` outstanding, and waits up to `bound` for all
  /// of them. ZOK or the first failure.
  int advance_zxid(const std::string& path, std::int64_t count, Millis bound, int window = 256);
  /// Creates every missing component of `path` as a persistent znode (empty data, open ACL).
  /// ZOK, or the first failing call's code.
  int ensure_path(const std::string& path, Millis bound);

  /// "zookeeper 127.0.0.1:2181 create /x/lock-: connection loss" for an error code.
  [[nodiscard]] std::string error(const std::string& call, const std::string& path, int rc) const;

 private:
  static void watcher(zhandle_t* zh, int type, int state, const char* path, void* ctx);

  std::string what_;
  EventFn on_event_;
  zhandle_t* zh_ = nullptr;
  std::int64_t session_id_ = 0;
  Millis negotiated_{0};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::uint64_t generation_ = 0;
  std::optional<Clock::time_point> disconnected_since_;
};

/// One four-letter-word command ("ruok", "srvr", "stat") on host:port over a plain TCP
/// connection (ZooKeeper Administrator's Guide, "The Four Letter Words"; the server must list it
/// in 4lw.commands.whitelist). The reply (the server closes the connection after it), or nullopt
/// when nothing answers within `bound`.
[[nodiscard]] std::optional<std::string> four_letter_word(const std::string& host, int port, const std::string& word,
                                                          Millis bound);
/// The same on an endpoint as a connection string spells it: "host:port" or "[v6]:port". nullopt
/// too when the endpoint has no port that parses.
[[nodiscard]] std::optional<std::string> four_letter_word(const std::string& endpoint, const std::string& word,
                                                          Millis bound);

}  // namespace fencecheck::locks::zk
