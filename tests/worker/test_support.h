// Shared helpers for the worker tests: a temp dir, a tiny fenced store speaking the
// fencecheck-store contract (resources/store/include/fencecheck/resources/store_server.h: chunk PUT,
// counter GET/PUT, effect POST), and a condition-variable "wait until" for collected events.
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "../support/temp_dir.h"

namespace fencecheck::test {

/// A fresh directory under the system temp dir, removed at scope exit (tests/support/temp_dir.h).
using fencecheck::testing::TempDir;

/// One request the fake store received.
struct StoreRequest {
  std::string kind = "chunk";  ///< "chunk", "counter" (PUT) or "effect"
  std::string key;
  std::int64_t segment = 0;
  std::int64_t chunk = 0;
  std::int64_t token = 0;
  std::string client;
  std::string body;    ///< chunk bytes, the counter's new value, or the effect id
  std::string effect;  ///< effects: the Fencecheck-Effect header, "" when absent (the worker sends none)
  int status = 0;  ///< what the store answered
};

/// A fenced store in-process: PUT /v1/keys/{key}/segments/{s}/chunks/{c} with Fencing-Token and
/// Fencecheck-Client; per-key high-water mark; 409 for a token below it. Can inject one rejection
/// (409 without changing the high-water) for a given segment/chunk, the first time it is written.
/// Also GET/PUT /v1/counters/{key} (fenced like chunks) and POST /v1/effects/{key} (fenced
/// effects checked against the key's mark, which they do not raise; others always applied).
class FakeStore {
 public:
  FakeStore() {
    server_.Put(R"(/v1/keys/([^/]+)/segments/(\d+)/chunks/(\d+))",
                [this](const httplib::Request& req, httplib::Response& res) { handle(req, res); });
    server_.Get(R"(/v1/counters/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mu_);
      const std::string key = req.matches[1];
      res.set_content(nlohmann::json{{"value", counters_[key]}, {"high_water", high_water_[key]}}.dump(),
                      "application/json");
    });
    server_.Put(R"(/v1/counters/([^/]+))",
                [this](const httplib::Request& req, httplib::Response& res) { handle_counter(req, res); });
    server_.Post(R"(/v1/effects/([^/]+))",
                 [this](const httplib::Request& req, httplib::Response& res) { handle_effect(req, res); });
    server_.Get("/healthz", [](const httplib::Request&, httplib::Response& res) { res.set_content("ok", "text/plain"); });
    port_ = server_.bind_to_any_port("127.0.0.1");  // bound and listening from here on
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~FakeStore() {
    {
      std::lock_guard lock(mu_);
      unstall_ = true;
      released_ = true;
    }
    cv_.notify_all();
    server_.stop();
    thread_.join();
  }
  FakeStore(const FakeStore&) = delete;
  FakeStore& operator=(const FakeStore&) = delete;

  [[nodiscard]] std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  /// The first write to (segment, chunk) gets 409 "injected rejection".
  void reject_once(std::int64_t segment, std::int64_t chunk) {
    std::lock_guard lock(mu_);
    reject_ = std::make_pair(segment, chunk);
  }

  /// The first write to (segment, chunk) gets no reply until the store is destroyed: to the
  /// writer, an unknown outcome. It is recorded with status 0.
  void stall_once(std::int64_t segment, std::int64_t chunk) {
    std::lock_guard lock(mu_);
    stall_ = std::make_pair(segment, chunk);
  }

  /// Every mutation carrying the FIRST token this store ever sees is refused (409, high_water =
  /// that token + 1), on every endpoint, for as long as the store lives; later tokens are judged
  /// normally. A deterministic "this holding has been fenced" without racing the worker.
  void fence_out_first_token() {
    std::lock_guard lock(mu_);
    fence_first_ = true;
  }

  /// The first effect request gets 409 "injected rejection".
  void reject_effect_once() {
    std::lock_guard lock(mu_);
    reject_effect_ = true;
  }

  /// The first write to (segment, chunk) is held without a reply until release_held() (or the
  /// store's destruction); then it is judged normally. wait_until_held() returns once it arrived.
  void hold_once(std::int64_t segment, std::int64_t chunk) {
    std::lock_guard lock(mu_);
    hold_ = std::make_pair(segment, chunk);
  }
  bool wait_until_held(std::chrono::milliseconds limit = std::chrono::seconds(20)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, limit, [this] { return holding_; });
  }
  void release_held() {
    {
      std::lock_guard lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
  }

  [[nodiscard]] std::int64_t counter(const std::string& key) const {
    std::lock_guard lock(mu_);
    auto it = counters_.find(key);
    return it == counters_.end() ? 0 : it->second;
  }

  [[nodiscard]] std::vector<StoreRequest> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }

 private:
  void handle(const httplib::Request& req, httplib::Response& res) {
    StoreRequest r;
    r.key = req.matches[1];
    r.segment = std::stoll(req.matches[2]);
    r.chunk = std::stoll(req.matches[3]);
    r.client = req.get_header_value("Fencecheck-Client");
    r.body = req.body;
    const std::string token = req.get_header_value("Fencing-Token");
    std::unique_lock lock(mu_);
    if (hold_ && hold_->first == r.segment && hold_->second == r.chunk) {
      hold_.reset();
      holding_ = true;
      cv_.notify_all();
      cv_.wait(lock, [this] { return released_ || unstall_; });
    }
    if (stall_ && stall_->first == r.segment && stall_->second == r.chunk) {
      stall_.reset();
      r.token = std::stoll(token);
      requests_.push_back(r);
      cv_.wait(lock, [this] { return unstall_; });
      res.status = 503;
      return;
    }
    nlohmann::json reply;
    if (token.empty() || token.find_first_not_of("0123456789") != std::string::npos) {
      r.status = 400;
      reply = {{"error", "bad Fencing-Token '" + token + "'"}};
    } else {
      r.token = std::stoll(token);
      std::int64_t& hw = high_water_[r.key];
      if (fenced_out(r.token)) {
        r.status = 409;
        reply = {{"accepted", false}, {"high_water", r.token + 1}, {"error", "fenced out (first token)"}};
      } else if (reject_ && reject_->first == r.segment && reject_->second == r.chunk) {
        reject_.reset();
        r.status = 409;
        reply = {{"accepted", false}, {"high_water", hw}, {"error", "injected rejection"}};
      } else if (r.token < hw) {
        r.status = 409;
        reply = {{"accepted", false}, {"high_water", hw}, {"error", "token below high-water"}};
      } else {
        hw = r.token;
        r.status = 200;
        reply = {{"accepted", true}, {"high_water", hw}, {"seq", ++seq_}};
      }
    }
    requests_.push_back(r);
    res.status = r.status;
    res.set_content(reply.dump(), "application/json");
  }

  // Under mu_: true when this token is the fenced-out first token (remembering the first one seen).
  bool fenced_out(std::int64_t token) {
    if (!fence_first_) return false;
    if (!first_token_) first_token_ = token;
    return token == *first_token_;
  }

  void handle_counter(const httplib::Request& req, httplib::Response& res) {
    StoreRequest r;
    r.kind = "counter";
    r.key = req.matches[1];
    r.client = req.get_header_value("Fencecheck-Client");
    r.body = req.body;
    r.token = std::stoll(req.get_header_value("Fencing-Token"));
    std::lock_guard lock(mu_);
    std::int64_t& hw = high_water_[r.key];
    nlohmann::json reply;
    if (fenced_out(r.token)) {
      r.status = 409;
      reply = {{"accepted", false}, {"high_water", r.token + 1}, {"error", "fenced out (first token)"}};
    } else if (r.token < hw) {
      r.status = 409;
      reply = {{"accepted", false}, {"high_water", hw}, {"error", "token below high-water"}};
    } else {
      hw = r.token;
      counters_[r.key] = std::stoll(r.body);
      r.status = 200;
      reply = {{"accepted", true}, {"high_water", hw}, {"seq", ++seq_}};
    }
    requests_.push_back(r);
    res.status = r.status;
    res.set_content(reply.dump(), "application/json");
  }

  void handle_effect(const httplib::Request& req, httplib::Response& res) {
    StoreRequest r;
    r.kind = "effect";
    r.key = req.matches[1];
    r.client = req.get_header_value("Fencecheck-Client");
    r.body = req.body;
    r.effect = req.get_header_value("Fencecheck-Effect");
    r.token = std::stoll(req.get_header_value("Fencing-Token"));
    std::lock_guard lock(mu_);
    const std::int64_t hw = high_water_[r.key];
    nlohmann::json reply;
    if (fenced_out(r.token)) {
      r.status = 409;
      reply = {{"applied", false}, {"high_water", r.token + 1}, {"seq", ++seq_}, {"error", "fenced out (first token)"}};
    } else if (reject_effect_) {
      reject_effect_ = false;
      r.status = 409;
      reply = {{"applied", false}, {"high_water", hw}, {"seq", ++seq_}, {"error", "injected rejection"}};
    } else if (r.token < hw) {  // configured fenced, as the real store by default
      r.status = 409;
      reply = {{"applied", false}, {"mode", "fenced"}, {"high_water", hw}, {"seq", ++seq_}, {"error", "token below high-water"}};
    } else {
      r.status = 200;
      reply = {{"applied", true}, {"mode", "fenced"}, {"high_water", hw}, {"seq", ++seq_}};
    }
    requests_.push_back(r);
    res.status = r.status;
    res.set_content(reply.dump(), "application/json");
  }

  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mu_;
  std::map<std::string, std::int64_t> high_water_;
  std::int64_t seq_ = 0;
  std::optional<std::pair<std::int64_t, std::int64_t>> reject_;
  std::optional<std::pair<std::int64_t, std::int64_t>> stall_;
  std::condition_variable cv_;
  bool unstall_ = false;
  std::map<std::string, std::int64_t> counters_;
  bool fence_first_ = false;
  std::optional<std::int64_t> first_token_;
  bool reject_effect_ = false;
  std::optional<std::pair<std::int64_t, std::int64_t>> hold_;
  bool holding_ = false;
  bool released_ = false;
  std::vector<StoreRequest> requests_;
};

/// A list filled by one thread and awaited by another.
template <typename T>
class Collected {
 public:
  void push(T value) {
    {
      std::lock_guard lock(mu_);
      items_.push_back(std::move(value));
    }
    cv_.notify_all();
  }
  /// Waits until pred(items) holds or `limit` passes (a bound against hangs, not a sync sleep);
  /// returns pred's final value.
  bool wait_until(const std::function<bool(const std::vector<T>&)>& pred,
                  std::chrono::milliseconds limit = std::chrono::seconds(20)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, limit, [&] { return pred(items_); });
  }
  [[nodiscard]] std::vector<T> snapshot() const {
    std::lock_guard lock(mu_);
    return items_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<T> items_;
};

}  // namespace fencecheck::test
