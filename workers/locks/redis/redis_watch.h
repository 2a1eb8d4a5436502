// fencecheck — internal to the redis lock-service kind: the issuer's own history of one lock from
// Redis keyspace notifications (https://redis.io/docs/manual/keyspace-notifications/).
//
// It SUBSCRIBEs to `__keyspace@0__:<lock>` (the server runs with notify-keyspace-events Kg$x) and
// to "<lock>:grants", and turns each notification into an event with source "lock":
//   set      -> lock.grant  (lock_key "<lock>", token and lease_id = owner read from the value)
//   expired  -> lock.delete (detail "expired": Redis deleted the key when its TTL ran out)
//   del      -> lock.delete (detail "deleted": a DEL, i.e. a release, owner-checked or not)
//   evicted  -> lock.delete (detail "evicted": maxmemory; never with the embedded server)
//   expire   -> nothing (a renewal: PEXPIRE of a held key)
// A delete carries the token and owner of the holding it deleted (the last grant's), so that the
// checkers can match it to a worker's release.ok by (lock_key, token) (harness/check/src/
// analysis.cpp): Redis has no revision to match on.
//
// Reading the grant. A notification says only "set", not the value. The fenced acquire script
// (redis_connection.h) PUBLISHes the value it set on "<lock>:grants" in the same script, right
// after the SET; the watch subscribes to that channel too, and Redis delivers the messages in
// the order the script made them (`set`, `expire` for the PX, then the grant's message), so a
// grant of the reference client's is read exactly.
// A grant made by another client (a command worker's own SET NX, redis-py's Lock) publishes
// nothing: its value is read with a GET on a second connection, which races with what happens
// after the SET. Bounded exactly: after the GET the watch sends PING on the subscriber connection
// and reads up to its PONG. Redis runs commands one at a time and queues a message to subscribers
// while it runs the command that caused it, so every message about a change made before the GET
// ran arrives before that PONG. If none of them is a later `set`, the value read is this grant's;
// a nil read means the holding ended before the GET, and a later `set` means the read may be a
// later grant's: in those two cases the grant is reported without a token or owner (detail says
// why), and so is the delete that ends it. Only such a holding shorter than two round trips on
// loopback can be missed that way.
//
// A broken connection (the server stopped: lock-service-restart) is retried every 50 ms. Once
// subscribed again the watch reads the key: a holder it knew that is no longer there gets a
// lock.delete (detail "lost: ...": the restarted server did not have the key), and a holder it did
// not know gets a lock.grant ("... seen after reconnecting"). Changes made while it was
// disconnected are seen only as that difference.
//
// stop() delivers every change made before it was called: the watch thread sends PING with an end
// marker on the subscriber connection and stops at its PONG, which Redis queues after every
// notification of every command that ran before it (the same round trip as etcd's end-marker key,
// without writing a key).
//
// Thread-safety: a thread of its own delivers events to the sink; stop() and restarted_fresh()
// may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "fencecheck/locks/lock_service_kind.h"
#include "redis_connection.h"

namespace fencecheck::locks::redis_detail {

class RedisWatch final : public IssuerWatch {
 public:
  /// Subscribes and reads the key's current value (a holder before the watch is known, not
  /// reported) before returning. Throws LockServiceUnavailable when the server does not answer.
  /// carry_value: each lock.grant and lock.delete also carries the holding's whole value in
  /// Event::line ("" when it could not be read), for a watch that matches values across servers
  /// (redlock's majority, workers/locks/redlock/redlock_watch.h); such events are that watch's
  /// input, never the history's.
  RedisWatch(Endpoint endpoint, std::string lock, std::function<void(Event)> sink, bool carry_value = false);
  ~RedisWatch() override;
  void stop() override;
  void restarted_fresh() override { fresh_ = true; }

 private:
  /// The holding the watch believes exists (the last grant it reported).
  struct Holder {
    std::string value;  ///< the key's value as read; empty when it could not be read
    std::optional<std::int64_t> owner;
    std::optional<std::int64_t> token;
  };

  void connect();
  void run(std::stop_token stop);
  /// Handles one reply from the subscriber connection; true when it was the end marker's PONG.
  bool handle(Reply reply);
  void on_set();
  void on_delete(const std::string& detail);
  /// PING `nonce` on the subscriber and read until its PONG; every other reply goes to queue_.
  void sync(const std::string& nonce);
  void reconcile();
  void emit(Event e);

  bool carry_value_;
  Endpoint endpoint_;
  std::string lock_;
  std::string channel_;  ///< the lock key's keyspace notifications
  std::string grants_;   ///< the fenced acquire's grant messages ("<lock>:grants")
  std::function<void(Event)> sink_;
  std::unique_ptr<Connection> sub_;     ///< subscribed to channel_
  std::unique_ptr<Connection> reader_;  ///< GETs
  std::deque<Reply> queue_;             ///< subscriber replies read ahead, in arrival order
  std::optional<Holder> current_;
  std::uint64_t syncs_ = 0;
  std::atomic<bool> fresh_{false};
  std::atomic<bool> end_requested_{false};
  std::mutex mu_;
  std::condition_variable ended_cv_;
  bool ended_ = false;
  std::jthread thread_;  // last: starts after the fields above
};

}  // namespace fencecheck::locks::redis_detail
