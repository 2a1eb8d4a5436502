// fencecheck — internal to the zookeeper kind: the issuer's history of one lock from ZooKeeper's
// own watches (IssuerWatch, lock_service_kind.h).
//
// What it emits (events with source "lock"):
//   lock.grant   a new child of the lock znode: lock_key "<lock>/<child>", token = its czxid,
//                lease_id = its ephemeralOwner (the holder's session), revision = its czxid (the
//                zxid of the create). Like etcd's, a grant is a contender's znode appearing; the
//                lowest one holds the lock.
//   lock.delete  a child gone: lock_key, token (its czxid), lease_id; no revision (a watch event
//                carries no zxid), so the checkers match it to a worker's release.ok by (lock_key,
//                token). detail says why:
//                  "expired"   the server expired the owning session: the server's log says
//                              "Expiring session 0x<owner>, timeout of N ms exceeded"
//                              (ZooKeeperServer.expire, logged at INFO before the session's
//                              ephemeral znodes are deleted, so it is in the log file when the
//                              deletion is seen);
//                  "released"  deleted while its session lived (a delete by its holder, or by
//                              anyone: a release by name), or its session was closed by its client
//                              (zookeeper_close / kazoo's stop(): a deliberate end);
//                  "lost"      the server was restarted on empty data (restarted_fresh());
//                  ""          (no word) a server whose log the harness does not read
//                              (endpoints): an expiry cannot be told from a release there.
// How: one-shot child watches (getChildren with watch, re-armed by each listing: Programmer's Guide,
// "ZooKeeper Watches") and a diff of each listing against the children known, each new child read
// once (exists) for its Stat. Deletions are never missed (a known child absent from a listing);
// a child created and deleted between two listings (within one round trip of the watch event,
// e.g. a try-lock that gives up at once, or any lock taken and released while the watch's
// connection moves to another member of an ensemble) is not seen at all; a holder's znode
// outlives its holder's own verification read and its work, so holders are seen. Such changes are
// counted, never silently dropped: the lock znode's cversion counts every create and delete of a
// child, and a listing whose cversion moved by more than the grants and deletes delivered emits a
// log event (source "lock", kind log) saying how many changes the history lacks.
// In an ensemble the C client moves the session to another server of the connection string when
// its server stops or drops it (a follower cut off from its leader closes its clients' connections
// after syncLimit ticks); the next listing on the new server diffs against the children known.
// The watch's own session (30 s) survives a restart on the same data (the server restores its
// sessions). After a restart on empty data (restarted_fresh()) a new session lists again and
// compares every child's czxid: a same-named child of the new server is a new grant. (The old
// session could not even learn that it expired: a server refuses a client that has seen a later
// zxid than its own, without an answer, until its own counter passes that zxid.)
//
// stop(): sync (zoo_async) and one last listing, whose reply follows every change committed
// before it (ZooKeeper's guarantee: a client sees a watch event before the data after the change),
// delivered before stop() returns (bounded: 5 s); then the thread ends and the session closes.
//
// Thread-safety: events are delivered on the watch's own thread; stop() and restarted_fresh()
// may be called from any thread.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "fencecheck/locks/lock_service_kind.h"

namespace fencecheck::locks::zk {

/// The embedded server's log files, read for "Expiring session 0x..." lines. Thread-safe.
class ExpiryLog {
 public:
  /// A log file to read from now on (each start of the server writes a new one).
  void add(const std::filesystem::path& file);
  /// True when some log file, read up to now, says the server expired `session`.
  bool expired(std::int64_t session);

 private:
  std::mutex mu_;
  std::vector<std::filesystem::path> files_;
  std::unordered_map<std::string, std::uintmax_t> offsets_;
  std::set<std::int64_t> expired_;
};

/// Starts watching `lock` (a lock name) on `hosts` ("h:p,h:p"). `expiries` may be null (the
/// server's log is not readable: deletes carry no word). Throws std::runtime_error when the server
/// does not answer.
[[nodiscard]] std::unique_ptr<IssuerWatch> make_watch(const std::string& hosts, const std::string& lock,
                                                      std::function<void(Event)> sink,
                                                      std::shared_ptr<ExpiryLog> expiries);

}  // namespace fencecheck::locks::zk
