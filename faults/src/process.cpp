#include "fencecheck/faults/process.h"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <fstream>
#include <sstream>
#include <string_view>

namespace fencecheck::faults {

namespace {

std::optional<std::string> slurp(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Fields after the command name, which is in parentheses and may itself hold spaces or ')'.
std::optional<std::string_view> after_comm(const std::string& stat) {
  auto close = stat.rfind(')');
  if (close == std::string::npos || close + 2 > stat.size()) return std::nullopt;
  return std::string_view(stat).substr(close + 2);
}

template <typename Int>
bool parse_field(std::string_view& s, Int& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc();
}

// Drops n space-separated fields from the front of s.
bool skip_fields(std::string_view& s, int n) {
  for (int i = 0; i < n; ++i) {
    auto sp = s.find(' ');
    if (sp == std::string_view::npos) return false;
    s.remove_prefix(sp + 1);
  }
  return true;
}

}  // namespace

std::optional<std::string> read_proc_stat(pid_t pid) { return slurp("/proc/" + std::to_string(pid) + "/stat"); }

std::optional<ProcStat> read_stat(pid_t pid, const std::filesystem::path& proc, pid_t tid) {
  if (pid <= 0) return std::nullopt;
  std::filesystem::path file = proc / std::to_string(pid);
  if (tid > 0) file = file / "task" / std::to_string(tid);
  auto stat = slurp(file / "stat");
  if (!stat) return std::nullopt;
  auto rest = after_comm(*stat);
  if (!rest || rest->size() < 2) return std::nullopt;
  // rest starts at field 3 (state); field 4 is ppid, field 22 starttime.
  ProcStat st;
  st.pid = pid;
  std::string_view s = *rest;
  st.state = s.front();
  if (!skip_fields(s, 1) || !parse_field(s, st.ppid)) return std::nullopt;
  if (!skip_fields(s, 22 - 4) || !parse_field(s, st.start_ticks)) return std::nullopt;
  return st;
}

std::optional<char> process_state(pid_t pid) {
  auto st = read_stat(pid);
  if (!st) return std::nullopt;
  return st->state;
}

std::optional<ProcessRef> ProcessRef::of(pid_t pid, const std::filesystem::path& proc) {
  auto st = read_stat(pid, proc);
  if (!st) return std::nullopt;
  return st->ref();
}

bool ProcessRef::same_process_alive(const std::filesystem::path& proc) const {
  auto now = of(pid, proc);
  return now && now->start_ticks == start_ticks;
}

int open_pidfd(const ProcessRef& ref) noexcept {
  if (ref.pid <= 0) return -ESRCH;
  const long fd = ::syscall(SYS_pidfd_open, ref.pid, 0);  // pidfd_open(2): O_CLOEXEC is implied
  if (fd < 0) return -errno;
  bool same = false;
  try {
    same = ref.same_process_alive();  // read after the pidfd exists: it names this process or none
  } catch (...) {  // reading /proc threw (std::bad_alloc): not known to be that process, so not signalled
  }
  if (!same) {
    ::close(static_cast<int>(fd));
    return -ESRCH;
  }
  return static_cast<int>(fd);
}

int signal_process(const ProcessRef& ref, int sig) noexcept {
  const int fd = open_pidfd(ref);
  if (fd >= 0) {
    int err = ::syscall(SYS_pidfd_send_signal, fd, sig, nullptr, 0) == 0 ? 0 : errno;
    ::close(fd);
    return err;
  }
  if (fd == -ESRCH) return ESRCH;
  // No pidfds here (ENOSYS: Linux < 5.3) or none to spare (EMFILE): check, then kill.
  bool same = false;
  try {
    same = ref.same_process_alive();
  } catch (...) {  // reading /proc threw (std::bad_alloc): not known to be that process, so not signalled
  }
  if (!same) return ESRCH;
  return ::kill(ref.pid, sig) == 0 ? 0 : errno;
}

}  // namespace fencecheck::faults
