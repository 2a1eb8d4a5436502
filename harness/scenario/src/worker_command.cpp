#include "fencecheck/harness/worker_command.h"

#include <algorithm>
#include <cctype>
#include <string_view>

namespace fencecheck {
namespace {

enum class Family { kNone, kPython, kNode, kShell, kJava, kEnv };

Family family_of(std::string_view program) {
  const auto slash = program.rfind('/');
  const std::string_view name = slash == std::string_view::npos ? program : program.substr(slash + 1);
  const auto digits_and_dots = [](std::string_view s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || c == '.'; });
  };
  if (name.rfind("python", 0) == 0 && digits_and_dots(name.substr(6))) return Family::kPython;
  if (name == "pypy" || name == "pypy3") return Family::kPython;
  if (name == "node" || name == "nodejs") return Family::kNode;
  if (name == "bash" || name == "sh" || name == "dash" || name == "zsh" || name == "ksh") return Family::kShell;
  if (name == "java") return Family::kJava;
  if (name == "env") return Family::kEnv;
  return Family::kNone;
}

/// python(1): a cluster of single-letter options ("-uB", "-Wignore"); -c / -m end the options
/// and run no file; -W / -X take the rest of the cluster or the next argument.
std::optional<std::size_t> python_script(const std::vector<std::string>& argv, std::size_t i) {
  for (; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "--") return i + 1 < argv.size() ? std::optional(i + 1) : std::nullopt;
    if (a == "-") return std::nullopt;  // the program comes from stdin
    if (a.rfind("--", 0) == 0) continue;  // --version, --help: no argument
    if (a.size() < 2 || a[0] != '-') return i;
    for (std::size_t k = 1; k < a.size(); ++k) {
      if (a[k] == 'c' || a[k] == 'm') return std::nullopt;
      if (a[k] == 'W' || a[k] == 'X') {
        if (k + 1 == a.size()) ++i;  // the value is the next argument
        break;
      }
    }
  }
  return std::nullopt;
}

/// node(1): -e/--eval, -p/--print run no file; -r/--require, --import, --loader take a value
/// (the next argument unless attached with '=').
std::optional<std::size_t> node_script(const std::vector<std::string>& argv, std::size_t i) {
  for (; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "--") return i + 1 < argv.size() ? std::optional(i + 1) : std::nullopt;
    if (a == "-") return std::nullopt;
    if (a.empty() || a[0] != '-') return i;
    const std::string name = a.substr(0, a.find('='));
    if (name == "-e" || name == "--eval" || name == "-p" || name == "--print" || name == "-pe") return std::nullopt;
    const bool takes_value = name == "-r" || name == "--require" || name == "--import" || name == "--loader" ||
                             name == "--experimental-loader";
    if (takes_value && a.find('=') == std::string::npos) ++i;
  }
  return std::nullopt;
}

/// bash(1): -c and -s run no file; -o / +o / -O / +O take the next argument.
std::optional<std::size_t> shell_script(const std::vector<std::string>& argv, std::size_t i) {
  for (; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "--" || a == "-") return i + 1 < argv.size() ? std::optional(i + 1) : std::nullopt;
    if (a.size() < 2 || (a[0] != '-' && a[0] != '+')) return i;
    if (a.rfind("--", 0) == 0) continue;  // --norc, --login
    for (std::size_t k = 1; k < a.size(); ++k) {
      if (a[0] == '-' && (a[k] == 'c' || a[k] == 's')) return std::nullopt;
      if (a[k] == 'o' || a[k] == 'O') ++i;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::size_t> script_argument(const std::vector<std::string>& argv) {
  std::size_t start = 0;
  Family f = argv.empty() ? Family::kNone : family_of(argv[0]);
  if (f == Family::kEnv) {  // env [-i] [NAME=value ...] program args...
    start = 1;
    while (start < argv.size() && (argv[start].find('=') != std::string::npos || argv[start] == "-i" || argv[start] == "-"))
      ++start;
    if (start >= argv.size()) return std::nullopt;
    f = family_of(argv[start]);
    if (f == Family::kEnv) return std::nullopt;
  }
  switch (f) {
    case Family::kPython: return python_script(argv, start + 1);
    case Family::kNode: return node_script(argv, start + 1);
    case Family::kShell: return shell_script(argv, start + 1);
    case Family::kJava:
      for (std::size_t i = start + 1; i + 1 < argv.size(); ++i)
        if (argv[i] == "-jar") return i + 1;
      return std::nullopt;
    case Family::kNone:
    case Family::kEnv: return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace fencecheck
