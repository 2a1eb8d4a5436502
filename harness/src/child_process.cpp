#include "fencecheck/harness/child_process.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <boost/process.hpp>
#include <boost/process/extend.hpp>

#include "fencecheck/proto/event.h"

namespace bp = boost::process;

namespace fencecheck::harness {
namespace {

struct DieWithParent : bp::extend::handler {
  template <typename Executor>
  void on_exec_setup(Executor&) const {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    // Our own process group would keep a terminal's Ctrl-C from reaching children directly; we
    // stay in the harness's group so that Ctrl-C stops everything, and the harness heals first.
  }
};

int exit_code_of(const bp::child& c) {
  int native = c.native_exit_code();
  if (WIFSIGNALED(native)) return 128 + WTERMSIG(native);
  return c.exit_code();
}

}  // namespace

struct ChildProcess::Impl {
  ChildSpec spec;
  bp::ipstream out;
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
  for (const auto& [name, value] : s.env) env[name] = value;
  try {
    impl_->child = bp::child(program.string(), bp::args(args), bp::std_out > impl_->out,
                             bp::std_err > s.stderr_log.string(), bp::std_in < bp::null, env, DieWithParent{});
  } catch (const std::exception& err) {
    throw std::runtime_error("cannot start " + s.name + " (" + program.string() + "): " + err.what());
  }
  impl_->reader = std::thread([impl = impl_.get(), on_line = std::move(on_line)] {
    std::string line;
    while (std::getline(impl->out, line)) on_line(line, monotonic_ns(), false);
    on_line({}, monotonic_ns(), true);
  });
}

ChildProcess::~ChildProcess() {
  try {
    terminate();
  } catch (...) {
  }
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
  ::kill(p, SIGCONT);
  ::kill(p, SIGTERM);
  if (auto c = wait_for(grace)) return *c;
  ::kill(p, SIGKILL);
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
  if (program.find('/') != std::string_view::npos) {
    if (::access(std::string(program).c_str(), X_OK) == 0) return std::filesystem::path(program);
    return std::nullopt;
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    auto end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::filesystem::path candidate = std::filesystem::path(dirs.substr(start, end - start)) / program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return std::nullopt;
}

}  // namespace fencecheck::harness
