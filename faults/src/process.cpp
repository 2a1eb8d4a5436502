#include "fencecheck/faults/process.h"

#include <charconv>
#include <fstream>
#include <sstream>
#include <string_view>

namespace fencecheck::faults {

std::optional<std::string> read_proc_stat(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

namespace {
// Fields after the command name, which is in parentheses and may itself hold spaces or ')'.
std::optional<std::string_view> after_comm(const std::string& stat) {
  auto close = stat.rfind(')');
  if (close == std::string::npos || close + 2 > stat.size()) return std::nullopt;
  return std::string_view(stat).substr(close + 2);
}
}  // namespace

std::optional<char> process_state(pid_t pid) {
  auto stat = read_proc_stat(pid);
  if (!stat) return std::nullopt;
  auto rest = after_comm(*stat);
  if (!rest || rest->empty()) return std::nullopt;
  return rest->front();
}

std::optional<ProcessRef> ProcessRef::of(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  auto stat = read_proc_stat(pid);
  if (!stat) return std::nullopt;
  auto rest = after_comm(*stat);
  if (!rest) return std::nullopt;
  // rest starts at field 3 (state); starttime is field 22, i.e. the 20th field of rest.
  std::string_view s = *rest;
  for (int field = 3; field < 22; ++field) {
    auto sp = s.find(' ');
    if (sp == std::string_view::npos) return std::nullopt;
    s.remove_prefix(sp + 1);
  }
  std::uint64_t ticks = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), ticks);
  if (ec != std::errc()) return std::nullopt;
  return ProcessRef{pid, ticks};
}

bool ProcessRef::same_process_alive() const {
  auto now = of(pid);
  return now && now->start_ticks == start_ticks;
}

}  // namespace fencecheck::faults
