// fencecheck — internal to the redlock lock-service kind: the issuer's own history of one Redlock
// lock, read from every master (docs/lock-service-redlock.md, "The issuer's history").
//
// Redlock (https://redis.io/docs/latest/develop/use/patterns/distributed-locks/, "The Redlock
// algorithm") holds a lock when a majority of N independent masters hold the key with the
// client's random value. No master knows of the others, so the lock as a whole has no history of
// its own: this watch makes it from the masters' own. Each master is watched by the redis kind's
// RedisWatch (keyspace notifications; redis_watch.h) with carry_value, and RedlockTally keeps
// which value each master holds now:
//   - a lock.grant of the lock when a value comes to be held by a majority (floor(N/2)+1) of the
//     masters (detail "granted by a majority: members 1, 2, 3 of 5");
//   - a lock.delete when the value that had the majority falls below it (detail "expired" when the
//     master whose change took it below expired the key, as redis says: a clock jump's doing, or a
//     holder gone quiet; "deleted" for a DEL, i.e. a release; the redis kind's "lost: ..." after a
//     master restarted without the key). An "expired" is the issuer's word that the holding ended
//     by expiry (harness/check/src/analysis.cpp, delete_is_expiry).
// A value held by a minority only (a contender's partial acquisition, which the Redlock client
// undoes at once) makes no event of the lock: it was never granted. Grant and delete carry the
// owner and token parsed from the value where it has the redis kind's "<owner>:<token>" form
// (node-redlock's random hex values have neither). Every master's own change is logged at debug
// level with its member number.
//
// Thread-safety: RedlockTally is not thread-safe (RedlockWatch serialises it); RedlockWatch's
// member watches deliver on threads of their own, and the sink is called under one mutex, so the
// lock's events come one at a time in the order the tally saw the masters' changes.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "../redis/redis_connection.h"
#include "../redis/redis_watch.h"
#include "fencecheck/locks/lock_service_kind.h"
#include "fencecheck/proto/event.h"

namespace fencecheck::locks::redlock_detail {

/// The majority of `members` masters: floor(members/2) + 1. Pure.
[[nodiscard]] constexpr int quorum(int members) { return members / 2 + 1; }

/// The lock as a whole from its masters' changes. Pure state machine.
class RedlockTally {
 public:
  /// `members` masters (>= 1), numbered 1..members; the lock's name for the events.
  RedlockTally(int members, std::string lock);
  /// One master's change, as its RedisWatch(carry_value) reported it: a lock.grant (value in
  /// `line`, "" when unknown) or a lock.delete (its detail). Returns the lock's own events it
  /// causes, in order (none, a delete, a grant, or a delete then a grant), stamped with the
  /// member event's times. Throws std::out_of_range for a member outside 1..members.
  [[nodiscard]] std::vector<Event> on_member(int member, const Event& change);
  /// The value a majority holds now, or nullopt.
  [[nodiscard]] const std::optional<std::string>& held() const { return held_; }

 private:
  int members_;
  std::string lock_;
  std::vector<std::optional<std::string>> values_;  ///< per member (index 0 = member 1); "" unknown
  std::optional<std::string> held_;
};

/// The issuer watch over every master (IssuerWatch): one RedisWatch per master feeding a tally.
class RedlockWatch final : public IssuerWatch {
 public:
  /// Subscribes to every master before returning. Throws LockServiceUnavailable when one does not
  /// answer (the watches already made are stopped).
  RedlockWatch(const std::vector<redis_detail::Endpoint>& masters, const std::string& lock, std::function<void(Event)> sink);
  ~RedlockWatch() override;
  /// Stops every master's watch (each delivers what happened before, bounded by 5 s).
  void stop() override;
  void restarted_fresh() override;

 private:
  void on_member(int member, Event e);

  std::mutex mu_;
  RedlockTally tally_;
  std::function<void(Event)> sink_;
  std::vector<std::unique_ptr<redis_detail::RedisWatch>> watches_;  // last: they call on_member
};

}  // namespace fencecheck::locks::redlock_detail
