// EmbeddedZooKeeper and stop_orphaned_zookeeper (embedded_zookeeper.h).
#include "embedded_zookeeper.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <fstream>
#include <stdexcept>
#include <thread>

#include <spdlog/fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "fencecheck/faults/clock_offset.h"
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

/// Java and the server's classpath (embedded_zookeeper.h says where from). Throws
/// LockServiceUnavailable naming what is missing and how to install it.
void find_server(fs::path& java_out, std::string& classpath_out) {
  std::string classpath;
  if (const char* cp = std::getenv("FENCECHECK_ZOOKEEPER_CLASSPATH"); cp && *cp) {
    classpath = cp;
  } else {
    for (const char* jar : kJars) {
      if (!fs::exists(jar))
        throw LockServiceUnavailable(
            std::string("the embedded ZooKeeper needs ") + jar +
            ": install Debian's zookeeper package (scripts/install-deps.sh zookeeper, or apt-get install zookeeper; it brings libzookeeper-java and "
            "libslf4j-java), set FENCECHECK_ZOOKEEPER_CLASSPATH to a ZooKeeper 3.5+ server classpath with an slf4j "
            "binding, or give lock_service endpoints: of your own");
      classpath += (classpath.empty() ? "" : ":") + std::string(jar);
    }
  }
  const auto java = process::find_on_path("java");
  if (!java)
    throw LockServiceUnavailable(
        "the embedded ZooKeeper needs java on PATH: install Debian's zookeeper package (it depends on a Java runtime: "
        "scripts/install-deps.sh zookeeper, or apt-get install zookeeper default-jre-headless), or give lock_service endpoints: of your own");
  java_out = *java;
  classpath_out = std::move(classpath);
}

/// The JVM's arguments for one server (embedded_zookeeper.h says why each flag).
std::vector<std::string> server_args(const std::string& classpath, const char* main_class, const fs::path& config) {
  return {"-XX:+UseSerialGC",
          "-XX:TieredStopAtLevel=1",
          "-Xmx256m",
          "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
          "-Dorg.slf4j.simpleLogger.logFile=System.err",
          "-Dorg.slf4j.simpleLogger.showDateTime=true",
          "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSSZ",
          "-Dzookeeper.admin.enableServer=false",
          "-cp",
          classpath,
          main_class,
          config.string()};
}

/// The zoo.cfg lines every embedded server shares (embedded_zookeeper.h says why each value).
void common_config(std::ostream& cfg, long tick, const fs::path& data_dir, int port, const std::string& host) {
  cfg << "# Written by fencecheck for one run (workers/locks/zookeeper/embedded_zookeeper.h says why each value).\n"
      << "tickTime=" << tick << "\n"
      << "minSessionTimeout=" << 2 * tick << "\n"
      << "maxSessionTimeout=" << std::max<long>(60000, 20 * tick) << "\n"
      << "dataDir=" << data_dir.string() << "\n"
      << "clientPort=" << port << "\n"
      << "clientPortAddress=" << host << "\n"
      << "admin.enableServer=false\n"
      << "4lw.commands.whitelist=ruok,srvr,stat,cons,dump\n"
      << "maxClientCnxns=0\n"
      << "forceSync=no\n"
      << "preAllocSize=4096\n";
}

/// "host:port" (an IPv6 host in brackets).
std::string host_port(const std::string& host, int port) {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

/// Whether something accepts TCP connections at host:port now (a connect, closed at once).
bool listens(const std::string& host, int port) {
  sockaddr_storage addr{};
  socklen_t len = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&addr);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&addr);
  if (::inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<std::uint16_t>(port));
    len = sizeof(sockaddr_in);
  } else if (::inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<std::uint16_t>(port));
    len = sizeof(sockaddr_in6);
  } else {
    return false;
  }
  const int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), len) == 0;
  ::close(fd);
  return ok;
}

/// The "Mode: " of a `srvr` reply ("leader", "follower", "standalone"), "" when it has none (not
/// serving: "This ZooKeeper instance is not currently serving requests").
std::string mode_of(const std::string& reply) {
  const auto at = reply.find("Mode: ");
  if (at == std::string::npos) return "";
  const auto end = reply.find('\n', at);
  std::string mode = reply.substr(at + 6, end == std::string::npos ? std::string::npos : end - at - 6);
  while (!mode.empty() && (mode.back() == '\r' || mode.back() == ' ')) mode.pop_back();
  return mode;
}

/// The "Zxid: 0x..." of a `srvr` reply; 0 when it has none.
std::uint64_t zxid_of(const std::string& reply) {
  const auto at = reply.find("Zxid: 0x");
  if (at == std::string::npos) return 0;
  try {
    return std::stoull(reply.substr(at + 8), nullptr, 16);
  } catch (const std::logic_error&) {
    return 0;
  }
}

}  // namespace

EmbeddedZooKeeper::EmbeddedZooKeeper(process::EmbeddedOptions options, std::chrono::milliseconds tick_time)
    : options_(std::move(options)), tick_time_(tick_time) {
  find_server(java_, classpath_);
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

std::string EmbeddedZooKeeper::endpoint() const { return host_port(options_.host, port_); }

bool EmbeddedZooKeeper::running() const { return proc_ && proc_->running(); }
pid_t EmbeddedZooKeeper::pid() const { return running() ? proc_->pid() : 0; }

void EmbeddedZooKeeper::write_config(int port) const {
  std::ofstream cfg(config_, std::ios::trunc);
  common_config(cfg, tick_time_.count(), data_dir_, port, options_.host);
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
    spec.args = server_args(classpath_, kMainClass, config_);
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

// ---- ZooKeeperEnsemble

namespace {
constexpr int kNamespaceClientPort = 2181;  // ZooKeeper's usual ports: free in a namespace of the member's own
constexpr int kNamespaceQuorumPort = 2888;
constexpr int kNamespaceElectionPort = 3888;
}  // namespace

struct ZooKeeperEnsemble::Member {
  int index = 0;
  Place place;
  int client_port = 0, quorum_port = 0, election_port = 0;
  fs::path data_dir, config, pid_file;
  std::vector<fs::path> logs;  // one per start
  std::unique_ptr<process::ChildProcess> child;
};

ZooKeeperEnsemble::ZooKeeperEnsemble(Options options) : options_(std::move(options)) {
  if (options_.members < 1) throw std::invalid_argument("ZooKeeperEnsemble: members must be at least 1");
  if (!options_.places.empty() && static_cast<int>(options_.places.size()) != options_.members)
    throw std::invalid_argument("ZooKeeperEnsemble: one place per member");
  find_server(java_, classpath_);
  options_.run_dir = fs::absolute(options_.run_dir);
  fs::create_directories(options_.run_dir);
  const bool in_namespaces = !options_.places.empty() && !options_.places.front().netns.empty();
  std::string last;
  for (int attempt = 1; attempt <= std::max(1, options_.port_attempts); ++attempt) {
    try {
      start_once();
      return;
    } catch (const std::exception& err) {
      last = err.what();
      bool taken = false;
      for (const auto& m : members_)
        for (const auto& l : m->logs) taken = taken || process::port_was_taken(process::read_text(l));
      stop();
      if (!taken || in_namespaces) throw LockServiceUnavailable(last);
      spdlog::warn("embedded ZooKeeper ensemble: a port was taken; retrying with new ports (attempt {})", attempt);
    }
  }
  throw LockServiceUnavailable("the embedded ZooKeeper ensemble: no free ports after " +
                               std::to_string(options_.port_attempts) + " attempts; last: " + last);
}

ZooKeeperEnsemble::~ZooKeeperEnsemble() { stop(); }

ZooKeeperEnsemble::Member& ZooKeeperEnsemble::at(int index) const {
  if (index < 1 || index > size())
    throw std::out_of_range("the ZooKeeper ensemble has no member " + std::to_string(index) + " (members 1.." +
                            std::to_string(size()) + ")");
  return *members_[static_cast<std::size_t>(index - 1)];
}

std::string ZooKeeperEnsemble::endpoint(int index) const {
  const Member& m = at(index);
  return host_port(m.place.host, m.client_port);
}

std::vector<std::string> ZooKeeperEnsemble::endpoints() const {
  std::vector<std::string> out;
  for (int i = 1; i <= size(); ++i) out.push_back(endpoint(i));
  return out;
}

int ZooKeeperEnsemble::pid(int index) const {
  Member& m = at(index);
  return m.child && m.child->running() ? m.child->pid() : 0;
}

const ZooKeeperEnsemble::Place& ZooKeeperEnsemble::place(int index) const { return at(index).place; }
int ZooKeeperEnsemble::client_port(int index) const { return at(index).client_port; }
const fs::path& ZooKeeperEnsemble::data_dir(int index) const { return at(index).data_dir; }

std::vector<fs::path> ZooKeeperEnsemble::logs() const {
  std::vector<fs::path> out;
  for (const auto& m : members_) out.insert(out.end(), m->logs.begin(), m->logs.end());
  return out;
}

void ZooKeeperEnsemble::start_once() {
  members_.clear();
  const int n = options_.members;
  for (int i = 1; i <= n; ++i) {
    auto m = std::make_unique<Member>();
    m->index = i;
    if (!options_.places.empty()) m->place = options_.places[static_cast<std::size_t>(i - 1)];
    else m->place.host = options_.host;
    if (!m->place.netns.empty()) {
      m->client_port = kNamespaceClientPort;
      m->quorum_port = kNamespaceQuorumPort;
      m->election_port = kNamespaceElectionPort;
    } else {
      // Three distinct free ports per member, none another member's.
      std::vector<int> taken;
      for (const auto& o : members_) taken.insert(taken.end(), {o->client_port, o->quorum_port, o->election_port});
      auto fresh = [&] {
        int p = 0;
        do p = process::free_tcp_port(m->place.host);
        while (std::find(taken.begin(), taken.end(), p) != taken.end());
        taken.push_back(p);
        return p;
      };
      m->client_port = fresh();
      m->quorum_port = fresh();
      m->election_port = fresh();
    }
    m->data_dir = options_.run_dir / ("zookeeper-data-" + std::to_string(i));
    m->config = options_.run_dir / ("zookeeper-" + std::to_string(i) + ".cfg");
    m->pid_file = options_.run_dir / ("zookeeper-" + std::to_string(i) + ".pid");
    std::error_code ec;
    fs::remove_all(m->data_dir, ec);  // a new ensemble: an earlier attempt's data would rejoin it
    fs::create_directories(m->data_dir);
    std::ofstream(m->data_dir / "myid", std::ios::trunc) << i << "\n";
    // At its full size before the member starts: the shim maps it at its first clock read.
    if (!options_.clock_shim.empty()) (void)faults::ClockOffsetFile(m->data_dir / "clock-offset");
    members_.push_back(std::move(m));
  }
  for (const auto& m : members_) {
    std::ofstream cfg(m->config, std::ios::trunc);
    common_config(cfg, options_.tick_time.count(), m->data_dir, m->client_port, m->place.host);
    cfg << "initLimit=" << options_.init_limit << "\n"
        << "syncLimit=" << options_.sync_limit << "\n"
        << "standaloneEnabled=false\n"
        << "reconfigEnabled=false\n";
    for (const auto& o : members_)
      cfg << "server." << o->index << "=" << o->place.host << ":" << o->quorum_port << ":" << o->election_port << "\n";
    if (!cfg) throw std::runtime_error("cannot write " + m->config.string());
  }
  // Member n first, the others once its election port listens (the header says why).
  const auto t0 = Clock::now();
  const auto deadline = t0 + options_.start_timeout;
  Member& last = *members_.back();
  launch(last);
  while (n > 1 && !listens(last.place.host, last.election_port)) {
    if (!last.child->running() || Clock::now() >= deadline) {
      wait_serving(last, Clock::now());  // throws with the log's tail
      break;
    }
    std::this_thread::sleep_for(20ms);
  }
  for (auto& m : members_)
    if (m.get() != &last) launch(*m);
  for (auto& m : members_) wait_serving(*m, deadline);
  start_time_ = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
  std::string why;
  const auto lead = leader(why);
  spdlog::info("embedded ZooKeeper ensemble of {} serving on {} in {} ms; leader {} ({})", n,
               fmt::format("{}", fmt::join(endpoints(), ",")), start_time_.count(),
               lead ? "member " + std::to_string(*lead) : std::string("none"), why);
}

void ZooKeeperEnsemble::launch(Member& m) {
  process::ChildSpec spec;
  spec.name = "zookeeper member " + std::to_string(m.index);
  spec.exe = java_;
  spec.args = server_args(classpath_, kQuorumMainClass, m.config);
  if (!m.place.netns.empty()) spec.prefix = {"ip", "netns", "exec", m.place.netns};
  if (!options_.clock_shim.empty())
    spec.env = {{"LD_PRELOAD", options_.clock_shim.string()},
                {faults::kClockFileVariable, (m.data_dir / "clock-offset").string()}};
  const std::string name = "zookeeper-" + std::to_string(m.index) +
                           (m.logs.empty() ? std::string() : "-" + std::to_string(m.logs.size() + 1));
  if (options_.log_path) {
    spec.stderr_log = options_.log_path(name);
  } else {
    fs::create_directories(options_.run_dir / "logs");
    spec.stderr_log = options_.run_dir / "logs" / (name + ".log");
  }
  m.logs.push_back(spec.stderr_log);
  const int index = m.index;
  m.child = std::make_unique<process::ChildProcess>(spec, [index](std::string_view line, std::int64_t, bool eof) {
    if (!eof) spdlog::debug("zookeeper member {} stdout: {}", index, line);
  });
  std::ofstream(m.pid_file, std::ios::trunc) << "pid " << m.child->pid() << "\nconfig " << m.config.string()
                                             << "\nharness " << ::getpid() << "\n";
  spdlog::debug("zookeeper member {} pid {} on {} (quorum {}, election {}{}), log {}", m.index, m.child->pid(),
                host_port(m.place.host, m.client_port), m.quorum_port, m.election_port,
                m.place.netns.empty() ? "" : ", netns " + m.place.netns, spec.stderr_log.string());
}

void ZooKeeperEnsemble::wait_serving(Member& m, Clock::time_point deadline) {
  while (m.child->running() && Clock::now() < deadline) {
    const auto reply = four_letter_word(m.place.host, m.client_port, "srvr", 500ms);
    if (reply) {
      const std::string mode = mode_of(*reply);
      if (mode == "leader" || mode == "follower") return;
    }
    std::this_thread::sleep_for(20ms);
  }
  const bool exited = !m.child->running();
  if (!exited) m.child->terminate(0ms);
  const fs::path log = m.logs.back();
  throw std::runtime_error(process::start_failure(
      "the embedded ZooKeeper ensemble's member " + std::to_string(m.index) + " (" + kQuorumMainClass + " on " +
          host_port(m.place.host, m.client_port) + ")",
      exited, {"joined a quorum as leader or follower", "join a quorum"}, options_.start_timeout, log,
      process::read_text(log)));
}

std::optional<int> ZooKeeperEnsemble::leader(std::string& why) const {
  std::optional<int> best;
  std::uint64_t best_epoch = 0;
  std::string said;
  for (const auto& m : members_) {
    said += said.empty() ? "" : "; ";
    if (!m->child || !m->child->running()) {
      said += "member " + std::to_string(m->index) + " is down";
      continue;
    }
    const auto reply = four_letter_word(m->place.host, m->client_port, "srvr", 500ms);
    if (!reply) {
      said += "member " + std::to_string(m->index) + " did not answer srvr";
      continue;
    }
    const std::string mode = mode_of(*reply);
    const std::uint64_t zxid = zxid_of(*reply);
    said += "member " + std::to_string(m->index) + ": " + (mode.empty() ? "not serving" : mode) +
            (mode.empty() ? std::string() : fmt::format(", zxid 0x{:x}", zxid));
    if (mode == "leader" && (!best || (zxid >> 32) > best_epoch)) {
      best = m->index;
      best_epoch = zxid >> 32;
    }
  }
  why = said;
  return best;
}

void ZooKeeperEnsemble::stop_member(int index, bool kill9) {
  Member& m = at(index);
  if (!m.child) return;
  if (kill9 && m.child->running()) {
    ::kill(m.child->pid(), SIGCONT);  // a stopped member still dies of SIGKILL; SIGCONT for the reaper's sake
    ::kill(m.child->pid(), SIGKILL);  // our own child, not yet reaped: the pid cannot have been reused
    m.child->terminate(0ms);
  } else {
    if (m.child->running()) ::kill(m.child->pid(), SIGCONT);
    m.child->terminate(options_.stop_grace);
  }
  if (m.child->running()) throw std::runtime_error("zookeeper member " + std::to_string(index) + " did not end");
  m.child.reset();
  std::error_code ec;
  fs::remove(m.pid_file, ec);
}

void ZooKeeperEnsemble::start_member(int index) {
  Member& m = at(index);
  if (m.child && m.child->running()) return;
  m.child.reset();
  launch(m);
  wait_serving(m, Clock::now() + options_.start_timeout);
}

void ZooKeeperEnsemble::start_all() {
  std::vector<Member*> started;
  for (auto& m : members_)
    if (!m->child || !m->child->running()) {
      m->child.reset();
      launch(*m);
      started.push_back(m.get());
    }
  const auto deadline = Clock::now() + options_.start_timeout;
  for (Member* m : started) wait_serving(*m, deadline);
}

void ZooKeeperEnsemble::stop() noexcept {
  for (auto& m : members_)
    if (m->child && m->child->running()) ::kill(m->child->pid(), SIGCONT), ::kill(m->child->pid(), SIGTERM);
  for (auto& m : members_) {
    try {
      if (m->child) m->child->terminate(options_.stop_grace);
    } catch (const std::exception& err) {
      spdlog::warn("zookeeper member {}: stopping it failed: {} (it ends with the harness: PR_SET_PDEATHSIG)", m->index,
                   err.what());
    }
    m->child.reset();
    std::error_code ec;
    fs::remove(m->pid_file, ec);
  }
}

// ---- orphans

namespace {

/// stop_orphaned_zookeeper for one pid record.
void stop_orphan(const fs::path& record, bool force, OrphanReport& out) {
  try {
    std::ifstream in(record);
    if (!in) return;
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
      out.said.push_back("zookeeper: the embedded server " + record.string() + " names (pid " +
                    std::to_string(pid) + ") is gone (it ended with its harness); removed the record");
      fs::remove(record, ec);
      return;
    }
    if ((cmd.find(kMainClass) == std::string::npos && cmd.find(kQuorumMainClass) == std::string::npos) ||
        cmd.find(config) == std::string::npos) {
      out.said.push_back("zookeeper: " + record.string() + " names pid " + std::to_string(pid) +
                    ", which is not this run's ZooKeeper server (another program); left it alone, removed the record");
      fs::remove(record, ec);
      return;
    }
    if (!force && owner > 1 && parent_of(pid) == owner && !process::process_gone(static_cast<pid_t>(owner))) {
      out.said.push_back("zookeeper: pid " + std::to_string(pid) + " belongs to a live harness (pid " +
                    std::to_string(owner) + "); left alone (--force stops it)");
      return;
    }
    ::kill(p, SIGCONT);
    ::kill(p, SIGTERM);
    if (!process::wait_process_gone(p, 5s)) {
      ::kill(p, SIGKILL);
      if (!process::wait_process_gone(p, 2s)) {  // kept: the next cleanup tries again
        out.said.push_back("zookeeper: the orphaned embedded ZooKeeper pid " + std::to_string(pid) + " (" + config +
                           ") still runs 2 s after SIGKILL; not stopped, its record kept");
        ++out.not_stopped;
        return;
      }
    }
    out.said.push_back("zookeeper: stopped the orphaned embedded ZooKeeper pid " + std::to_string(pid) + " (" + config + ")");
    fs::remove(record, ec);
  } catch (const std::exception& e) {
    out.said.push_back("zookeeper cleanup of " + record.string() + ": " + e.what());
    ++out.not_stopped;
  } catch (...) {  // not a std::exception: name the run at least
    out.said.push_back("zookeeper cleanup of " + record.string() + ": failed (unknown exception)");
    ++out.not_stopped;
  }
}

}  // namespace

OrphanReport stop_orphaned_zookeeper(const fs::path& run_dir, bool force) {
  OrphanReport out;
  std::vector<fs::path> records;
  std::error_code ec;
  if (fs::exists(run_dir / kPidFile, ec)) records.push_back(run_dir / kPidFile);
  for (int i = 1; i <= 9; ++i)  // an ensemble's members (lock_service.members is at most 9)
    if (fs::exists(run_dir / ("zookeeper-" + std::to_string(i) + ".pid"), ec))
      records.push_back(run_dir / ("zookeeper-" + std::to_string(i) + ".pid"));
  for (const auto& r : records) stop_orphan(r, force, out);
  return out;
}

}  // namespace fencecheck::locks::zk
