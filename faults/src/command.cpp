#include "fencecheck/faults/command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace fencecheck::faults {
namespace {

std::string describe(const std::vector<std::string>& argv, int status, const std::string& err, const std::string& cause) {
  std::string s = "command failed: " + format_command(argv);
  if (!cause.empty()) s += ": " + cause;
  else if (status >= 0) s += ": exit status " + std::to_string(status);
  if (!err.empty()) s += ": " + err;
  return s;
}

std::string chomp(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

bool plain_word(const std::string& w) {
  if (w.empty()) return false;
  for (char c : w) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              std::strchr("_./:%=@,+-", c) != nullptr;
    if (!ok) return false;
  }
  return true;
}

struct Fd {
  int fd = -1;
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

}  // namespace

CommandError::CommandError(std::vector<std::string> argv, int exit_status, std::string stderr_text, const std::string& cause)
    : std::runtime_error(describe(argv, exit_status, chomp(stderr_text), cause)),
      argv_(std::move(argv)),
      exit_status_(exit_status),
      stderr_(chomp(std::move(stderr_text))) {}

std::string format_command(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& w : argv) {
    if (!out.empty()) out += ' ';
    if (plain_word(w)) {
      out += w;
      continue;
    }
    out += '\'';
    for (char c : w) {
      if (c == '\'') out += "'\\''";
      else out += c;
    }
    out += '\'';
  }
  return out;
}

std::string SystemCommandRunner::run(const std::vector<std::string>& argv) {
  if (argv.empty()) throw std::invalid_argument("SystemCommandRunner::run: empty argv");
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) throw CommandError(argv, -1, "", std::string("pipe: ") + std::strerror(errno));
  Fd out_r{out_pipe[0]}, out_w{out_pipe[1]};
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) throw CommandError(argv, -1, "", std::string("pipe: ") + std::strerror(errno));
  Fd err_r{err_pipe[0]}, err_w{err_pipe[1]};

  std::vector<std::string> env_store;
  for (char** e = environ; e && *e; ++e)
    if (std::strncmp(*e, "LC_ALL=", 7) != 0) env_store.emplace_back(*e);
  env_store.emplace_back("LC_ALL=C");
  std::vector<char*> envp;
  for (auto& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_store(argv);
  std::vector<char*> args;
  for (auto& a : argv_store) args.push_back(a.data());
  args.push_back(nullptr);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out_w.fd, 1);
  posix_spawn_file_actions_adddup2(&fa, err_w.fd, 2);
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw CommandError(argv, -1, "", std::string("cannot start it: ") + std::strerror(rc));
  out_w.reset();
  err_w.reset();

  std::string out, err;
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  bool timed_out = false;
  char buf[4096];
  while (out_r.fd >= 0 || err_r.fd >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd fds[2] = {{out_r.fd, POLLIN, 0}, {err_r.fd, POLLIN, 0}};
    int n = ::poll(fds, 2, static_cast<int>(left.count()));
    if (n < 0) {
      if (errno == EINTR) continue;
      timed_out = true;  // cannot wait any more: treat as a failure to complete
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        (i == 0 ? out : err).append(buf, static_cast<std::size_t>(got));
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        (i == 0 ? out_r : err_r).reset();
      }
    }
  }
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out)
    throw CommandError(argv, -1, err, "did not finish within " + std::to_string(timeout_.count()) + " ms; killed");
  if (WIFSIGNALED(status))
    throw CommandError(argv, -1, err, std::string("killed by signal ") + std::to_string(WTERMSIG(status)));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    // posix_spawnp reports a missing program as exit status 127 from the child.
    throw CommandError(argv, WIFEXITED(status) ? WEXITSTATUS(status) : -1, err);
  }
  return out;
}

std::string RecordingCommandRunner::run(const std::vector<std::string>& argv) {
  if (argv.empty()) throw std::invalid_argument("RecordingCommandRunner::run: empty argv");
  {
    std::lock_guard lock(mu_);
    calls_.push_back(argv);
  }
  return responder_ ? responder_(argv) : std::string();
}

std::vector<std::vector<std::string>> RecordingCommandRunner::calls() const {
  std::lock_guard lock(mu_);
  return calls_;
}

void RecordingCommandRunner::clear() {
  std::lock_guard lock(mu_);
  calls_.clear();
}

}  // namespace fencecheck::faults
