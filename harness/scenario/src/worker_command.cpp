#include "fencecheck/harness/worker_command.h"

#include <grp.h>
#include <pwd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string_view>

namespace fencecheck::harness {
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

}  // namespace fencecheck::harness

// ---- the worker's account (issue 34 item 7) ----

namespace fencecheck::harness {
namespace {

std::optional<WorkerAccount> lookup(const std::string& user) {
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  const bool numeric = !user.empty() && std::all_of(user.begin(), user.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (numeric) {
    const unsigned long uid = std::strtoul(user.c_str(), nullptr, 10);
    if (uid > 0xFFFFFFFEul) return std::nullopt;
    if (::getpwuid_r(static_cast<uid_t>(uid), &pw, buf.data(), buf.size(), &found) == 0 && found)
      return WorkerAccount{found->pw_name, found->pw_uid, found->pw_gid, found->pw_dir, "", false};
    return WorkerAccount{user, static_cast<uid_t>(uid), static_cast<gid_t>(uid), "/", "", false};
  }
  if (::getpwnam_r(user.c_str(), &pw, buf.data(), buf.size(), &found) == 0 && found)
    return WorkerAccount{found->pw_name, found->pw_uid, found->pw_gid, found->pw_dir, "", false};
  return std::nullopt;
}

std::string self_name(uid_t uid) {
  auto a = lookup(std::to_string(uid));
  return a ? a->name : std::to_string(uid);
}

}  // namespace

AccountDefaults AccountDefaults::from_environment() {
  AccountDefaults d;
  d.harness_euid = ::geteuid();
  const auto var = [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (!v || !*v) return std::nullopt;
    return std::string(v);
  };
  d.sudo_user = var("SUDO_USER");
  d.worker_user = var("FENCECHECK_WORKER_USER");
  return d;
}

WorkerAccount resolve_worker_account(const std::optional<std::string>& user, const AccountDefaults& defaults) {
  std::string wanted;
  std::string chosen_by;
  if (user) {
    wanted = *user;
    chosen_by = "workers[].user";
  } else if (defaults.worker_user) {
    wanted = *defaults.worker_user;
    chosen_by = "FENCECHECK_WORKER_USER";
  } else if (defaults.harness_euid != 0) {
    auto self = lookup(std::to_string(defaults.harness_euid));
    WorkerAccount a = *self;
    a.chosen_by = "the harness's own account";
    return a;
  } else if (defaults.sudo_user && *defaults.sudo_user != "root") {
    wanted = *defaults.sudo_user;
    chosen_by = "SUDO_USER";
  } else {
    wanted = kDefaultWorkerAccount;
    chosen_by = "the default account";
  }
  auto a = lookup(wanted);
  if (!a)
    throw std::invalid_argument("no account " + std::string(1, '"') + wanted + "\" on this machine (getpwnam; from " + chosen_by +
                                "): give an existing account name or a numeric uid");
  a->chosen_by = chosen_by;
  a->switches = a->uid != defaults.harness_euid;
  if (a->switches && defaults.harness_euid != 0)
    throw std::invalid_argument("running worker programs as " + a->name + " (from " + chosen_by + ") needs root; the harness runs as " +
                                self_name(defaults.harness_euid) + ": drop the setting, or run fencecheck as root (sudo)");
  return *a;
}

std::optional<std::string> account_cannot_run(const WorkerAccount& account, const std::filesystem::path& cwd,
                                              const std::filesystem::path& program,
                                              const std::optional<std::filesystem::path>& script) {
  if (!account.switches) return std::nullopt;
  // The groups before fork: getgrouplist reads /etc/group, which is not async-signal-safe.
  std::vector<gid_t> groups(64);
  int n = static_cast<int>(groups.size());
  if (::getgrouplist(account.name.c_str(), account.gid, groups.data(), &n) < 0) {
    groups.resize(static_cast<std::size_t>(n));
    if (::getgrouplist(account.name.c_str(), account.gid, groups.data(), &n) < 0) n = 0;
  }
  groups.resize(static_cast<std::size_t>(std::max(n, 0)));
  if (groups.empty()) groups.push_back(account.gid);
  const pid_t pid = ::fork();
  if (pid < 0) return "cannot check the account " + account.name + ": fork: " + std::strerror(errno);
  if (pid == 0) {
    // Only async-signal-safe calls from here (fork(2) in a threaded process).
    if (::setgroups(groups.size(), groups.data()) != 0 || ::setgid(account.gid) != 0 || ::setuid(account.uid) != 0) ::_exit(20);
    if (::chdir(cwd.c_str()) != 0) ::_exit(30 + (errno & 0x3f) % 30);
    if (::access(program.c_str(), X_OK) != 0) ::_exit(60 + (errno == EACCES ? 0 : 1));
    if (script && ::access(script->c_str(), R_OK) != 0) ::_exit(70 + (errno == EACCES ? 0 : 1));
    ::_exit(0);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status)) return "cannot check the account " + account.name + ": the check's child died";
  const int code = WEXITSTATUS(status);
  if (code == 0) return std::nullopt;
  if (code == 20) return "cannot switch to " + account.name + " (uid " + std::to_string(account.uid) + ")";
  if (code >= 30 && code < 60)
    return account.name + " cannot enter the worker's cwd " + cwd.string() +
           " (a directory on its path is not searchable by it, or it does not exist)";
  if (code == 60 || code == 61) return account.name + " cannot execute " + program.string();
  return account.name + " cannot read " + script->string();
}

std::vector<std::string> account_prefix(const WorkerAccount& account, const std::string& setpriv) {
  if (!account.switches) return {};
  const bool has_entry = account.name != std::to_string(account.uid) || account.home != "/";
  return {setpriv,
          "--reuid=" + std::to_string(account.uid),
          "--regid=" + std::to_string(account.gid),
          has_entry ? "--init-groups" : "--clear-groups",
          "--pdeathsig=keep",
          "--"};
}

}  // namespace fencecheck::harness
