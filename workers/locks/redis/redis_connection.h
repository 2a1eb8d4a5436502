// fencecheck — internal to the redis lock-service kind: one blocking connection to a Redis server
// over Debian's hiredis 0.14 (RESP2), the endpoint spelling, and the Lua scripts of the lock.
//
// Used by both sides of the kind: RedisLockClient (the worker's, redis_lock_client.cpp) and the
// harness's RedisKind / RedisWatch (redis_kind.cpp, redis_watch.cpp). Not a public header.
//
// Thread-safety: a Connection is used by one thread at a time (hiredis contexts are not
// thread-safe); the free functions are pure.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

struct redisContext;
struct redisReply;

namespace fencecheck::locks::redis_detail {

/// host:port of one Redis server.
struct Endpoint {
  std::string host;
  int port = 0;
  /// "redis://host:port", the kind's spelling (lock_service_kind.h).
  [[nodiscard]] std::string url() const;
  /// "host:port", for messages.
  [[nodiscard]] std::string text() const;
};

/// Parses "redis://host:port" (port 1..65535; no user, password, database or query: the kind
/// speaks to database 0 of an unauthenticated server). nullopt with `error` set (what was expected
/// and what came) otherwise. Pure.
[[nodiscard]] std::optional<Endpoint> parse_endpoint(std::string_view url, std::string* error = nullptr);

/// A reply, freed with freeReplyObject.
struct ReplyDeleter {
  void operator()(redisReply* r) const;
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

/// The reply's shape, for messages: "integer 3", "nil", "error NOSCRIPT ...", "string \"a:1\"".
[[nodiscard]] std::string describe(const redisReply* r);

/// One TCP connection (hiredis redisContext, blocking mode).
class Connection {
 public:
  /// Connects within `connect_timeout`; every later send and receive is bounded by `io_timeout`
  /// (SO_SNDTIMEO / SO_RCVTIMEO through redisSetTimeout; zero: unbounded, for a subscriber that
  /// polls). Throws LockServiceError "redis host:port connect: <reason>".
  Connection(Endpoint endpoint, std::chrono::milliseconds connect_timeout, std::chrono::milliseconds io_timeout);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  /// Sends one command and waits for its reply. A Redis error reply ("-ERR ...") is thrown as
  /// LockServiceError naming `what` (the caller's name for the call, e.g. "EVAL acquire") and the
  /// endpoint; so is an I/O error or a timeout, after which the connection is broken() for good.
  Reply command(const std::vector<std::string>& argv, std::string_view what);
  /// Queues a command without waiting (a subscriber's SUBSCRIBE / PING); its reply comes through
  /// next_reply(). Throws LockServiceError on an I/O error.
  void send(const std::vector<std::string>& argv, std::string_view what);
  /// The next reply already read or readable within `wait`; nullptr when none arrived in time.
  /// Throws LockServiceError when the connection broke (EOF, I/O error: the server went away).
  Reply next_reply(std::chrono::milliseconds wait);

  /// True after an I/O error: the connection cannot be used again.
  [[nodiscard]] bool broken() const { return broken_; }
  /// An idle connection with something to read: the server closed it (a restart) or sent what
  /// nobody asked for. Either way it must not be reused. Does not block.
  [[nodiscard]] bool stale() const;
  [[nodiscard]] const Endpoint& endpoint() const { return endpoint_; }

 private:
  [[noreturn]] void fail(std::string_view what, const std::string& why);

  Endpoint endpoint_;
  redisContext* ctx_ = nullptr;
  bool broken_ = false;
};

// The lock's Lua scripts (EVAL; Redis runs a script atomically: no other command runs in between,
// https://redis.io/docs/manual/programmability/eval-intro/). KEYS[1] is the lock key "<lock>",
// KEYS[2] the fence counter "<lock>:fence"; the lock key's value is "<owner>:<token>" (token:
// fenced) or "<owner>" (token: none), the owner a random non-zero 63-bit decimal.

/// Fenced acquire. ARGV: owner, TTL in ms. The token is the counter's next value; the key is
/// SET NX PX with "<owner>:<token>" and, only when it was set, the counter is INCRed to that
/// value, which the script returns; nil (a Lua false) when the key is held. One SET: one `set`
/// keyspace notification per grant. The value is also PUBLISHed on "<lock>:grants" (grants_channel)
/// in the same script, so the watch reads each grant's token from the message that follows the
/// notification instead of racing a GET against a holder that releases at once.
inline constexpr std::string_view kAcquireFenced = R"lua(
local token = tonumber(redis.call('GET', KEYS[2]) or '0') + 1
local value = ARGV[1] .. ':' .. token
if redis.call('SET', KEYS[1], value, 'NX', 'PX', ARGV[2]) then
  redis.call('PUBLISH', KEYS[1] .. ':grants', value)
  return redis.call('INCR', KEYS[2])
end
return false
)lua";

/// Owner-checked renewal (Redisson's watchdog, redis-py's Lock.reacquire). ARGV: value, TTL in ms.
/// 1: renewed; 0: the key is gone or another holder's.
inline constexpr std::string_view kRenew = R"lua(
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
)lua";

/// Owner-checked remaining TTL. ARGV: value. The key's PTTL in ms; -2 when it is not ours.
inline constexpr std::string_view kRemaining = R"lua(
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PTTL', KEYS[1])
end
return -2
)lua";

/// Owner-checked release. ARGV: value. 1: deleted; 0: gone or another holder's (left alone).
inline constexpr std::string_view kRelease = R"lua(
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
)lua";

/// Owner-checked clean-up of whatever a session may hold (a grant whose reply was lost). ARGV:
/// owner. Deletes the key when its value is "<owner>" or "<owner>:<anything>"; returns 1 or 0.
inline constexpr std::string_view kDropOwner = R"lua(
local v = redis.call('GET', KEYS[1])
if v and (v == ARGV[1] or string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. ':') then
  return redis.call('DEL', KEYS[1])
end
return 0
)lua";

/// The release-by-name mistake: DEL whatever holds the key, no owner check. Returns the value it
/// deleted (to tell whose key it was), nil when nothing held it.
inline constexpr std::string_view kDeleteAny = R"lua(
local v = redis.call('GET', KEYS[1])
if v then redis.call('DEL', KEYS[1]) end
return v
)lua";

/// A lock key's value taken apart: "<owner>:<token>" or "<owner>". An owner or token that is not a
/// decimal integer (another client's value, redis-py's uuid hex) is left out.
struct LockValue {
  std::optional<std::int64_t> owner;
  std::optional<std::int64_t> token;
};
[[nodiscard]] LockValue parse_lock_value(std::string_view value);

/// The fence counter's key for lock `name`: "<name>:fence".
[[nodiscard]] std::string fence_key(const std::string& name);
/// The channel the fenced acquire publishes each grant's value on: "<name>:grants".
[[nodiscard]] std::string grants_channel(const std::string& name);

}  // namespace fencecheck::locks::redis_detail
