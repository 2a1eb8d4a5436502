// RedisWatch (redis_watch.h): the issuer's history of one Redis lock from keyspace notifications.
#include "redis_watch.h"

#include <chrono>

#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>

#include "fencecheck/locks/lock_client.h"
#include "fencecheck/proto/event.h"

namespace fencecheck::locks::redis_detail {
namespace {

using namespace std::chrono_literals;

constexpr auto kConnectTimeout = 1000ms;
constexpr auto kIoTimeout = 2000ms;
constexpr std::string_view kEndNonce = "fencecheck-watch-end";

std::string_view element(const redisReply* r, std::size_t i) {
  if (!r || r->type != REDIS_REPLY_ARRAY || i >= r->elements) return {};
  const redisReply* e = r->element[i];
  if (e->type != REDIS_REPLY_STRING && e->type != REDIS_REPLY_STATUS) return {};
  return {e->str, e->len};
}

bool is_pong(const redisReply* r, std::string_view nonce) { return element(r, 0) == "pong" && element(r, 1) == nonce; }

/// The payload of a message published on `channel`, or nullopt for any other reply.
std::optional<std::string_view> message_on(const redisReply* r, std::string_view channel) {
  if (element(r, 0) != "message" || element(r, 1) != channel) return std::nullopt;
  return element(r, 2);
}

std::optional<std::string> get(Connection& c, const std::string& key) {
  const Reply r = c.command({"GET", key}, "GET " + key);
  if (r->type == REDIS_REPLY_STRING) return std::string(r->str, r->len);
  return std::nullopt;
}

}  // namespace

RedisWatch::RedisWatch(Endpoint endpoint, std::string lock, std::function<void(Event)> sink, bool carry_value)
    : carry_value_(carry_value),
      endpoint_(std::move(endpoint)),
      lock_(std::move(lock)),
      channel_("__keyspace@0__:" + lock_),
      grants_(grants_channel(lock_)),
      sink_(std::move(sink)) {
  try {
    connect();
    if (auto v = get(*reader_, lock_)) {
      // Held before the watch began: known (so its delete carries its token), not reported.
      const LockValue lv = parse_lock_value(*v);
      current_ = Holder{*v, lv.owner, lv.token};
    }
  } catch (const LockServiceError& err) {
    throw LockServiceUnavailable(std::string("redis lock watch on ") + lock_ + ": " + err.what());
  }
  thread_ = std::jthread([this](std::stop_token stop) { run(stop); });
}

RedisWatch::~RedisWatch() { stop(); }

void RedisWatch::connect() {
  auto sub = std::make_unique<Connection>(endpoint_, kConnectTimeout, kIoTimeout);
  sub->send({"SUBSCRIBE", channel_, grants_}, "SUBSCRIBE " + channel_ + " " + grants_);
  const auto deadline = std::chrono::steady_clock::now() + kIoTimeout;
  int confirmed = 0;
  while (confirmed < 2) {
    Reply r = sub->next_reply(100ms);
    if (r && element(r.get(), 0) == "subscribe") ++confirmed;
    if (confirmed == 2) break;
    if (std::chrono::steady_clock::now() > deadline)
      throw LockServiceError("redis " + endpoint_.text() + " SUBSCRIBE " + channel_ + ": no confirmation within " +
                             std::to_string(kIoTimeout.count()) + " ms");
  }
  reader_ = std::make_unique<Connection>(endpoint_, kConnectTimeout, kIoTimeout);
  sub_ = std::move(sub);
}

void RedisWatch::stop() {
  if (!thread_.joinable()) return;
  end_requested_ = true;
  {
    std::unique_lock lock(mu_);
    if (!ended_cv_.wait_for(lock, 5s, [this] { return ended_; }))
      spdlog::warn("redis lock watch on {}: the end marker did not come back within 5 s; the lock history may be short",
                   lock_);
  }
  thread_.request_stop();
  thread_.join();
}

void RedisWatch::emit(Event e) {
  e.t_ns = monotonic_ns();
  e.src_ns = e.t_ns;
  e.source = "lock";
  e.lock = lock_;
  e.lock_key = lock_;
  if (carry_value_ && e.kind == EventKind::kLockGrant && current_) e.line = current_->value;
  sink_(std::move(e));
}

void RedisWatch::run(std::stop_token stop) {
  bool end_sent = false;
  while (!stop.stop_requested()) {
    if (!sub_) {
      if (end_requested_) break;  // disconnected: nothing more can come
      try {
        connect();
        reconcile();
      } catch (const LockServiceError& err) {
        spdlog::debug("redis lock watch on {}: reconnecting: {}", lock_, err.what());
        sub_.reset();
        reader_.reset();
        std::this_thread::sleep_for(50ms);
      }
      continue;
    }
    try {
      if (end_requested_ && !end_sent) {
        sub_->send({"PING", std::string(kEndNonce)}, "PING (end marker)");
        end_sent = true;
      }
      Reply r;
      if (!queue_.empty()) {
        r = std::move(queue_.front());
        queue_.pop_front();
      } else {
        r = sub_->next_reply(50ms);
      }
      if (r && handle(std::move(r))) break;
    } catch (const LockServiceError& err) {
      if (end_requested_) break;
      spdlog::warn("redis lock watch on {}: {}; reconnecting", lock_, err.what());
      sub_.reset();
      reader_.reset();
      queue_.clear();
      end_sent = false;
    }
  }
  {
    std::lock_guard lock(mu_);
    ended_ = true;
  }
  ended_cv_.notify_all();
}

bool RedisWatch::handle(Reply reply) {
  if (is_pong(reply.get(), kEndNonce)) return true;
  // A grant's own message (grants_) is read by on_set right after its notification.
  const std::string_view event = message_on(reply.get(), channel_).value_or("");
  if (event == "set") on_set();
  else if (event == "expired") on_delete("expired");
  else if (event == "del") on_delete("deleted");
  else if (event == "evicted") on_delete("evicted");
  // "expire" (a renewal's PEXPIRE), subscribe confirmations, other pongs: nothing to report.
  return false;
}

void RedisWatch::sync(const std::string& nonce) {
  sub_->send({"PING", nonce}, "PING");
  const auto deadline = std::chrono::steady_clock::now() + kIoTimeout;
  while (true) {
    Reply r = sub_->next_reply(50ms);
    if (r && is_pong(r.get(), nonce)) return;
    if (r) queue_.push_back(std::move(r));
    if (std::chrono::steady_clock::now() > deadline)
      throw LockServiceError("redis " + endpoint_.text() + " PING: no reply within " +
                             std::to_string(kIoTimeout.count()) + " ms");
  }
}

void RedisWatch::on_set() {
  const std::optional<std::string> read = get(*reader_, lock_);
  // Every message about a change made before the GET ran is in queue_ after this.
  sync("sync-" + std::to_string(++syncs_));
  // The fenced acquire publishes the value it set in the same script, right after the SET (whose
  // PX gives an `expire` notification of its own first): when that message comes next, it is this
  // grant's value, exactly.
  std::optional<std::string> published;
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (auto payload = message_on(it->get(), grants_)) {
      published = std::string(*payload);
      queue_.erase(it);
      break;
    }
    if (message_on(it->get(), channel_) != "expire") break;
  }
  bool later_set = false;
  for (const auto& q : queue_) later_set = later_set || message_on(q.get(), channel_) == "set";

  std::optional<std::string> value = published;
  std::string unknown;
  if (!value && !read) {
    unknown = "held too briefly to read: the key was gone before the watch's GET; token unknown";
  } else if (!value && later_set) {
    unknown = "the key was set again before the watch's GET: which value was this grant's is unknown; token unknown";
  } else if (!value) {
    value = read;
  }
  if (value && current_ && !current_->value.empty() && current_->value == *value)
    return;  // a grant the watch already reported (read when it (re)connected)

  if (current_) on_delete("overwritten: a SET replaced the key without deleting it first");
  Event e;
  e.kind = EventKind::kLockGrant;
  Holder h;
  if (value) {
    const LockValue lv = parse_lock_value(*value);
    h = Holder{*value, lv.owner, lv.token};
    e.token = h.token;
    e.lease_id = h.owner;
  } else {
    e.detail = unknown;
  }
  current_ = h;
  emit(std::move(e));
}

void RedisWatch::on_delete(const std::string& detail) {
  Event e;
  e.kind = EventKind::kLockDelete;
  e.detail = detail;
  if (current_) {
    e.token = current_->token;
    e.lease_id = current_->owner;
    if (carry_value_) e.line = current_->value;
  }
  current_.reset();
  emit(std::move(e));
}

void RedisWatch::reconcile() {
  const std::optional<std::string> v = get(*reader_, lock_);
  const bool same = current_ && v && !current_->value.empty() && current_->value == *v;
  if (same) return;
  if (current_)
    on_delete(fresh_ ? "lost: the lock service restarted on empty data, without the key"
                     : "lost: the key was gone when the watch reconnected (a restart that did not keep it, or an "
                       "expiry or delete while the watch was disconnected)");
  if (v) {
    const LockValue lv = parse_lock_value(*v);
    current_ = Holder{*v, lv.owner, lv.token};
    Event e;
    e.kind = EventKind::kLockGrant;
    e.token = lv.token;
    e.lease_id = lv.owner;
    e.detail = "seen after reconnecting: granted while the watch was disconnected";
    emit(std::move(e));
  }
}

}  // namespace fencecheck::locks::redis_detail
