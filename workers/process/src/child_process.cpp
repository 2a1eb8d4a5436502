// child_process.h: the one way fencecheck starts a program.
#include "fencecheck/process/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <boost/process.hpp>
#include <boost/process/extend.hpp>
#include <spdlog/spdlog.h>

#include "fencecheck/proto/event.h"

namespace bp = boost::process;

namespace fencecheck::process {
namespace {

/// Runs in the child between fork and exec: only async-signal-safe calls (fork(2)).
struct ChildSetup : bp::extend::handler {
  pid_t parent = 0;       ///< the harness: the child exits 127 when it is no longer its parent
  int events_write = -1;  ///< the event pipe's write end (O_CLOEXEC), or -1
  int events_fd = 0;      ///< the descriptor number the child sees it as
  int output_fd = -1;     ///< ChildSpec::output_log (O_APPEND, O_CLOEXEC), or -1
  const char* cwd = nullptr;
  bool own_group = false;
  bool chown_io = false;  ///< ChildSpec::owner set: hand stdout, stderr and the channel to it
  uid_t owner_uid = 0;
  gid_t owner_gid = 0;
  template <typename Executor>
  void on_exec_setup(Executor&) const {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    // The parent died between fork and prctl: no signal will come, so end here.
    if (::getppid() != parent) ::_exit(127);
    if (output_fd >= 0) {  // after Boost's own redirections (this handler comes last): it wins
      ::dup2(output_fd, STDOUT_FILENO);
      ::dup2(output_fd, STDERR_FILENO);
    }
    // Without own_group the child stays in the harness's process group, so that Ctrl-C stops
    // everything and the harness heals first. A command worker's group is its own, so that
    // terminate() reaches every process it forked (the harness still ends it on Ctrl-C).
    if (own_group) ::setpgid(0, 0);
    if (events_write >= 0) {
      if (events_write == events_fd) {
        const int flags = ::fcntl(events_fd, F_GETFD);
        ::fcntl(events_fd, F_SETFD, flags & ~FD_CLOEXEC);
      } else {
        ::dup2(events_write, events_fd);  // the duplicate does not inherit FD_CLOEXEC
      }
    }
    if (chown_io) {
      // Errors ignored: /dev/null (no log) is not ours to chown, and what is left root's only
      // matters to a program that reopens it by name.
      (void)::fchown(STDOUT_FILENO, owner_uid, owner_gid);
      (void)::fchown(STDERR_FILENO, owner_uid, owner_gid);
      if (events_write >= 0) (void)::fchown(events_fd, owner_uid, owner_gid);
    }
    if (cwd && ::chdir(cwd) != 0) ::_exit(126);
  }
};

/// The longest line read_lines() keeps: a longer one is handed on cut to this many bytes (the
/// worker protocol's lines are small; a worker that never sends a newline must not exhaust the
/// harness's memory), and the rest of it up to its newline is dropped.
constexpr std::size_t kMaxLine = 1 << 20;

/// Splits what `fd` delivers into lines and hands each to on_line (without its newline); a last
/// line without a newline counts. Returns at end of file, on a read error, or once `stop` is set
/// (polled every 100 ms: a process that escaped the worker's process group can hold the pipe's
/// write end open for ever, and the harness must still be able to finish).
void read_lines(int fd, const LineHandler& on_line, const std::atomic<bool>& stop) {
  std::string buf;
  bool skipping = false;  // dropping the rest of an over-long line
  char chunk[65536];
  while (!stop.load()) {
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, 100);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) break;
    if (ready == 0) continue;
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    buf.append(chunk, static_cast<std::size_t>(n));
    std::size_t start = 0;
    for (std::size_t nl; (nl = buf.find('\n', start)) != std::string::npos; start = nl + 1) {
      if (!skipping) on_line(std::string_view(buf).substr(start, nl - start), monotonic_ns(), false);
      skipping = false;
    }
    buf.erase(0, start);
    if (buf.size() > kMaxLine) {
      if (!skipping) on_line(std::string_view(buf).substr(0, kMaxLine), monotonic_ns(), false);
      skipping = true;
      buf.clear();
    }
  }
  if (!buf.empty() && !skipping) on_line(buf, monotonic_ns(), false);
}

int exit_code_of(const bp::child& c) {
  int native = c.native_exit_code();
  if (WIFSIGNALED(native)) return 128 + WTERMSIG(native);
  return c.exit_code();
}

}  // namespace

struct ChildProcess::Impl {
  ChildSpec spec;
  bp::ipstream out;
  int events_read = -1;  ///< the event pipe's read end (events_fd set), owned by the reader thread
  std::atomic<bool> stop_reading{false};  ///< set by the destructor: the reader gives up on the pipe
  bp::child child;
  std::thread reader;
  std::optional<int> code;
};

ChildProcess::ChildProcess(ChildSpec spec, LineHandler on_line) : impl_(std::make_unique<Impl>()) {
  impl_->spec = std::move(spec);
  const auto& s = impl_->spec;
  if (s.prefix.empty() && !std::filesystem::exists(s.exe))
    throw std::runtime_error("cannot start " + s.name + ": " + s.exe.string() + " does not exist");
  std::filesystem::path program = s.exe;
  std::vector<std::string> args = s.args;
  if (!s.prefix.empty()) {
    auto wrapper = find_on_path(s.prefix.front());
    if (!wrapper) throw std::runtime_error("cannot start " + s.name + ": '" + s.prefix.front() + "' not on PATH");
    program = *wrapper;
    args.assign(s.prefix.begin() + 1, s.prefix.end());
    args.push_back(s.exe.string());
    args.insert(args.end(), s.args.begin(), s.args.end());
  }
  bp::environment env = boost::this_process::environment();
  if (!s.env_drop_prefixes.empty()) {
    std::vector<std::string> dropped;
    for (const auto& entry : env)
      for (const auto& prefix : s.env_drop_prefixes)
        if (entry.get_name().rfind(prefix, 0) == 0) dropped.push_back(entry.get_name());
    for (const auto& name : dropped) env.erase(name);
  }
  for (const auto& [name, value] : s.env) env[name] = value;
  ChildSetup setup;
  setup.parent = ::getpid();
  setup.own_group = s.own_process_group;
  if (s.owner) {
    setup.chown_io = true;
    setup.owner_uid = s.owner->first;
    setup.owner_gid = s.owner->second;
  }
  const std::string cwd = s.cwd.string();
  if (!cwd.empty()) setup.cwd = cwd.c_str();
  int pipe_fds[2] = {-1, -1};
  const bool to_log = !s.output_log.empty();
  if (to_log) {
    setup.output_fd = ::open(s.output_log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (setup.output_fd < 0)
      throw std::runtime_error("cannot start " + s.name + ": cannot open its log " + s.output_log.string() + ": " +
                               std::strerror(errno));
  } else if (s.events_fd > 2) {
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0)
      throw std::runtime_error("cannot start " + s.name + ": pipe2: " + std::strerror(errno));
    setup.events_write = pipe_fds[1];
    setup.events_fd = s.events_fd;
  }
  try {
    if (to_log)
      impl_->child = bp::child(program.string(), bp::args(args), bp::std_in < bp::null, env, setup);
    else if (s.events_fd > 2)
      impl_->child = bp::child(program.string(), bp::args(args), bp::std_out > s.stdout_log.string(),
                               bp::std_err > s.stderr_log.string(), bp::std_in < bp::null, env, setup);
    else
      impl_->child = bp::child(program.string(), bp::args(args), bp::std_out > impl_->out,
                               bp::std_err > s.stderr_log.string(), bp::std_in < bp::null, env, setup);
  } catch (const std::exception& err) {
    if (pipe_fds[0] >= 0) ::close(pipe_fds[0]), ::close(pipe_fds[1]);
    if (setup.output_fd >= 0) ::close(setup.output_fd);
    throw std::runtime_error("cannot start " + s.name + " (" + program.string() + "): " + err.what());
  }
  if (setup.output_fd >= 0) ::close(setup.output_fd);  // the child has its own copies
  if (to_log) return;  // no lines to read
  if (pipe_fds[1] >= 0) ::close(pipe_fds[1]);  // the child's copy is the only writer: EOF when its tree is done
  impl_->events_read = pipe_fds[0];
  impl_->reader = std::thread([impl = impl_.get(), on_line = std::move(on_line)] {
    if (impl->events_read >= 0) {
      read_lines(impl->events_read, on_line, impl->stop_reading);
      ::close(impl->events_read);
    } else {
      std::string line;
      while (std::getline(impl->out, line)) on_line(line, monotonic_ns(), false);
    }
    on_line({}, monotonic_ns(), true);
  });
}

ChildProcess::~ChildProcess() {
  try {
    terminate();
  } catch (const std::exception& err) {
    spdlog::warn("{}: could not end it: {}", impl_->spec.name, err.what());
  } catch (...) {  // a destructor, perhaps during unwinding: nothing more can be done or said
  }
  // The child is gone; whatever still holds the event pipe (a process that left its group) is not
  // the harness's to wait for.
  impl_->stop_reading = true;
  if (impl_->reader.joinable()) impl_->reader.join();
}

pid_t ChildProcess::pid() const { return impl_->child.id(); }
const std::string& ChildProcess::name() const { return impl_->spec.name; }

bool ChildProcess::running() {
  if (impl_->code) return false;
  std::error_code ec;
  if (impl_->child.running(ec)) return true;
  if (!impl_->code && impl_->child.valid()) impl_->code = exit_code_of(impl_->child);
  return false;
}

std::optional<int> ChildProcess::wait_for(std::chrono::milliseconds timeout) {
  // Boost.Process v1's child::wait_for (1.81) was seen to sleep out its whole timeout for a child
  // that had already exited; poll waitpid(WNOHANG) through running() instead.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (running()) {
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return impl_->code;
}

int ChildProcess::terminate(std::chrono::milliseconds grace) {
  if (impl_->code) return *impl_->code;
  if (!running()) return impl_->code.value_or(-1);
  const pid_t p = pid();
  // The group is the child's own only when it was made so (own_process_group): never the harness's.
  const pid_t target = impl_->spec.own_process_group && ::getpgid(p) == p ? -p : p;
  ::kill(target, SIGCONT);
  ::kill(target, SIGTERM);
  if (auto c = wait_for(grace)) {
    if (target < 0) ::kill(target, SIGKILL);  // what the group's members left behind
    return *c;
  }
  ::kill(target, SIGKILL);
  std::error_code ec;
  impl_->child.wait(ec);
  impl_->code = exit_code_of(impl_->child);
  return *impl_->code;
}

std::optional<int> ChildProcess::exit_code() const { return impl_->code; }

std::filesystem::path self_bin_dir() {
  if (const char* dir = std::getenv("FENCECHECK_BIN_DIR"); dir && *dir) return dir;
  return std::filesystem::read_symlink("/proc/self/exe").parent_path();
}

std::optional<std::filesystem::path> find_on_path(std::string_view program) {
  std::error_code ec;
  return find_program(std::string(program), std::filesystem::current_path(ec));
}

std::optional<std::filesystem::path> find_program(const std::string& program, const std::filesystem::path& cwd) {
  namespace fs = std::filesystem;
  auto runnable = [](const fs::path& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
  };
  if (program.find('/') != std::string::npos) {
    fs::path p(program);
    if (p.is_relative()) p = (cwd / p).lexically_normal();
    return runnable(p) ? std::optional<fs::path>(p) : std::nullopt;
  }
  const char* path = std::getenv("PATH");
  const std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";
  for (std::size_t start = 0; start <= dirs.size();) {
    std::size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const fs::path candidate = fs::path(end == start ? "." : dirs.substr(start, end - start)) / program;
    if (runnable(candidate)) return fs::absolute(candidate);
    start = end + 1;
  }
  return std::nullopt;
}

std::string program_not_found(const std::string& program, const std::filesystem::path& cwd) {
  if (program.find('/') == std::string::npos) return "is not on PATH";
  if (program.front() == '/') return "does not exist or is not executable";
  return "(relative to " + cwd.string() + ") does not exist or is not executable";
}

}  // namespace fencecheck::process
