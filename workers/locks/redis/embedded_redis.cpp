// EmbeddedRedis (embedded_redis.h): Debian's redis-server as the harness's child.
#include "embedded_redis.h"

#include <signal.h>
#include <unistd.h>

#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>

#include "fencecheck/locks/lock_client.h"
#include "fencecheck/locks/lock_service_kind.h"
#include "fencecheck/process/child_process.h"
#include "fencecheck/process/server_support.h"

namespace fencecheck::locks::redis_detail {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

/// PING answered PONG: up (a server loading its AOF answers -LOADING).
bool answers(const Endpoint& ep) {
  try {
    Connection c(ep, 200ms, 1000ms);
    const Reply r = c.command({"PING"}, "PING");
    return r->type == REDIS_REPLY_STATUS && std::string_view(r->str, r->len) == "PONG";
  } catch (const LockServiceError&) {
    return false;
  }
}

}  // namespace

bool pings(const Endpoint& ep, std::string* why) {
  try {
    Connection c(ep, 1000ms, 2000ms);
    const Reply r = c.command({"PING"}, "PING");
    if (r->type == REDIS_REPLY_STATUS && std::string_view(r->str, r->len) == "PONG") return true;
    if (why) *why = "PING answered " + redis_detail::describe(r.get());
  } catch (const LockServiceError& err) {
    if (why) *why = err.what();
  }
  return false;
}

void ensure_notifications(const Endpoint& ep) {
  Connection c(ep, 1000ms, 2000ms);
  const Reply r = c.command({"CONFIG", "GET", "notify-keyspace-events"}, "CONFIG GET notify-keyspace-events");
  std::string flags;
  if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[1]->type == REDIS_REPLY_STRING)
    flags.assign(r->element[1]->str, r->element[1]->len);
  std::string wanted = flags;
  const bool all = flags.find('A') != std::string::npos;
  for (char f : std::string("Kg$x"))
    if (wanted.find(f) == std::string::npos && !(all && f != 'K')) wanted += f;
  if (wanted == flags) return;
  c.command({"CONFIG", "SET", "notify-keyspace-events", wanted}, "CONFIG SET notify-keyspace-events");
  spdlog::warn("redis {}: notify-keyspace-events was \"{}\"; set it to \"{}\" (the lock watch reads keyspace "
               "notifications of the lock key)",
               ep.text(), flags, wanted);
}

fs::path find_redis_server(const fs::path& explicit_path) {
  if (!explicit_path.empty()) return ::access(explicit_path.c_str(), X_OK) == 0 ? explicit_path : fs::path();
  return process::find_on_path("redis-server").value_or(fs::path());
}

EmbeddedRedis::EmbeddedRedis(EmbeddedRedisOptions options) : options_(std::move(options)), port_(options_.port) {}

EmbeddedRedis::~EmbeddedRedis() { stop(); }

pid_t EmbeddedRedis::pid() const { return proc_ ? proc_->pid() : 0; }

bool EmbeddedRedis::running() { return proc_ && proc_->running(); }

void EmbeddedRedis::start(const fs::path& dir, const fs::path& log_file) {
  if (running()) throw std::logic_error("EmbeddedRedis::start: already running on " + endpoint().text());
  if (binary_.empty()) binary_ = find_redis_server(options_.binary);
  if (binary_.empty())
    throw LockServiceUnavailable(
        (options_.binary.empty() ? std::string("redis-server not found on PATH")
                                 : "redis-server " + options_.binary.string() + " is not executable") +
        ": install Debian's redis-server (scripts/install-deps.sh redis, or apt-get install redis-server; fencecheck starts its own server, the "
        "system service need not run), or give lock_service.endpoints");
  fs::create_directories(dir);
  if (log_file.has_parent_path()) fs::create_directories(log_file.parent_path());

  const bool fixed_port = port_ != 0;
  std::string last_failure;
  for (int attempt = 1; attempt <= std::max(1, options_.port_attempts); ++attempt) {
    const int port = fixed_port ? port_ : process::free_tcp_port(options_.host);
    std::vector<std::string> args{
        "--port", std::to_string(port),
        "--bind", options_.host,
        "--protected-mode", "no",
        "--daemonize", "no",
        "--supervised", "no",
        "--dir", dir.string(),
        "--logfile", "",
        "--save", "",
        "--appendonly", options_.aof ? "yes" : "no",
        "--appendfsync", options_.aof ? "always" : "everysec",
        "--auto-aof-rewrite-percentage", "0",
        "--notify-keyspace-events", "Kg$x",
        "--databases", "1"};
    std::error_code size_ec;
    const auto log_offset = fs::file_size(log_file, size_ec);
    process::ChildSpec spec;
    spec.name = "redis-server";
    spec.exe = binary_;
    spec.args = std::move(args);
    spec.output_log = log_file;  // appended: a restart adds to it
    spec.env = options_.env;
    spec.prefix = options_.prefix;
    proc_.reset();
    try {
      proc_ = std::make_unique<process::ChildProcess>(std::move(spec), nullptr);
    } catch (const std::runtime_error& err) {
      throw std::runtime_error(std::string("embedded redis: ") + err.what());
    }
    port_ = port;
    spdlog::debug("embedded redis pid {} starting on {}:{} (dir {}, {}), log {}", proc_->pid(), options_.host, port,
                  dir.string(), options_.aof ? "appendonly, fsync always" : "no persistence", log_file.string());

    const auto deadline = std::chrono::steady_clock::now() + options_.start_timeout;
    while (std::chrono::steady_clock::now() < deadline && proc_->running()) {
      if (answers(endpoint())) return;
      std::this_thread::sleep_for(20ms);
    }
    const bool exited = !proc_->running();
    if (!exited) stop();
    proc_.reset();
    const std::string log = process::read_text(log_file, log_offset);
    last_failure = process::start_failure("embedded redis-server on " + options_.host + ":" + std::to_string(port),
                                          exited, {"answered PING", "answer PING"}, options_.start_timeout, log_file,
                                          log);
    if (!exited || fixed_port || !process::port_was_taken(log)) throw LockServiceUnavailable(last_failure);
    port_ = 0;
    spdlog::warn("embedded redis: port {} was taken; retrying with another (attempt {})", port, attempt);
  }
  throw LockServiceUnavailable("embedded redis-server: no free port after " + std::to_string(options_.port_attempts) +
                               " attempts; last: " + last_failure);
}

void EmbeddedRedis::kill() noexcept {
  if (!proc_) return;
  const pid_t pid = proc_->pid();
  ::kill(pid, SIGKILL);
  if (!proc_->wait_for(options_.stop_grace))
    spdlog::warn("embedded redis pid {}: not reaped {} ms after SIGKILL", pid, options_.stop_grace.count());
  proc_.reset();
}

void EmbeddedRedis::stop() noexcept {
  if (!proc_) return;
  const pid_t pid = proc_->pid();
  try {
    ::kill(pid, SIGCONT);  // a stopped server can neither answer SHUTDOWN nor act on SIGTERM
    bool asked = false;
    if (!options_.aof) {
      // persistence none: SHUTDOWN NOSAVE says so explicitly (nothing is written, whatever the
      // save points); the server closes the connection instead of replying.
      std::unique_ptr<Connection> c;
      try {
        c = std::make_unique<Connection>(endpoint(), 500ms, 1000ms);
      } catch (const std::exception& err) {  // no SHUTDOWN then: SIGTERM below ends it the same way
        spdlog::debug("embedded redis pid {}: no connection for SHUTDOWN ({}); SIGTERM instead", pid, err.what());
      }
      if (c) {
        try {
          c->command({"SHUTDOWN", "NOSAVE"}, "SHUTDOWN NOSAVE");
        } catch (const std::exception&) {  // the expected end: the server closed the connection
        }
        asked = true;
      }
    }
    if (!(asked && proc_->wait_for(options_.stop_grace))) {
      // aof: SIGTERM, and Redis fsyncs the AOF and exits (no save points are configured); SIGKILL
      // after stop_grace (ChildProcess::terminate: SIGCONT, SIGTERM, SIGKILL; reaped).
      proc_->terminate(options_.stop_grace);
      if (const auto code = proc_->exit_code(); code && *code == 128 + SIGKILL)
        spdlog::warn("embedded redis pid {} ignored SIGTERM for {} ms; SIGKILL", pid, options_.stop_grace.count());
    }
  } catch (const std::exception& err) {
    spdlog::warn("embedded redis pid {}: stopping it failed: {} (it ends with the harness: PR_SET_PDEATHSIG)", pid,
                 err.what());
  } catch (...) {  // stop() must not throw; not a std::exception, so nothing more to say
    spdlog::warn("embedded redis pid {}: stopping it failed (unknown exception)", pid);
  }
  proc_.reset();
}

}  // namespace fencecheck::locks::redis_detail
