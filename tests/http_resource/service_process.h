// tests/http_resource — a service process (fencecheck-store, a Python service) started for a
// test, its stdout lines queued so the test can wait on them.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "../support/temp_dir.h"
#include "fencecheck/process/child_process.h"
#include "support.h"

namespace fencecheck::testing {

/// One service process: started by the constructor, which waits for its first stdout line (the
/// announcement {"listening":"127.0.0.1:PORT",...}) and throws std::runtime_error with the
/// process's stderr when there is none; later lines are queued for next_line(). Stopped by the
/// destructor (SIGTERM, SIGKILL after 1 s); it dies with the test program too (ChildProcess sets
/// PR_SET_PDEATHSIG), so create it on the main thread. Not thread-safe.
class Process {
 public:
  Process(const std::string& name, std::filesystem::path exe, std::vector<std::string> args)
      : dir_("http-" + name), lines_(std::make_shared<Lines>()) {
    process::ChildSpec spec;
    spec.name = name;
    spec.exe = std::move(exe);
    spec.args = std::move(args);
    spec.stderr_log = stderr_log_ = dir_.path() / (name + ".stderr");
    child_ = std::make_unique<process::ChildProcess>(
        spec, [lines = lines_](std::string_view line, std::int64_t, bool eof) { lines->push(line, eof); });
    const auto first = lines_->next();
    if (!first) throw std::runtime_error(name + " printed no line; stderr: " + stderr_text());
    hello_ = nlohmann::json::parse(*first, nullptr, false);
    if (!hello_.is_object() || !hello_.contains("listening"))
      throw std::runtime_error(name + " said '" + *first + "'; stderr: " + stderr_text());
    url_ = "http://" + hello_.at("listening").get<std::string>();
  }
  ~Process() {
    if (child_) child_->terminate(std::chrono::milliseconds(1000));
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  [[nodiscard]] const std::string& url() const { return url_; }
  [[nodiscard]] const nlohmann::json& hello() const { return hello_; }
  /// The next stdout line after the announcement, as JSON (null at EOF or after the hang guard).
  nlohmann::json next_line() {
    auto line = lines_->next();
    return line ? nlohmann::json::parse(*line, nullptr, false) : nlohmann::json();
  }
  [[nodiscard]] std::string stderr_text() const {
    std::ifstream f(stderr_log_);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  }

 private:
  TempDir dir_;
  std::filesystem::path stderr_log_;
  std::shared_ptr<Lines> lines_;
  std::unique_ptr<process::ChildProcess> child_;
  nlohmann::json hello_;
  std::string url_;
};

}  // namespace fencecheck::testing
