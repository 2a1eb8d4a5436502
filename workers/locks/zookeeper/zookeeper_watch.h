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
//                  ""          (no word) an ensemble member that logged the expiry lost its
//                              leadership after it (ExpiryLog below: it may never have committed),
//                              or a server whose log the harness does not read
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
// In an ensemble (a connection string of several servers) the watch, not the C client, picks the
// server: each session is opened on ONE server (the C client, given them all, picks one at random
// and waits two thirds of the session timeout, 20 s, for a stopped one's answer before it tries
// another; it reconnects on its own to whichever it picks). The watch leaves its server when
//   - a sync (through the leader) does not complete within its patience: 1 s on a quiet machine,
//     8 times the slowest of the last 8 syncs on a loaded one, at most 4 s (a stopped server, or a
//     follower cut off from its leader that still answers reads from a stale copy for syncLimit
//     ticks); while idle it probes every 250 ms, and every listing follows a sync;
//   - the session loses its connection (its server was killed, or dropped its clients to elect).
// It then tries the next servers in turn (the one left last): each must answer `srvr` within the
// patience and not say it is not serving, then connect within the patience. The old session is
// closed on a thread of the watch's own. The new session's first listing follows a sync and reads
// every child again, diffing against the children known: a child deleted meanwhile is a
// lock.delete, a new one a lock.grant; only a child created and deleted within the move is
// missing, and counted (cversion, above). How long a move takes, measured with
// zookeeper_ensemble_test: docs/lock-service-zookeeper.md, "The issuer's watch in an ensemble".
// On a standalone server the watch keeps one session (30 s), which survives a restart on the same
// data (the server restores its sessions). After a restart on empty data (restarted_fresh()) a new session lists again and
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

/// The embedded servers' log files, read for "Expiring session 0x..." lines. Thread-safe.
///
/// In an ensemble only the leader expires sessions, and a leader that was stopped (SIGSTOP) or cut
/// off wakes up still believing it leads: its session tracker logs "Expiring session" for every
/// session whose pings it missed, proposes the closes, and then finds it has no quorum ("LOOKING"
/// in its log): those closes never commit. So an expiry line followed in the same log by that
/// member's "LOOKING" proves nothing: Verdict::kUnknown (the history then gives the delete no
/// word) unless another member's log has an expiry line for the session with no LOOKING after it.
class ExpiryLog {
 public:
  enum class Verdict { kNo, kExpired, kUnknown };
  /// A log file to read from now on (each start of a server writes a new one).
  void add(const std::filesystem::path& file);
  /// Whether the logs read up to now say the service expired `session`.
  Verdict verdict(std::int64_t session);
  /// verdict() == kExpired.
  bool expired(std::int64_t session) { return verdict(session) == Verdict::kExpired; }

 private:
  struct File {
    std::uintmax_t offset = 0;
    std::uint64_t lines = 0;         // whole lines read
    std::uint64_t last_looking = 0;  // the line number of its last "LOOKING" line; 0: none
    std::vector<std::pair<std::int64_t, std::uint64_t>> expiries;  // (session, line number)
  };
  std::mutex mu_;
  std::vector<std::filesystem::path> files_;
  std::unordered_map<std::string, File> read_;
};

/// Where a watch made by make_watch is: the server its session is on ("h:p"; "" while it has
/// none, between two servers of an ensemble; a standalone: its one endpoint) and how many times
/// it has left an ensemble's server for another.
struct WatchPlace {
  std::string server;
  int moves = 0;
};
/// The place of `watch` (thread-safe). Throws std::invalid_argument when it was not made by
/// make_watch.
[[nodiscard]] WatchPlace watch_place(const IssuerWatch& watch);

/// Starts watching `lock` (a lock name) on `hosts` ("h:p,h:p"). `expiries` may be null (the
/// server's log is not readable: deletes carry no word). Throws std::runtime_error when the server
/// does not answer.
[[nodiscard]] std::unique_ptr<IssuerWatch> make_watch(const std::string& hosts, const std::string& lock,
                                                      std::function<void(Event)> sink,
                                                      std::shared_ptr<ExpiryLog> expiries);

}  // namespace fencecheck::locks::zk
