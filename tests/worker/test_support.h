// Shared helpers for the worker tests: a temp dir, a tiny fenced store speaking the
// fencecheck-store PUT contract (resources/include/fencecheck/resources/store_client.h), and a
// condition-variable "wait until" for collected events.
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
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

namespace fencecheck::test {

/// A fresh directory under the system temp dir, removed at scope exit.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("fencecheck-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// One PUT the fake store received.
struct StoreRequest {
  std::string key;
  std::int64_t segment = 0;
  std::int64_t chunk = 0;
  std::int64_t token = 0;
  std::string client;
  std::string body;
  int status = 0;  ///< what the store answered
};

/// A fenced store in-process: PUT /v1/keys/{key}/segments/{s}/chunks/{c} with Fencing-Token and
/// Fencecheck-Client; per-key high-water mark; 409 for a token below it. Can inject one rejection
/// (409 without changing the high-water) for a given segment/chunk, the first time it is written.
class FakeStore {
 public:
  FakeStore() {
    server_.Put(R"(/v1/keys/([^/]+)/segments/(\d+)/chunks/(\d+))",
                [this](const httplib::Request& req, httplib::Response& res) { handle(req, res); });
    server_.Get("/healthz", [](const httplib::Request&, httplib::Response& res) { res.set_content("ok", "text/plain"); });
    port_ = server_.bind_to_any_port("127.0.0.1");  // bound and listening from here on
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~FakeStore() {
    {
      std::lock_guard lock(mu_);
      unstall_ = true;
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
      if (reject_ && reject_->first == r.segment && reject_->second == r.chunk) {
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
