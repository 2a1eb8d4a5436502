// fencecheck tests — the redis lock-service kind's test support: an embedded redis-server opened
// through the kind itself (lock_service_kind.h) in a temporary run directory, a raw hiredis
// connection for looking at the server behind the client's back (the watch's events: watch_sink.h).
// Not thread-safe.
#pragma once

#include <condition_variable>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <hiredis/hiredis.h>
#include <nlohmann/json.hpp>

#include "../support/fake_resource_fields.h"
#include "../support/temp_dir.h"
#include "fencecheck/locks/lock_client.h"
#include "fencecheck/locks/lock_service_kind.h"
#include "fencecheck/proto/event.h"
#include "watch_sink.h"

namespace fencecheck::testing {

inline const locks::LockServiceKind& redis_kind() {
  const auto* kind = locks::find_lock_service_kind("redis");
  if (!kind) throw std::logic_error("the redis lock-service kind is not registered");
  return *kind;
}

/// An embedded redis-server started through the kind, in a fresh temporary run directory.
struct EmbeddedRedisFixture {
  explicit EmbeddedRedisFixture(nlohmann::json fields = nlohmann::json::object(), std::string lock = "fc-test-lock")
      : dir("redis-kind") {
    ctx.run_dir = dir.path();
    ctx.log_path = [this](const std::string& name) { return dir.path() / "logs" / (name + ".log"); };
    ctx.run_id = "test";
    ctx.lock = std::move(lock);
    config = redis_kind().parse(FakeFields(std::move(fields)));
    instance = redis_kind().open({}, config, ctx);
  }
  /// A lock client for the instance's endpoint (what a worker is given).
  [[nodiscard]] std::unique_ptr<locks::LockClient> client() const { return locks::make_lock_client(instance->endpoint()); }
  [[nodiscard]] std::string url() const { return instance->endpoints_text(); }
  [[nodiscard]] int port() const { return std::stoi(url().substr(url().rfind(':') + 1)); }

  TempDir dir;
  locks::LockServiceRunContext ctx;
  nlohmann::json config;
  std::unique_ptr<locks::LockServiceInstance> instance;
};

/// A raw hiredis connection: the test's own look at the server.
class Raw {
 public:
  explicit Raw(int port) : c_(redisConnect("127.0.0.1", port)) {
    if (!c_ || c_->err) throw std::runtime_error("raw redis connection to port " + std::to_string(port) + " failed");
  }
  ~Raw() { redisFree(c_); }
  Raw(const Raw&) = delete;
  Raw& operator=(const Raw&) = delete;

  /// The reply as text: a string's value, an integer's digits, "(nil)", a status, "ERR ...", or
  /// an array's elements one per line.
  std::string cmd(const std::vector<std::string>& argv) {
    std::vector<const char*> a;
    std::vector<std::size_t> l;
    for (const auto& s : argv) {
      a.push_back(s.data());
      l.push_back(s.size());
    }
    auto* r = static_cast<redisReply*>(redisCommandArgv(c_, static_cast<int>(a.size()), a.data(), l.data()));
    if (!r) throw std::runtime_error("raw redis command failed: " + std::string(c_->errstr));
    std::string out;
    switch (r->type) {
      case REDIS_REPLY_INTEGER: out = std::to_string(r->integer); break;
      case REDIS_REPLY_NIL: out = "(nil)"; break;
      case REDIS_REPLY_ARRAY:
        for (std::size_t i = 0; i < r->elements; ++i)
          out += (i ? "\n" : "") + std::string(r->element[i]->str ? r->element[i]->str : "", r->element[i]->len);
        break;
      default: out = std::string(r->str, r->len); break;
    }
    freeReplyObject(r);
    return out;
  }
  /// A configuration parameter's value (CONFIG GET replies with its name and its value).
  std::string config(const std::string& name) {
    const std::string both = cmd({"CONFIG", "GET", name});
    const auto nl = both.find('\n');
    return nl == std::string::npos ? std::string("(missing)") : both.substr(nl + 1);
  }

 private:
  redisContext* c_;
};

}  // namespace fencecheck::testing
