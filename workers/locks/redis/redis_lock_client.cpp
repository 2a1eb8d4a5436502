// RedisLockClient: the worker's lock client for the redis lock-service kind (lock_client.h), on
// Debian's hiredis 0.14. docs/lock-service-redis.md says why each step is what it is.
//
//   the lock     the key "<lock>" (the scenario's lock name), SET NX PX ttl: held while it exists
//   the session  an owner value, a random non-zero 63-bit integer of this client's choosing; the
//                key's PX expiry is the lease. Nothing exists on the server before acquire.
//   the token    token "fenced" (default): INCR of "<lock>:fence" in the same Lua script as the
//                SET NX, only when the SET set; the key's value is "<owner>:<token>" (the shape of
//                Redisson's RFencedLock and bsm/redislock's fence key). token "none": the plain
//                Redis lock (redis-py's Lock, most hand-written ones): SET NX PX alone, value
//                "<owner>", no token at all. A holder still has to present something to the
//                resource, and a client without a token sends a constant: Holding::token is 1 for
//                every grant, which the store's per-key fence accepts from every holder alike.
//   keepalive    owner-checked PEXPIRE (Redisson's watchdog): true renewed, false the key is gone
//                or another holder's; true before any holding (nothing to renew).
//   remaining    owner-checked PTTL; the session's TTL before any holding.
//   release      owner-checked DEL; release_by_name a plain, unchecked DEL of "<lock>".
//   revision     none: Redis has no ordering number a client can read (nullopt throughout).
//
// Every call runs on a connection of a small pool (one per concurrent caller), so the keepalive
// thread never queues behind a main thread's call that waits out a partition.
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <stop_token>
#include <thread>

#include <hiredis/hiredis.h>
#include <nlohmann/json.hpp>

#include "../kinds.h"
#include "redis_connection.h"

namespace fencecheck::locks {
namespace {

using redis_detail::Connection;
using redis_detail::Endpoint;
using redis_detail::Reply;
using std::chrono::milliseconds;

/// Connections to one endpoint, each used by one caller at a time.
class Pool {
 public:
  Pool(Endpoint endpoint, LockClientOptions options) : endpoint_(std::move(endpoint)), options_(options) {}

  /// Runs `call` on a connection of the pool (a new one when all are in use); a connection that
  /// broke is dropped, never reused.
  template <typename Call>
  auto with(Call&& call) {
    std::unique_ptr<Connection> c;
    {
      std::lock_guard lock(mu_);
      while (!c && !idle_.empty()) {
        c = std::move(idle_.back());
        idle_.pop_back();
        if (c->stale()) c.reset();  // closed by a server that restarted since
      }
    }
    if (!c) c = std::make_unique<Connection>(endpoint_, options_.connect_timeout, options_.request_timeout);
    struct Return {
      Pool& pool;
      std::unique_ptr<Connection>& c;
      ~Return() {
        if (c && !c->broken()) {
          std::lock_guard lock(pool.mu_);
          pool.idle_.push_back(std::move(c));
        }
      }
    } give_back{*this, c};
    return call(*c);
  }

 private:
  Endpoint endpoint_;
  LockClientOptions options_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_;
};

Reply eval(Connection& c, std::string_view script, std::vector<std::string> keys, std::vector<std::string> args,
           std::string_view what) {
  std::vector<std::string> argv{"EVAL", std::string(script), std::to_string(keys.size())};
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  return c.command(argv, what);
}

std::int64_t integer_of(const Reply& r, std::string_view what, const std::string& endpoint) {
  if (r->type != REDIS_REPLY_INTEGER)
    throw LockServiceError("redis " + endpoint + " " + std::string(what) + ": expected an integer, got " +
                           redis_detail::describe(r.get()));
  return r->integer;
}

class RedisLockClient final : public LockClient {
 public:
  RedisLockClient(Endpoint endpoint, bool fenced, LockClientOptions options)
      : endpoint_(std::move(endpoint)), fenced_(fenced), pool_(endpoint_, options) {}

  std::string_view kind() const override { return "redis"; }
  std::string describe() const override {
    return "redis " + endpoint_.url() + (fenced_ ? " (token: fenced, INCR <lock>:fence)" : " (token: none)");
  }

  std::string session_lost_detail() const override {
    return "renewal (owner-checked PEXPIRE) answered 0: the lock key is gone (its TTL ran out, or a restart lost it) "
           "or another holder's";
  }

  Session open_session(milliseconds ttl) override {
    if (ttl.count() < 1) throw std::invalid_argument("redis: a lease TTL must be at least 1 ms, got " + std::to_string(ttl.count()));
    // A random non-zero 63-bit owner value: two holders' values differ (owner-checked calls rely on
    // it), as with redis-py's uuid token or Redisson's "<client id>:<thread id>".
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    std::int64_t id = 0;
    while (id == 0) id = static_cast<std::int64_t>(rng() >> 1);
    std::lock_guard lock(mu_);
    sessions_[id] = Held{};
    return Session{id, ttl};
  }

  bool keepalive(const Session& s) override {
    const auto held = holding_of(s);
    if (!held) return true;  // no key yet: nothing to renew, nothing lost
    const Reply r = pool_.with([&](Connection& c) {
      return eval(c, redis_detail::kRenew, {held->name}, {held->value, std::to_string(s.ttl.count())}, "EVAL renew");
    });
    return integer_of(r, "EVAL renew", endpoint_.text()) == 1;
  }

  std::optional<milliseconds> remaining(const Session& s) override {
    const auto held = holding_of(s);
    if (!held) return s.ttl;
    const Reply r = pool_.with([&](Connection& c) {
      return eval(c, redis_detail::kRemaining, {held->name}, {held->value}, "EVAL remaining");
    });
    const std::int64_t pttl = integer_of(r, "EVAL remaining", endpoint_.text());
    // -2: not ours (gone); -1: ours without an expiry, which this client never leaves behind.
    if (pttl == -2) return std::nullopt;
    return milliseconds(pttl < 0 ? 0 : pttl);
  }

  std::optional<Holding> acquire(const std::string& name, const Session& s, milliseconds timeout,
                                 std::stop_token stop) override {
    check_name(name);
    {
      std::lock_guard lock(mu_);
      sessions_[s.id].tried = name;  // close_session cleans up a grant whose reply was lost
    }
    const std::string owner = std::to_string(s.id);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    milliseconds backoff{5};
    while (true) {
      if (stop.stop_requested()) return std::nullopt;
      std::optional<std::int64_t> token = try_once(name, owner, s.ttl);
      if (token) {
        Holding h{name, *token, std::nullopt};
        std::lock_guard lock(mu_);
        sessions_[s.id] = Held{name, fenced_ ? owner + ":" + std::to_string(*token) : owner, name};
        return h;
      }
      // Polling: Redis has no queue of waiters (Redisson waits on a pub/sub message, then retries
      // the same way). A short, growing backoff with jitter, never past the deadline.
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) return std::nullopt;
      static thread_local std::mt19937 jitter{std::random_device{}()};
      const milliseconds nap = std::min<milliseconds>(
          backoff + milliseconds(jitter() % 5), std::chrono::duration_cast<milliseconds>(deadline - now) + milliseconds(1));
      std::mutex m;
      std::condition_variable_any cv;
      std::unique_lock lock(m);
      cv.wait_for(lock, stop, nap, [] { return false; });
      backoff = std::min(backoff * 2, milliseconds(50));
    }
  }

  Released release(const std::string& name, const Holding& h, const Session& s) override {
    const std::string value = fenced_ ? std::to_string(s.id) + ":" + std::to_string(h.token) : std::to_string(s.id);
    const Reply r = pool_.with(
        [&](Connection& c) { return eval(c, redis_detail::kRelease, {name}, {value}, "EVAL release"); });
    const bool deleted = integer_of(r, "EVAL release", endpoint_.text()) == 1;
    forget(s, name);
    Released out;
    out.lock_key = name;
    if (fenced_) out.token = h.token;
    out.lease_id = s.id;
    out.existed = deleted;
    return out;
  }

  std::vector<Released> release_by_name(const std::string& name, const Session& s) override {
    const Reply r = pool_.with(
        [&](Connection& c) { return eval(c, redis_detail::kDeleteAny, {name}, {}, "EVAL delete-any"); });
    forget(s, name);
    if (r->type == REDIS_REPLY_NIL) return {};
    if (r->type != REDIS_REPLY_STRING)
      throw LockServiceError("redis " + endpoint_.text() + " EVAL delete-any: expected the deleted value, got " +
                             redis_detail::describe(r.get()));
    const auto v = redis_detail::parse_lock_value(std::string_view(r->str, r->len));
    Released out;
    out.lock_key = name;
    out.token = v.token;
    out.lease_id = v.owner;
    out.own = v.owner == s.id;
    return {out};
  }

  bool close_session(const Session& s) override {
    std::string tried;
    {
      std::lock_guard lock(mu_);
      auto it = sessions_.find(s.id);
      if (it == sessions_.end()) return false;
      tried = it->second.tried;
      sessions_.erase(it);
    }
    // A grant whose reply was lost may have left this owner's key: delete it (owner-checked), the
    // way revoking an etcd lease deletes a key a late grant created.
    if (!tried.empty())
      pool_.with([&](Connection& c) {
        return eval(c, redis_detail::kDropOwner, {tried}, {std::to_string(s.id)}, "EVAL drop-owner");
      });
    return true;
  }

 private:
  struct Held {
    std::string name;   ///< the lock held, "" when none
    std::string value;  ///< the key's value while held
    std::string tried;  ///< the last lock asked for
  };

  static void check_name(const std::string& name) {
    if (name.empty()) throw std::invalid_argument("redis: the lock name must not be empty");
  }

  std::optional<std::int64_t> try_once(const std::string& name, const std::string& owner, milliseconds ttl) {
    const std::string px = std::to_string(ttl.count());
    if (!fenced_) {
      const Reply r = pool_.with([&](Connection& c) {
        return c.command({"SET", name, owner, "NX", "PX", px}, "SET NX PX");
      });
      if (r->type == REDIS_REPLY_NIL) return std::nullopt;
      return 1;  // no token: the constant a client without one sends (top of file)
    }
    const Reply r = pool_.with([&](Connection& c) {
      return eval(c, redis_detail::kAcquireFenced, {name, redis_detail::fence_key(name)}, {owner, px}, "EVAL acquire");
    });
    if (r->type == REDIS_REPLY_NIL) return std::nullopt;
    return integer_of(r, "EVAL acquire", endpoint_.text());
  }

  std::optional<Held> holding_of(const Session& s) {
    std::lock_guard lock(mu_);
    auto it = sessions_.find(s.id);
    if (it == sessions_.end() || it->second.name.empty()) return std::nullopt;
    return it->second;
  }

  void forget(const Session& s, const std::string& name) {
    std::lock_guard lock(mu_);
    auto it = sessions_.find(s.id);
    if (it != sessions_.end() && it->second.name == name) {
      it->second.name.clear();
      it->second.value.clear();
    }
  }

  Endpoint endpoint_;
  bool fenced_;
  Pool pool_;
  std::mutex mu_;
  std::map<std::int64_t, Held> sessions_;  ///< by owner value
};

}  // namespace

namespace detail {

std::unique_ptr<LockClient> make_redis_lock_client(const nlohmann::json& endpoint, const LockClientOptions& options) {
  if (!endpoint.contains("endpoints") || !endpoint["endpoints"].is_array() || endpoint["endpoints"].empty() ||
      !endpoint["endpoints"][0].is_string())
    throw std::invalid_argument("redis lock service endpoint: expected \"endpoints\": [\"redis://host:port\"], got " +
                                endpoint.dump());
  std::string error;
  auto ep = redis_detail::parse_endpoint(endpoint["endpoints"][0].get<std::string>(), &error);
  if (!ep) throw std::invalid_argument("redis lock service endpoint: " + error);
  bool fenced = true;
  if (endpoint.contains("token")) {
    const auto& t = endpoint["token"];
    if (!t.is_string() || (t != "fenced" && t != "none"))
      throw std::invalid_argument("redis lock service endpoint: \"token\" must be \"fenced\" or \"none\", got " + t.dump());
    fenced = t == "fenced";
  }
  return std::make_unique<RedisLockClient>(std::move(*ep), fenced, options);
}

}  // namespace detail
}  // namespace fencecheck::locks
