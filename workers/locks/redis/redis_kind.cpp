// The redis lock-service kind (lock_service_kind.h): its scenario fields, the embedded
// redis-server or the user's endpoint, health, the issuer's history, restarts, the fence counter.
// docs/lock-service-redis.md is the user's side of this file.
//
//   lock_service:
//     kind: redis
//     persistence: none | aof   # embedded server: none (default: save "" appendonly no) or an
//                               # append-only file fsynced on every write (appendfsync always)
//     token: fenced | none      # fenced (default): INCR "<lock>:fence" with the grant; none: the
//                               # plain Redis lock, no token (a holder sends a constant)
#include <array>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include <hiredis/hiredis.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "../kinds.h"
#include "fencecheck/locks/lock_service_kind.h"
#include "fencecheck/locks/renewed_claim.h"
#include "embedded_redis.h"
#include "redis_connection.h"
#include "redis_watch.h"

namespace fencecheck::locks {
namespace {

using redis_detail::ensure_notifications;
using redis_detail::pings;

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using redis_detail::Connection;
using redis_detail::EmbeddedRedis;
using redis_detail::Endpoint;
using redis_detail::Reply;

const std::vector<std::string_view> kPersistence{"none", "aof"};
const std::vector<std::string_view> kTokens{"fenced", "none"};
/// In a network lab the lock service has its own namespace, where Redis's own port is free.
constexpr int kLabPort = 6379;

/// Where a run's claim names go ("fencecheck-claims:<name>"): no lock's key or channel.
constexpr std::string_view kRedisClaimPrefix = "fencecheck-claims:";

/// Claim: KEYS the claim's keys; ARGV value, TTL in ms. Sets every key (PX) only when none exists,
/// atomically (one script): returns 0, or {index (1-based) of the first key held, its value}.
constexpr std::string_view kClaim = R"lua(
for i, k in ipairs(KEYS) do
  if redis.call('EXISTS', k) == 1 then return {i, redis.call('GET', k)} end
end
for _, k in ipairs(KEYS) do redis.call('SET', k, ARGV[1], 'PX', ARGV[2]) end
return 0
)lua";

/// Owner-checked renewal of every key. ARGV value, TTL in ms. The number of keys renewed.
constexpr std::string_view kClaimRenew = R"lua(
local n = 0
for _, k in ipairs(KEYS) do
  if redis.call('GET', k) == ARGV[1] then n = n + redis.call('PEXPIRE', k, ARGV[2]) end
end
return n
)lua";

/// Owner-checked release of every key (a key another run set after a lapse is left alone).
constexpr std::string_view kClaimRelease = R"lua(
local n = 0
for _, k in ipairs(KEYS) do
  if redis.call('GET', k) == ARGV[1] then n = n + redis.call('DEL', k) end
end
return n
)lua";

std::vector<std::string> eval_argv(std::string_view script, const std::vector<std::string>& keys,
                                   std::initializer_list<std::string> args) {
  std::vector<std::string> argv{"EVAL", std::string(script), std::to_string(keys.size())};
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

/// A run's claim in the user's Redis (LockServiceInstance::claim): SET PX of every name only where
/// none exists (kClaim), renewed by RenewedClaim's thread every third of the claim's TTL with an
/// owner-checked PEXPIRE, released with an owner-checked DEL.
class RedisHeldClaim final : public RenewedClaim {
 public:
  RedisHeldClaim(Endpoint endpoint, std::vector<std::string> keys, std::string value, std::chrono::seconds ttl)
      : RenewedClaim("redis " + endpoint.text(), ttl), endpoint_(std::move(endpoint)), keys_(std::move(keys)),
        value_(std::move(value)) {
    start();
  }
  ~RedisHeldClaim() override { finish(); }

  std::string describe() const override {
    std::string keys;
    for (const auto& k : keys_) keys += (keys.empty() ? "" : ", ") + k;
    return "redis " + endpoint_.url() + " keys with PX " + std::to_string(ttl().count() * 1000) + " ms: " + keys;
  }

 private:
  std::optional<std::string> renew_once() override {
    const auto ttl_ms = std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(ttl()).count());
    Connection c(endpoint_, 1000ms, 2000ms);
    const Reply r = c.command(eval_argv(kClaimRenew, keys_, {value_, ttl_ms}), "EVAL claim renew");
    if (r->type == REDIS_REPLY_INTEGER && r->integer == static_cast<long long>(keys_.size())) return std::nullopt;
    return "a renewal found " + redis_detail::describe(r.get()) + " of " + std::to_string(keys_.size()) +
           " key(s) still this run's (expired or deleted by someone else)";
  }
  void release_once() override {
    Connection c(endpoint_, 1000ms, 2000ms);
    c.command(eval_argv(kClaimRelease, keys_, {value_}), "EVAL claim release");
  }

  Endpoint endpoint_;
  std::vector<std::string> keys_;
  std::string value_;
};

class RedisInstance final : public LockServiceInstance {
 public:
  /// Embedded.
  RedisInstance(const nlohmann::json& config, const LockServiceRunContext& ctx)
      : ctx_(ctx), config_(config), aof_(config.value("persistence", "none") == "aof") {
    redis_detail::EmbeddedRedisOptions o;
    o.host = ctx.host;
    o.port = ctx.lab ? kLabPort : 0;
    o.aof = aof_;
    server_ = std::make_unique<EmbeddedRedis>(o);
    start_server(false);
    endpoint_ = server_->endpoint();
  }
  /// The user's server.
  RedisInstance(const nlohmann::json& config, const LockServiceRunContext& ctx, Endpoint endpoint)
      : ctx_(ctx), config_(config), aof_(false), endpoint_(std::move(endpoint)) {}

  ~RedisInstance() override { stop(); }

  nlohmann::json endpoint() const override {
    return {{"kind", "redis"}, {"endpoints", {endpoint_.url()}}, {"token", config_.value("token", "fenced")}};
  }
  std::string endpoints_text() const override { return endpoint_.url(); }
  std::map<std::string, std::string> worker_env() const override { return {{"REDIS_URL", endpoint_.url()}}; }
  std::string describe() const override {
    if (!server_) return "redis " + endpoint_.text() + " (the user's server)";
    return "redis " + endpoint_.text() + " (embedded, persistence " + std::string(aof_ ? "aof" : "none") + ", data " +
           data_dir_.filename().string() + ", token " + config_.value("token", "fenced") + ")";
  }
  bool healthy() override { return pings(endpoint_, nullptr); }

  std::unique_ptr<IssuerWatch> watch(const std::string& name, std::function<void(Event)> sink) override {
    return std::make_unique<redis_detail::RedisWatch>(endpoint_, name, std::move(sink));
  }

  void advance(std::int64_t count) override {
    if (count <= 0) return;
    if (ctx_.lock.empty())
      throw std::logic_error("redis advance: the run context has no lock name (LockServiceRunContext::lock)");
    Connection c(endpoint_, 1000ms, 5000ms);
    const Reply r = c.command({"INCRBY", redis_detail::fence_key(ctx_.lock), std::to_string(count)}, "INCRBY fence");
    spdlog::info("redis {}: {} tokens issued before the run (the fence counter {} is at {})", endpoint_.text(), count,
                 redis_detail::fence_key(ctx_.lock), r->type == REDIS_REPLY_INTEGER ? r->integer : -1);
  }

  int pid() const override { return server_ ? server_->pid() : 0; }

  std::unique_ptr<HeldClaim> claim(const RunClaim& claim, std::string& why) override {
    if (server_) {
      why = "the redis is embedded: no other run can reach it";
      return nullptr;
    }
    std::vector<std::string> keys;
    for (const auto& name : claim.names()) keys.push_back(std::string(kRedisClaimPrefix) + name);
    const std::string value = claim.to_json().dump();
    const auto ttl_ms = std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(claim.ttl).count());
    Reply r;
    try {
      Connection c(endpoint_, 1000ms, 5000ms);
      r = c.command(eval_argv(kClaim, keys, {value, ttl_ms}), "EVAL claim");
    } catch (const LockServiceError& err) {
      throw LockServiceUnavailable("redis " + endpoint_.text() + ": cannot claim this run's lock and keys: " + err.what());
    }
    if (r->type == REDIS_REPLY_INTEGER && r->integer == 0)
      return std::make_unique<RedisHeldClaim>(endpoint_, std::move(keys), value, claim.ttl);
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[0]->type == REDIS_REPLY_INTEGER &&
        r->element[0]->integer >= 1 && static_cast<std::size_t>(r->element[0]->integer) <= keys.size()) {
      const std::string name = keys[static_cast<std::size_t>(r->element[0]->integer) - 1].substr(kRedisClaimPrefix.size());
      std::optional<RunClaim> holder;
      if (r->element[1]->type == REDIS_REPLY_STRING) {
        const auto parsed = nlohmann::json::parse(std::string(r->element[1]->str, r->element[1]->len), nullptr, false);
        if (!parsed.is_discarded()) holder = RunClaim::from_json(parsed);
      }
      throw ClaimRefused(name, holder, claim_refusal_message(claim, name, holder, "redis " + endpoint_.url()));
    }
    throw LockServiceUnavailable("redis " + endpoint_.text() + ": the claim script answered " +
                                 redis_detail::describe(r.get()));
  }

  void stop_server() override {
    if (!server_) throw std::logic_error("the redis lock service is the user's: not stopping it");
    server_->stop();
  }

  void start_server(bool fresh_data) override {
    if (!server_) throw std::logic_error("the redis lock service is the user's: not starting it");
    if (server_->running()) return;
    if (fresh_data || generation_ == 0) ++generation_;
    data_dir_ = ctx_.run_dir / (generation_ == 1 ? std::string("redis-data") : "redis-data-" + std::to_string(generation_));
    const fs::path log = ctx_.log_path ? ctx_.log_path("redis") : ctx_.run_dir / "logs" / "redis.log";
    server_->start(data_dir_, log);  // the same port every time: clients keep their address
    spdlog::info("embedded redis at {} (data {}, persistence {})", server_->endpoint().url(), data_dir_.string(),
                 aof_ ? "aof, appendfsync always" : "none");
  }

  void stop() noexcept override {
    if (server_) server_->stop();
  }

 private:
  LockServiceRunContext ctx_;
  nlohmann::json config_;
  bool aof_;
  std::unique_ptr<EmbeddedRedis> server_;
  Endpoint endpoint_;
  int generation_ = 0;
  fs::path data_dir_;
};

class RedisKind final : public LockServiceKind {
 public:
  std::string_view name() const override { return "redis"; }
  std::vector<ClientLayout> clients() const override {
    // A single-instance Redis lock is one key holding the holder's random value: redis-py's
    // Lock(name) and node-redlock's acquire([name]) both use the name as the key.
    return {{"set-nx", "", "", "<lock>"}, {"redis-py", "", "", "<lock>"}, {"redlock", "", "", "<lock>"}};
  }
  std::vector<std::string_view> fields() const override { return {"persistence", "token"}; }

  nlohmann::json parse(const KindFields& f) const override {
    nlohmann::json out = nlohmann::json::object();
    out["persistence"] = f.has("persistence") ? std::string(kPersistence[f.choice("persistence", kPersistence, "redis persistence")])
                                              : "none";
    out["token"] = f.has("token") ? std::string(kTokens[f.choice("token", kTokens, "redis token")]) : "fenced";
    return out;
  }

  std::string check_endpoint(std::string_view endpoint) const override {
    std::string error;
    return redis_detail::parse_endpoint(endpoint, &error) ? std::string() : error;
  }

  std::optional<NetAddress> endpoint_address(std::string_view endpoint, std::string* why) const override {
    return url_address(endpoint, 0, why);
  }
  std::string endpoint_at(std::string_view endpoint, const NetAddress& at) const override { return url_at(endpoint, at); }

  std::string token_description() const override {
    return "INCR of \"<lock>:fence\", in the same Lua script as the SET NX PX that grants the lock (token: fenced); "
           "token: none has no token at all";
  }

  std::string restart_effect(const nlohmann::json& config) const override {
    if (config.value("token", "fenced") == "none")
      return "token none: there is no token to lose; a restart without persistence loses the lock key, so a holder "
             "loses its lock without any sign of it";
    if (config.value("persistence", "none") == "aof")
      return "persistence aof (appendfsync always): the fence counter and the lock key with its expiry time are "
             "replayed from the append-only file, so tokens keep rising; on fresh data (an empty directory) the "
             "counter starts again at 0, and tokens at 1";
    return "persistence none: a restart loses every key, the fence counter with the lock key, so tokens start again "
           "at 1, below the resource's high-water mark (the same on fresh data)";
  }

  std::unique_ptr<LockServiceInstance> open(const std::vector<std::string>& endpoints, const nlohmann::json& config,
                                            const LockServiceRunContext& ctx) const override {
    if (endpoints.empty()) return std::make_unique<RedisInstance>(config, ctx);
    std::string tried;
    for (const auto& url : endpoints) {
      std::string why;
      auto ep = redis_detail::parse_endpoint(url, &why);
      if (ep && pings(*ep, &why)) {
        try {
          ensure_notifications(*ep);
        } catch (const LockServiceError& err) {
          throw LockServiceUnavailable(std::string("redis ") + url +
                                       " answers, but its keyspace notifications cannot be enabled (the lock watch "
                                       "needs them; set notify-keyspace-events to include Kg$x): " + err.what());
        }
        spdlog::info("external redis at {}", url);
        return std::make_unique<RedisInstance>(config, ctx, std::move(*ep));
      }
      tried += (tried.empty() ? "" : "; ") + url + ": " + why;
    }
    throw LockServiceUnavailable("no redis endpoint answered PING: " + tried);
  }
};

}  // namespace

namespace detail {

const LockServiceKind& redis_kind() {
  static const RedisKind kind;
  return kind;
}

}  // namespace detail
}  // namespace fencecheck::locks
