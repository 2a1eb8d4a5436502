// EmbeddedPostgres (postgres_embedded.h) and stop_orphaned_postgres (postgres.h).
#include "postgres_embedded.h"

#include <arpa/inet.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include <libpq-fe.h>
#include <spdlog/spdlog.h>

#include "fencecheck/process/child_process.h"
#include "fencecheck/process/server_support.h"
#include "fencecheck/resources/postgres.h"
#include "fencecheck/resources/resource_kind.h"
#include "postgres_libpq.h"

namespace fencecheck::postgres::detail {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using resources::ResourceUnavailable;

constexpr const char* kSuperuser = "postgres";
constexpr const char* kDatabase = "fencecheck";
constexpr std::size_t kSunPathMax = 107;  // sizeof(sockaddr_un::sun_path) - 1

std::chrono::milliseconds since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
}

/// The newest /usr/lib/postgresql/<N>/bin holding initdb and postgres, or FENCECHECK_POSTGRES_BINDIR.
fs::path find_bindir() {
  auto usable = [](const fs::path& d) {
    return ::access((d / "initdb").c_str(), X_OK) == 0 && ::access((d / "postgres").c_str(), X_OK) == 0;
  };
  if (const char* env = std::getenv("FENCECHECK_POSTGRES_BINDIR"); env && *env) {
    if (!usable(env))
      throw ResourceUnavailable(std::string("FENCECHECK_POSTGRES_BINDIR=") + env +
                                " does not hold the PostgreSQL server programs initdb and postgres");
    return env;
  }
  fs::path best;
  long best_version = -1;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    const std::string name = entry.path().filename().string();
    char* end = nullptr;
    const long v = std::strtol(name.c_str(), &end, 10);
    if (end == name.c_str() || *end != '\0') continue;
    if (v > best_version && usable(entry.path() / "bin")) {
      best_version = v;
      best = entry.path() / "bin";
    }
  }
  if (best.empty())
    throw ResourceUnavailable(
        "the embedded PostgreSQL needs Debian's server programs (initdb, postgres in /usr/lib/postgresql/<N>/bin): "
        "scripts/install-deps.sh postgres (apt-get install postgresql-15), or set FENCECHECK_POSTGRES_BINDIR; or give the resource a dsn: of your own");
  return best;
}

/// True when user uid (primary group gid, supplementary `groups`) may search every directory from
/// / down to `dir` (execute permission by owner, group or other bits; ACLs are not read).
bool traversable(const fs::path& dir, uid_t uid, gid_t gid, const std::vector<gid_t>& groups) {
  if (uid == 0) return true;
  fs::path p;
  for (const auto& part : fs::absolute(dir)) {
    p /= part;
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) return false;
    mode_t bit = S_IXOTH;
    if (st.st_uid == uid) {
      bit = S_IXUSR;
    } else if (st.st_gid == gid || std::find(groups.begin(), groups.end(), st.st_gid) != groups.end()) {
      bit = S_IXGRP;
    }
    if ((st.st_mode & bit) == 0) return false;
  }
  return true;
}

std::vector<gid_t> groups_of(const char* user, gid_t gid) {
  int n = 32;
  std::vector<gid_t> out(static_cast<std::size_t>(n));
  while (::getgrouplist(user, gid, out.data(), &n) < 0) out.resize(static_cast<std::size_t>(n) + 1);
  out.resize(static_cast<std::size_t>(n));
  return out;
}

bool loopback(const std::string& host) {
  return host.rfind("127.", 0) == 0 || host == "::1" || host == "localhost";
}

void make_dir(const fs::path& dir, uid_t uid, gid_t gid, bool chown_it) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    throw std::runtime_error("cannot create " + dir.string() + ": " + std::strerror(errno));
  if (chown_it && ::chown(dir.c_str(), uid, gid) != 0)
    throw std::runtime_error("cannot give " + dir.string() + " to uid " + std::to_string(uid) + ": " +
                             std::strerror(errno));
  ::chmod(dir.c_str(), 0700);
}

/// Runs a program to its end; its stdout lines are appended to its stderr log afterwards.
int run_to_end(process::ChildSpec spec, std::chrono::milliseconds bound, std::string& output) {
  std::mutex mu;
  std::string out;
  int code = -1;
  {
    process::ChildProcess proc(spec, [&](std::string_view line, std::int64_t, bool eof) {
      if (eof) return;
      std::lock_guard lock(mu);
      out.append(line);
      out += '\n';
    });
    auto c = proc.wait_for(bound);
    code = c ? *c : proc.terminate(0ms);
  }  // joins the reader
  std::ofstream(spec.stderr_log, std::ios::app) << out;
  output = out;
  return code;
}

}  // namespace

EmbeddedPostgres::EmbeddedPostgres(process::EmbeddedOptions options) : options_(std::move(options)) {
  try {
    create();
  } catch (...) {
    stop();
    remove_own_dir();
    throw;
  }
}

void EmbeddedPostgres::create() {
  const auto t0 = Clock::now();
  bindir_ = find_bindir();
  options_.run_dir = fs::absolute(options_.run_dir);
  fs::create_directories(options_.run_dir);
  std::vector<gid_t> groups;
  if (::geteuid() == 0) {
    const passwd* pw = ::getpwnam(kSuperuser);
    if (!pw)
      throw ResourceUnavailable(
          "the embedded PostgreSQL must run as an unprivileged user (PostgreSQL refuses root), and the harness runs "
          "as root: it uses the 'postgres' system user, which does not exist (Debian's postgresql-common creates it: "
          "scripts/install-deps.sh postgres)");
    uid_ = pw->pw_uid;
    gid_ = pw->pw_gid;
    switch_user_ = true;
    groups = groups_of(pw->pw_name, gid_);
    if (!process::find_on_path("setpriv"))
      throw ResourceUnavailable("the embedded PostgreSQL needs setpriv (util-linux) to run as user postgres");
  } else {
    uid_ = ::geteuid();
    gid_ = ::getegid();
  }

  // Where the cluster lives: in the run directory when the server's user can reach it.
  const fs::path in_run_socket = options_.run_dir / "postgres-socket";
  if (traversable(options_.run_dir, uid_, gid_, groups) &&
      in_run_socket.string().size() + std::strlen("/.s.PGSQL.65535") <= kSunPathMax) {
    data_dir_ = options_.run_dir / "postgres-data";
    socket_dir_ = in_run_socket;
  } else {
    fs::path root = fs::temp_directory_path();
    if (!traversable(root, uid_, gid_, groups) || root.string().size() > 60) root = "/tmp";
    std::string tag = options_.run_id.substr(0, 24);
    for (char& c : tag)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
    std::string tmpl = (root / ("fencecheck-pg-" + tag + "-XXXXXX")).string();
    if (::mkdtemp(tmpl.data()) == nullptr)
      throw std::runtime_error("cannot create a directory for the embedded PostgreSQL (" + tmpl +
                               "): " + std::strerror(errno));
    own_dir_ = tmpl;
    make_dir(own_dir_, uid_, gid_, switch_user_);
    data_dir_ = own_dir_ / "data";
    socket_dir_ = own_dir_ / "socket";
    std::ofstream(options_.run_dir / kLocationFile) << own_dir_.string() << "\n";
    spdlog::info("embedded PostgreSQL: {} is not traversable by uid {}, so its cluster lives in {} (named in {}; "
                 "removed when the run ends, or by fencecheck cleanup)",
                 options_.run_dir.string(), uid_, own_dir_.string(), (options_.run_dir / kLocationFile).string());
  }
  make_dir(data_dir_, uid_, gid_, switch_user_);
  make_dir(socket_dir_, uid_, gid_, switch_user_);

  process::ChildSpec init;
  init.name = "postgres-initdb";
  init.exe = bindir_ / "initdb";
  init.prefix = as_user();
  init.stderr_log = log("postgres-initdb");
  init.args = {"-D", data_dir_.string(), "-U", kSuperuser, "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync",
               "--no-instructions"};
  std::string output;
  const int code = run_to_end(init, 120s, output);
  if (code != 0)
    throw ResourceUnavailable("initdb for the embedded PostgreSQL failed (exit " + std::to_string(code) + "); " +
                              init.stderr_log.string() + ":\n" + process::tail_text(process::read_text(init.stderr_log)));
  if (!own_dir_.empty())
    std::ofstream(init.stderr_log, std::ios::app)
        << "fencecheck: the run directory is not traversable by uid " << uid_ << "; the cluster is in "
        << own_dir_.string() << " (see " << kLocationFile << ")\n";
  if (!loopback(options_.host)) {
    // A network lab: workers connect from their own namespaces' addresses, on the server's subnet.
    std::ofstream(data_dir_ / "pg_hba.conf", std::ios::app)
        << "# fencecheck: the network lab's hosts (the server listens only on " << options_.host << ")\n"
        << "host all all samenet trust\n";
  }
  init_time_ = since(t0);

  const auto t1 = Clock::now();
  start();
  std::string error;
  Session admin(dsn("postgres"), "the embedded PostgreSQL");
  if (!admin.ensure_connected(10s, error)) throw std::runtime_error(error);
  auto res = admin.exec(std::string("CREATE DATABASE ") + kDatabase, 30s, error);
  if (!res || !result_ok(res.get()))
    throw std::runtime_error("creating database fencecheck on the embedded PostgreSQL: " +
                             (res ? result_error(res.get()) : error));
  start_time_ = since(t1);
  spdlog::info("embedded PostgreSQL ({}) ready on {}:{} in {} ms (initdb {} ms, start and createdb {} ms), data {}",
               bindir_.string(), options_.host, port_, (init_time_ + start_time_).count(), init_time_.count(),
               start_time_.count(), data_dir_.string());
}

EmbeddedPostgres::~EmbeddedPostgres() {
  stop();
  remove_own_dir();
}

std::vector<std::string> EmbeddedPostgres::as_user() const {
  if (!switch_user_) return {};
  return {"setpriv",        "--reuid=" + std::to_string(uid_), "--regid=" + std::to_string(gid_),
          "--init-groups", "--pdeathsig",                     "keep",
          "--"};
}

fs::path EmbeddedPostgres::log(const std::string& name) const {
  if (options_.log_path) return options_.log_path(name);
  fs::create_directories(options_.run_dir / "logs");
  return options_.run_dir / "logs" / (name + ".log");
}

std::string EmbeddedPostgres::dsn(const std::string& dbname) const {
  return "host=" + options_.host + " port=" + std::to_string(port_) + " dbname=" + dbname + " user=" + kSuperuser +
         " sslmode=disable gssencmode=disable";
}

bool EmbeddedPostgres::running() const { return proc_ && proc_->running(); }
pid_t EmbeddedPostgres::pid() const { return proc_ ? proc_->pid() : 0; }

void EmbeddedPostgres::start() {
  if (running()) return;
  proc_.reset();
  const int attempts = options_.port > 0 || port_ > 0 ? 1 : 5;
  std::string last;
  for (int attempt = 1; attempt <= attempts; ++attempt) {
    const int port = options_.port > 0 ? options_.port : port_ > 0 ? port_ : process::free_tcp_port(options_.host);
    ++starts_;
    process::ChildSpec spec;
    spec.name = "postgres";
    spec.exe = bindir_ / "postgres";
    spec.prefix = as_user();
    spec.stderr_log = log(starts_ == 1 ? "postgres" : "postgres-" + std::to_string(starts_));
    spec.args = {"-D", data_dir_.string(), "-p", std::to_string(port), "-k", socket_dir_.string(),
                 "-c", "listen_addresses=" + options_.host, "-c", "max_connections=300"};
    proc_ = std::make_unique<process::ChildProcess>(spec, [](std::string_view, std::int64_t, bool) {});
    const std::string port_s = std::to_string(port);
    const char* keywords[] = {"host", "port", "dbname", "user", "connect_timeout", "sslmode", "gssencmode", nullptr};
    const char* values[] = {options_.host.c_str(), port_s.c_str(), "postgres", kSuperuser, "2", "disable", "disable",
                            nullptr};
    const auto deadline = Clock::now() + options_.start_timeout;
    while (Clock::now() < deadline && proc_->running()) {
      if (PQpingParams(keywords, values, 0) == PQPING_OK) {
        port_ = port;
        return;
      }
      std::this_thread::sleep_for(20ms);
    }
    const bool exited = !proc_->running();
    if (!exited) stop();
    proc_.reset();
    const std::string text = process::read_text(spec.stderr_log);
    last = process::start_failure(
        "the embedded PostgreSQL (" + spec.exe.string() + " on " + options_.host + ":" + port_s + ")", exited,
        {"accepted connections", "accept connections"}, options_.start_timeout, spec.stderr_log, text);
    if (!exited || !process::port_was_taken(text)) break;
    spdlog::warn("embedded PostgreSQL: port {} was taken; retrying with another (attempt {})", port, attempt);
  }
  throw ResourceUnavailable(last);
}

void EmbeddedPostgres::stop() noexcept {
  if (!proc_) return;
  try {
    if (proc_->running()) {
      const pid_t p = proc_->pid();
      ::kill(p, SIGCONT);
      ::kill(p, SIGINT);  // fast shutdown: roll back open transactions, checkpoint, exit (19.5)
      if (!proc_->wait_for(options_.stop_grace)) {
        spdlog::warn("embedded PostgreSQL pid {} still running {} ms after SIGINT; SIGQUIT", p,
                     options_.stop_grace.count());
        ::kill(p, SIGQUIT);  // immediate shutdown
        if (!proc_->wait_for(2s)) proc_->terminate(0ms);
      }
    }
    proc_.reset();
  } catch (const std::exception& err) {
    spdlog::warn("embedded PostgreSQL: stopping it failed: {} (`fencecheck cleanup` stops an orphaned one)", err.what());
  } catch (...) {  // stop() must not throw; not a std::exception, so nothing more to say
    spdlog::warn("embedded PostgreSQL: stopping it failed (unknown exception)");
  }
}

void EmbeddedPostgres::remove_own_dir() noexcept {
  if (own_dir_.empty()) return;
  std::error_code ec;
  fs::remove_all(own_dir_, ec);
  fs::remove(options_.run_dir / kLocationFile, ec);
  spdlog::debug("embedded PostgreSQL: removed {}", own_dir_.string());
  own_dir_.clear();
}

}  // namespace fencecheck::postgres::detail

namespace fencecheck::postgres {
namespace {

namespace fs = std::filesystem;
using detail::kLocationFile;
using namespace std::chrono_literals;

/// What a data directory's postmaster.pid names (PostgreSQL 15 docs, 19.3: its first line is the
/// postmaster's PID): nothing, a process that is not running (a stale lock file), a process that is
/// not this cluster's postmaster, or the postmaster itself (a postgres executable whose working
/// directory is the data directory: the postmaster runs in it).
struct PidFile {
  enum State { kNone, kStale, kForeign, kPostmaster } state = kNone;
  long pid = 0;
  fs::path exe;
};

PidFile postmaster_of(const fs::path& data_dir) {
  PidFile out;
  std::ifstream in(data_dir / "postmaster.pid");
  std::string first;
  if (!in || !std::getline(in, first)) return out;
  char* end = nullptr;
  out.pid = std::strtol(first.c_str(), &end, 10);
  if (end == first.c_str() || out.pid <= 1) return out;
  const fs::path proc = "/proc/" + std::to_string(out.pid);
  std::error_code ec;
  out.exe = fs::read_symlink(proc / "exe", ec);
  if (ec) {
    out.state = PidFile::kStale;
    return out;
  }
  const bool is_postgres = out.exe.filename().string().rfind("postgres", 0) == 0;
  const bool in_dir = fs::equivalent(fs::read_symlink(proc / "cwd", ec), data_dir, ec) && !ec;
  out.state = is_postgres && in_dir ? PidFile::kPostmaster : PidFile::kForeign;
  return out;
}

/// The data directory of a cluster this kind made outside the run directory, from the run's
/// .location file (only a directory named <tmp>/fencecheck-pg-...); empty when there is none.
fs::path own_cluster_dir(const fs::path& run_dir) {
  std::ifstream in(run_dir / kLocationFile);
  std::string own;
  if (!in || !std::getline(in, own) || own.empty()) return {};
  const fs::path dir(own);
  return dir.is_absolute() && dir.filename().string().rfind("fencecheck-pg-", 0) == 0 ? dir : fs::path();
}

/// Stops the postmaster of `data_dir` when its postmaster.pid names a live postgres process
/// running in that directory. True when no postmaster of that directory is left running (none
/// ran, or it is gone now); false when it survived SIGKILL.
bool stop_cluster(const fs::path& data_dir) {
  const PidFile f = postmaster_of(data_dir);
  const long pid = f.pid;
  if (f.state == PidFile::kNone) return true;
  if (f.state == PidFile::kStale) {
    spdlog::info("postgres cleanup: {} names pid {}, which is not running (a stale lock file)",
                 (data_dir / "postmaster.pid").string(), pid);
    return true;
  }
  if (f.state == PidFile::kForeign) {
    spdlog::info("postgres cleanup: {} names pid {} ({}), which is not this cluster's postmaster; left alone",
                 (data_dir / "postmaster.pid").string(), pid, f.exe.string());
    return true;
  }
  const auto p = static_cast<pid_t>(pid);
  spdlog::info("postgres cleanup: stopping the orphaned embedded PostgreSQL pid {} (data {})", pid, data_dir.string());
  ::kill(p, SIGCONT);
  ::kill(p, SIGINT);
  if (process::wait_process_gone(p, 10s)) return true;
  ::kill(p, SIGQUIT);
  if (process::wait_process_gone(p, 2s)) return true;
  ::kill(p, SIGKILL);
  if (process::wait_process_gone(p, 2s)) return true;
  spdlog::error("postgres cleanup: pid {} survived SIGKILL for 2 s; not stopped", pid);
  return false;
}

}  // namespace

std::optional<int> running_postmaster(const fs::path& run_dir) {
  try {
    for (const fs::path& data : {run_dir / "postgres-data", own_cluster_dir(run_dir) / "data"}) {
      if (data == "data") continue;  // no cluster of its own
      if (const PidFile f = postmaster_of(data); f.state == PidFile::kPostmaster) return static_cast<int>(f.pid);
    }
  } catch (const std::exception& err) {  // unreadable: treated as none running, and said
    spdlog::warn("postgres cleanup: cannot read the postmaster.pid under {}: {}", run_dir.string(), err.what());
  }
  return std::nullopt;
}

bool stop_orphaned_postgres(const fs::path& run_dir) {
  try {
    bool stopped = stop_cluster(run_dir / "postgres-data");
    const fs::path location = run_dir / kLocationFile;
    if (fs::exists(location)) {
      // Only a directory this kind made: <tmp>/fencecheck-pg-...
      if (const fs::path dir = own_cluster_dir(run_dir); !dir.empty()) {
        if (!stop_cluster(dir / "data")) return false;  // its data and .location stay: the next cleanup retries
        std::error_code ec;
        fs::remove_all(dir, ec);
        spdlog::info("postgres cleanup: removed {}{}", dir.string(), ec ? " (failed: " + ec.message() + ")" : "");
      }
      std::error_code ec;
      fs::remove(location, ec);
    }
    return stopped;
  } catch (const std::exception& e) {
    spdlog::error("postgres cleanup of {}: {}", run_dir.string(), e.what());
  } catch (...) {  // not a std::exception: name the run at least
    spdlog::error("postgres cleanup of {}: failed (unknown exception)", run_dir.string());
  }
  return false;
}

}  // namespace fencecheck::postgres
