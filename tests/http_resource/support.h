// tests/http_resource — shared helpers: a fake ResourceFields (the scenario loader's side, in
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
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "fencecheck/resources/resource_kind.h"

namespace fencecheck::testing {

/// A loopback port nothing listens on (bound without listen(2) to have the kernel pick a free one,
/// then closed): a connect to it is refused.
inline int closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw std::runtime_error("closed_port: cannot bind");
  ::close(fd);
  return ntohs(addr.sin_port);
}

/// Waits until `server`'s accept loop runs (listen_after_bind() on another thread): a stop()
/// before that is lost (cpp-httplib 0.11 stops only a running server) and the join would hang.
/// Connections queue in the backlog from bind_to_any_port() on, so this is for stopping only.
template <typename Server>
void wait_until_running(Server& server) {
  while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

/// What FakeFields::fail throws: the field, the message and the offset the kind asked for.
struct FieldError : std::runtime_error {
  FieldError(std::string f, const std::string& m, std::optional<std::size_t> o)
      : std::runtime_error(m), field(std::move(f)), offset(o) {}
  std::string field;
  std::optional<std::size_t> offset;
};

/// A `resource:` mapping held in memory: scalars as YAML would give them (a string, or an integer
/// that string() also returns as text). Not thread-safe.
class FakeFields final : public resources::ResourceFields {
 public:
  using Value = std::variant<std::string, std::int64_t>;
  FakeFields() = default;
  FakeFields(std::initializer_list<std::pair<const std::string, Value>> v) : values_(v) {}
  /// The fields of a normalized configuration (parse()'s output), to parse it again.
  static FakeFields from_json(const nlohmann::json& j) {
    FakeFields f;
    for (auto& [k, v] : j.items()) {
      if (v.is_number_integer()) f.values_[k] = v.get<std::int64_t>();
      else f.values_[k] = v.get<std::string>();
    }
    return f;
  }

  std::string file() const override { return "test.yaml"; }
  bool has(std::string_view name) const override { return values_.count(std::string(name)) != 0; }
  std::string string(std::string_view name) const override {
    const Value& v = at(name);
    if (auto* s = std::get_if<std::string>(&v)) return *s;
    return std::to_string(std::get<std::int64_t>(v));
  }
  std::vector<std::string> string_list(std::string_view name) const override { return {string(name)}; }
  std::int64_t integer(std::string_view name, std::int64_t min, std::int64_t max) const override {
    const Value& v = at(name);
    std::int64_t n = 0;
    if (auto* i = std::get_if<std::int64_t>(&v)) {
      n = *i;
    } else {
      try {
        std::size_t used = 0;
        n = std::stoll(std::get<std::string>(v), &used);
        if (used != std::get<std::string>(v).size()) throw std::invalid_argument("trailing");
      } catch (const std::exception&) {
        fail(name, "must be an integer");
      }
    }
    if (n < min || n > max) fail(name, "must be in " + std::to_string(min) + ".." + std::to_string(max));
    return n;
  }
  std::chrono::nanoseconds duration(std::string_view name) const override { fail(name, "no durations here"); }
  bool boolean(std::string_view name) const override { fail(name, "no booleans here"); }
  std::size_t choice(std::string_view name, const std::vector<std::string_view>& names, std::string_view what) const override {
    const std::string s = string(name);
    for (std::size_t i = 0; i < names.size(); ++i)
      if (names[i] == s) return i;
    fail(name, "unknown " + std::string(what));
  }
  [[noreturn]] void fail(std::string_view name, const std::string& message,
                         std::optional<std::size_t> offset = std::nullopt) const override {
    throw FieldError(std::string(name), message, offset);
  }

 private:
  const Value& at(std::string_view name) const {
    auto it = values_.find(std::string(name));
    if (it == values_.end()) fail(name, "missing");
    return it->second;
  }
  std::map<std::string, Value> values_;
};

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
