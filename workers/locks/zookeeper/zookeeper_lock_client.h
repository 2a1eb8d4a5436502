// fencecheck — the zookeeper kind's LockClient (lock_client.h): the standard lock recipe on
// Debian's C client (libzookeeper_mt), one ZooKeeper session per Session.
//
// Endpoint JSON: {"kind":"zookeeper","endpoints":["127.0.0.1:2181", ...]} (the C client's
// connection string is the endpoints joined by commas).
//
// Session = lease. open_session(ttl) opens a ZooKeeper session asking for a session timeout of
// `ttl`; the server clamps it into its [minSessionTimeout, maxSessionTimeout] (Administrator's
// Guide, "Advanced Configuration"), and Session::ttl is what it granted (zoo_recv_timeout). The
// embedded server (embedded_zookeeper.h) is configured so that 1..60 s is granted as asked.
//
// keepalive(s): the C client renews the session by itself (it pings after 1/3 of the timeout
// without traffic), so keepalive only reports what the client believes: true while connected,
// false once the session is expired (or the session was closed), LockServiceError while it is
// connecting (the server may or may not still count the session: unknown). A holder that was
// stopped (SIGSTOP) past the timeout still reads "connected" for the moment between its resume
// and its client thread noticing the closed connection (docs/lock-service-zookeeper.md).
//
// remaining(s): one read (exists "/") round trip; the server counts any request as a sign of
// life, so after it the session has the whole timeout again. Returns the negotiated timeout minus
// the time since that request was sent: a lower bound (the client's own pings since, which it
// does not expose, only renew it further). nullopt when the session is expired; LockServiceError
// when the read is not answered.
//
// acquire(name, s): ZooKeeper's recipe (ZooKeeper docs, "Recipes and Solutions", "Locks"):
//   1. create the lock znode "/<name>" and its parents as persistent znodes when missing
//      (lock name "fencecheck/x" is the znode path "/fencecheck/x");
//   2. create "/<name>/lock-" EPHEMERAL|SEQUENTIAL (zoo_acreate2: its Stat comes back with it);
//   3. getChildren (no watch); the lowest sequence number holds the lock;
//   4. otherwise exists(watch) on the child with the next lower sequence number only (no herd
//      effect: one waiter wakes per release), wait for its event, go to 3.
//   Then the holder's znode is read again (exists): it must still exist and be owned by this
//   session, else the grant came too late (the session expired while waiting: LockServiceError
//   saying so, as any expiry before the grant).
//   A create whose reply was lost (connection loss) is recovered as the recipe says: after the
//   reconnection the child owned by this session (ephemeralOwner) is ours. A node of ours deleted
//   by someone else while waiting (a release by name) is created again. On timeout or stop the
//   node is deleted, so nothing is left that could be granted later. A waiter whose client has
//   had no connection for its whole session timeout gives up with LockServiceError (as Curator's
//   default connection-state policy does): a running server has expired it by then, and a server
//   restarted on empty data refuses it without an answer for as long as its zxid is behind the
//   one this client last saw, so the client alone would retry for ever.
//
// Token = the lock znode's czxid (the zxid of the create). ZooKeeper's Programmer's Guide, "Time
// in ZooKeeper": every change receives a zxid, which "exposes the total ordering of all changes
// to ZooKeeper" (if zxid1 < zxid2, zxid1 happened before zxid2); "ZooKeeper Stat Structure":
// czxid is "the zxid of the change that caused this znode to be created". A later grant's znode
// was created after the earlier holder's znode (it waited for it), so its czxid is larger: tokens
// strictly increase across grants, and across lock names. Not the sequence number: that counter
// is per parent znode ("Sequence Nodes": maintained by the parent), so two lock names share
// values, and it starts again at 0 when the lock znode is deleted and created anew. zxids have
// their own limit: the high 32 bits are the leader's epoch, which rises with every new leader (an
// election, a restart of an ensemble); a standalone server restarted on its data continues its
// counter from its snapshot and transaction log. A server started on an empty data directory
// starts again at zxid 0: the tokens go backwards (the fresh_data lock-service-restart).
//
// Holding::revision = the lock znode's pzxid (the zxid of the last change to its children) in
// the getChildren that saw the holder lowest: the issuer's order at which the lock was seen held.
//
// release(name, h, s): reads the holder's znode and deletes it with the version it read, only when
// it is this session's (ephemeralOwner) with this holding's czxid: never another holder's (a
// delete with version -1 would delete whatever znode has that path). Released::revision is the
// delete's zxid: ZooKeeper's delete reply carries none, so the delete is one multi() with an empty
// setData on the lock znode, whose Stat comes back with the transaction's zxid (zk_handle.h). The
// issuer's lock.delete carries no revision (a watch event has no zxid): the checkers match it to
// the release by (lock_key, token). With the session expired, existed=false (the server deletes an
// expired session's ephemeral znodes itself).
// release_by_name(name, s): the mistake: deletes every child of the lock znode, version -1, each
// in its own multi() (so each Released has its delete's zxid).
// close_session(s): zookeeper_close (the server deletes the session's ephemeral znodes).
//
// Call bounds: connect_timeout for open_session, request_timeout for every call (zk_handle.h: the
// asynchronous API waited for at most the bound); acquire's own timeout bounds the whole wait.
//
// Thread-safety: as LockClient (lock_client.h): the sessions' map is guarded; each session's
// calls may run concurrently.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "fencecheck/locks/lock_client.h"

namespace fencecheck::locks::zk {

class Handle;

class ZooKeeperLockClient final : public LockClient {
 public:
  /// `endpoints`: "host:port" each (at least one). Throws std::invalid_argument when empty.
  ZooKeeperLockClient(std::vector<std::string> endpoints, LockClientOptions options);
  ~ZooKeeperLockClient() override;

  [[nodiscard]] std::string_view kind() const override { return "zookeeper"; }
  [[nodiscard]] std::string describe() const override;
  [[nodiscard]] std::string session_lost_detail() const override;

  Session open_session(std::chrono::milliseconds ttl) override;
  bool keepalive(const Session& s) override;
  std::optional<std::chrono::milliseconds> remaining(const Session& s) override;
  std::optional<Holding> acquire(const std::string& name, const Session& s, std::chrono::milliseconds timeout,
                                 std::stop_token stop) override;
  Released release(const std::string& name, const Holding& h, const Session& s) override;
  std::vector<Released> release_by_name(const std::string& name, const Session& s) override;
  bool close_session(const Session& s) override;

 private:
  /// The session's handle, or nullptr when it was closed (or never opened here).
  std::shared_ptr<Handle> handle(const Session& s) const;

  std::string hosts_;
  LockClientOptions options_;
  mutable std::mutex mu_;
  std::map<std::int64_t, std::shared_ptr<Handle>> sessions_;
};

}  // namespace fencecheck::locks::zk
