// EmbeddedZooKeeper and stop_orphaned_zookeeper (embedded_zookeeper.h).
#include "embedded_zookeeper.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <thread>

#include <spdlog/spdlog.h>

#include "fencecheck/process/child_process.h"
#include "fencecheck/process/server_support.h"
#include "fencecheck/locks/lock_service_kind.h"
#include "zk_handle.h"

namespace fencecheck::locks::zk {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr const char* kJars[] = {"/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-simple.jar"};

/// The command line of a process, its NUL separators as spaces; "" when it is gone.
std::string cmdline_of(long pid) {
  std::string text = process::read_text("/proc/" + std::to_string(pid) + "/cmdline");
  for (char& c : text)
    if (c == '\0') c = ' ';
  return text;
}

/// The parent of a process from /proc/<pid>/status; 0 when unknown.
long parent_of(long pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("PPid:", 0) == 0) return std::strtol(line.c_str() + 5, nullptr, 10);
  return 0;
}

}  // namespace

EmbeddedZooKeeper::EmbeddedZooKeeper(process::EmbeddedOptions options, std::chrono::milliseconds tick_time)
    : options_(std::move(options)), tick_time_(tick_time) {
  if (const char* cp = std::getenv("FENCECHECK_ZOOKEEPER_CLASSPATH"); cp && *cp) {
    classpath_ = cp;
  } else {
    for (const char* jar : kJars) {
      if (!fs::exists(jar))
        throw LockServiceUnavailable(
            std::string("the embedded ZooKeeper needs ") + jar +
            ": install Debian's zookeeper package (scripts/install-deps.sh zookeeper, or apt-get install zookeeper; it brings libzookeeper-java and "
            "libslf4j-java), set FENCECHECK_ZOOKEEPER_CLASSPATH to a ZooKeeper 3.5+ server classpath with an slf4j "
            "binding, or give lock_service endpoints: of your own");
      classpath_ += (classpath_.empty() ? "" : ":") + std::string(jar);
    }
  }
  const auto java = process::find_on_path("java");
  if (!java)
    throw LockServiceUnavailable(
        "the embedded ZooKeeper needs java on PATH: install Debian's zookeeper package (it depends on a Java runtime: "
        "scripts/install-deps.sh zookeeper, or apt-get install zookeeper default-jre-headless), or give lock_service endpoints: of your own");
  java_ = *java;
  options_.run_dir = fs::absolute(options_.run_dir);
  fs::create_directories(options_.run_dir);
  data_dir_ = options_.run_dir / "zookeeper-data";
  config_ = options_.run_dir / "zookeeper.cfg";
  fs::create_directories(data_dir_);
  start(false);
}

EmbeddedZooKeeper::~EmbeddedZooKeeper() { stop(); }

fs::path EmbeddedZooKeeper::log(const std::string& name) const {
  if (options_.log_path) return options_.log_path(name);
  fs::create_directories(options_.run_dir / "logs");
  return options_.run_dir / "logs" / (name + ".log");
}

std::string EmbeddedZooKeeper::endpoint() const {
  const bool v6 = options_.host.find(':') != std::string::npos;
  return (v6 ? "[" + options_.host + "]" : options_.host) + ":" + std::to_string(port_);
}

bool EmbeddedZooKeeper::running() const { return proc_ && proc_->running(); }
pid_t EmbeddedZooKeeper::pid() const { return running() ? proc_->pid() : 0; }

void EmbeddedZooKeeper::write_config(int port) const {
  const long tick = tick_time_.count();
  std::ofstream cfg(config_, std::ios::trunc);
  cfg << "# Written by fencecheck for one run (workers/locks/zookeeper/embedded_zookeeper.h says why each value).\n"
      << "tickTime=" << tick << "\n"
      << "minSessionTimeout=" << 2 * tick << "\n"
      << "maxSessionTimeout=" << std::max<long>(60000, 20 * tick) << "\n"
      << "dataDir=" << data_dir_.string() << "\n"
      << "clientPort=" << port << "\n"
      << "clientPortAddress=" << options_.host << "\n"
      << "admin.enableServer=false\n"
      << "4lw.commands.whitelist=ruok,srvr,stat,cons,dump\n"
      << "maxClientCnxns=0\n"
      << "forceSync=no\n";
  if (!cfg) throw std::runtime_error("cannot write " + config_.string());
}

void EmbeddedZooKeeper::start(bool fresh_data) {
  if (running()) {
    if (!fresh_data) return;
    stop();
  }
  proc_.reset();
  if (fresh_data) {
    // Keep the old data for inspection beside the new, empty directory.
    const fs::path old = options_.run_dir / ("zookeeper-data." + std::to_string(starts_));
    std::error_code ec;
    fs::remove_all(old, ec);
    fs::rename(data_dir_, old, ec);
    if (ec) fs::remove_all(data_dir_, ec);
    fs::create_directories(data_dir_);
  }
  const int attempts = options_.port > 0 || port_ > 0 ? 1 : 5;
  std::string last;
  for (int attempt = 1; attempt <= attempts; ++attempt) {
    const int port = options_.port > 0 ? options_.port : port_ > 0 ? port_ : process::free_tcp_port(options_.host);
    write_config(port);
    ++starts_;
    process::ChildSpec spec;
    spec.name = "zookeeper";
    spec.exe = java_;
    spec.stderr_log = log(starts_ == 1 ? "zookeeper" : "zookeeper-" + std::to_string(starts_));
    spec.args = {"-XX:+UseSerialGC",
                 "-XX:TieredStopAtLevel=1",
                 "-Xmx256m",
                 "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
                 "-Dorg.slf4j.simpleLogger.logFile=System.err",
                 "-Dorg.slf4j.simpleLogger.showDateTime=true",
                 "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSSZ",
                 "-Dzookeeper.admin.enableServer=false",
                 "-cp",
                 classpath_,
                 kMainClass,
                 config_.string()};
    const auto t0 = Clock::now();
    proc_ = std::make_unique<process::ChildProcess>(spec, [](std::string_view line, std::int64_t, bool eof) {
      if (!eof) spdlog::debug("zookeeper stdout: {}", line);
    });
    logs_.push_back(spec.stderr_log);
    const auto deadline = t0 + options_.start_timeout;
    while (Clock::now() < deadline && proc_->running()) {
      const auto reply = four_letter_word(options_.host, port, "srvr", 500ms);
      if (reply && reply->find("Mode: standalone") != std::string::npos) {
        port_ = port;
        start_time_ = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
        std::ofstream(options_.run_dir / kPidFile, std::ios::trunc)
            << "pid " << proc_->pid() << "\nconfig " << config_.string() << "\nharness " << ::getpid() << "\n";
        spdlog::info("embedded ZooKeeper pid {} serving on {} in {} ms (data {}, log {})", proc_->pid(), endpoint(),
                     start_time_.count(), data_dir_.string(), spec.stderr_log.string());
        return;
      }
      std::this_thread::sleep_for(20ms);
    }
    const bool exited = !proc_->running();
    if (!exited) stop();
    proc_.reset();
    const std::string text = process::read_text(spec.stderr_log);
    last = process::start_failure("the embedded ZooKeeper (" + java_.string() + " " + kMainClass + " on " +
                                      options_.host + ":" + std::to_string(port) + ")",
                                  exited, {"served clients", "serve clients"}, options_.start_timeout,
                                  spec.stderr_log, text);
    if (!exited || !process::port_was_taken(text)) break;
    spdlog::warn("embedded ZooKeeper: port {} was taken; retrying with another (attempt {})", port, attempt);
  }
  throw LockServiceUnavailable(last);
}

void EmbeddedZooKeeper::stop() noexcept {
  if (!proc_) return;
  try {
    proc_->terminate(options_.stop_grace);
    proc_.reset();
    std::error_code ec;
    fs::remove(options_.run_dir / kPidFile, ec);
  } catch (const std::exception& err) {
    spdlog::warn("embedded ZooKeeper: stopping it failed: {} (it ends with the harness: PR_SET_PDEATHSIG)", err.what());
  } catch (...) {  // stop() must not throw; not a std::exception, so nothing more to say
    spdlog::warn("embedded ZooKeeper: stopping it failed (unknown exception)");
  }
}

OrphanReport stop_orphaned_zookeeper(const fs::path& run_dir, bool force) {
  OrphanReport out;
  try {
    std::ifstream in(run_dir / kPidFile);
    if (!in) return out;
    long pid = 0;
    long owner = 0;  // the harness that started it
    std::string config;
    for (std::string key; in >> key;) {
      if (key == "pid") in >> pid;
      else if (key == "harness") in >> owner;
      else if (key == "config") in >> std::ws, std::getline(in, config);
    }
    std::error_code ec;
    const auto p = static_cast<pid_t>(pid);
    const std::string cmd = pid > 1 ? cmdline_of(pid) : "";
    if (pid <= 1 || config.empty() || process::process_gone(p)) {
      out.said.push_back("zookeeper: the embedded server " + (run_dir / kPidFile).string() + " names (pid " +
                    std::to_string(pid) + ") is gone (it ended with its harness); removed the record");
      fs::remove(run_dir / kPidFile, ec);
      return out;
    }
    if (cmd.find(kMainClass) == std::string::npos || cmd.find(config) == std::string::npos) {
      out.said.push_back("zookeeper: " + (run_dir / kPidFile).string() + " names pid " + std::to_string(pid) +
                    ", which is not this run's ZooKeeper server (another program); left it alone, removed the record");
      fs::remove(run_dir / kPidFile, ec);
      return out;
    }
    if (!force && owner > 1 && parent_of(pid) == owner && !process::process_gone(static_cast<pid_t>(owner))) {
      out.said.push_back("zookeeper: pid " + std::to_string(pid) + " belongs to a live harness (pid " +
                    std::to_string(owner) + "); left alone (--force stops it)");
      return out;
    }
    ::kill(p, SIGCONT);
    ::kill(p, SIGTERM);
    if (!process::wait_process_gone(p, 5s)) {
      ::kill(p, SIGKILL);
      if (!process::wait_process_gone(p, 2s)) {  // kept: the next cleanup tries again
        out.said.push_back("zookeeper: the orphaned embedded ZooKeeper pid " + std::to_string(pid) + " (" + config +
                           ") still runs 2 s after SIGKILL; not stopped, its record kept");
        ++out.not_stopped;
        return out;
      }
    }
    out.said.push_back("zookeeper: stopped the orphaned embedded ZooKeeper pid " + std::to_string(pid) + " (" + config + ")");
    fs::remove(run_dir / kPidFile, ec);
  } catch (const std::exception& e) {
    out.said.push_back("zookeeper cleanup of " + run_dir.string() + ": " + e.what());
    ++out.not_stopped;
  } catch (...) {  // not a std::exception: name the run at least
    out.said.push_back("zookeeper cleanup of " + run_dir.string() + ": failed (unknown exception)");
    ++out.not_stopped;
  }
  return out;
}

}  // namespace fencecheck::locks::zk
