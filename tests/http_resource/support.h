// tests/http_resource — shared helpers: a fake KindFields (the scenario loader's side, in
// memory) and a service process whose stdout lines a test can wait for.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "fencecheck/process/server_support.h"
#include "fencecheck/resources/resource_kind.h"
#include "../support/fake_resource_fields.h"

namespace fencecheck::testing {

/// What kind http's open() of `cfg` threw as E: its what(), and with a ResourceConfigError its
/// field in `field`; "(opened)" when open() returned. Another exception propagates.
template <typename E>
std::string thrown_by_open(const nlohmann::json& cfg, std::string* field = nullptr,
                           const resources::ResourceRunContext& ctx = {}) {
  try {
    (void)resources::find_resource_kind("http")->open(cfg, ctx);
  } catch (const E& e) {
    if constexpr (std::is_same_v<E, resources::ResourceConfigError>) {
      if (field) *field = e.field();
    }
    return e.what();
  }
  return "(opened)";
}

/// A loopback port nothing listens on (process::free_tcp_port: bound without listen(2) to have the
/// kernel pick a free one, then closed): a connect to it is refused.
inline int closed_port() { return process::free_tcp_port("127.0.0.1"); }

/// Waits until `server`'s accept loop runs (listen_after_bind() on another thread): a stop()
/// before that is lost (cpp-httplib 0.11 stops only a running server) and the join would hang.
/// Connections queue in the backlog from bind_to_any_port() on, so this is for stopping only.
template <typename Server>
void wait_until_running(Server& server) {
  while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

/// Lines a child printed, in order, for a test to wait on (filled from ChildProcess's reader
/// thread). Thread-safe.
class Lines {
 public:
  void push(std::string_view line, bool eof) {
    {
      std::lock_guard lock(mu_);
      if (eof) eof_ = true;
      else lines_.emplace_back(line);
    }
    cv_.notify_all();
  }
  /// The next line not yet taken; nullopt at EOF or after `limit` (a bound against hangs, not a
  /// timing assumption: the caller asserts on it).
  std::optional<std::string> next(std::chrono::milliseconds limit = std::chrono::seconds(30)) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, limit, [&] { return !lines_.empty() || eof_; }) || lines_.empty()) return std::nullopt;
    std::string line = std::move(lines_.front());
    lines_.pop_front();
    return line;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> lines_;
  bool eof_ = false;
};

}  // namespace fencecheck::testing
