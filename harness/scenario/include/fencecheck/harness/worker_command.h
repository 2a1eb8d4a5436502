// fencecheck — a command worker's program before a run starts: the script a known interpreter
// would run (issue 34 item 6), and the account it runs as (item 7).
//
// A command such as [/usr/bin/python3, ../../order_worker.py] whose script is misspelt starts,
// the interpreter exits 2 ("can't open file"), and the run reads as "the system failed". The
// loader's check_worker_commands() (scenario.h) finds the script argument with script_argument()
// and refuses a missing one at validate (exit 2), with the argument's file:line:col.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace fencecheck::harness {

/// The index in argv of the file a known interpreter would run, or nullopt when argv's program
/// is no known interpreter or this command runs no file (python3 -c / -m / -, node -e / -p,
/// sh -c / -s, java without -jar, or no argument left after the options). Pure; never throws.
///
/// Known interpreters (matched on argv[0]'s file name): python, python3, python3.N, pypy3
/// (python(1) "Interface options": -c, -m, -; -W and -X take the next argument unless
/// attached); node, nodejs (node(1): -e/--eval, -p/--print run no file; -r/--require and
/// --import take an argument unless given with '='); bash, sh, dash, zsh, ksh (bash(1): -c and
/// -s run no file; -o/+o/-O/+O take one); java (only `-jar FILE`); and env(1) before any of
/// them (`/usr/bin/env [NAME=value ...] python3 x.py`). Every other option is taken to stand
/// alone; `--` ends the options.
[[nodiscard]] std::optional<std::size_t> script_argument(const std::vector<std::string>& argv);

/// The account a command worker runs as (docs/worker-protocol.md, "The worker's account").
/// Plain data.
struct WorkerAccount {
  std::string name;   ///< the account's name ("nobody"), or the uid as text when it has no passwd entry
  uid_t uid = 0;
  gid_t gid = 0;      ///< its primary group (the passwd entry's; the uid itself without an entry)
  std::string home;   ///< its home directory (HOME for the worker), "/" without an entry
  /// Why this account: "workers.w1.user", "FENCECHECK_WORKER_USER", "SUDO_USER", "the default
  /// account", "the harness's own account".
  std::string chosen_by;
  /// The worker runs under another uid than the harness's (setpriv(1) switches to it).
  bool switches = false;
  bool operator==(const WorkerAccount&) const = default;
};

/// What the default depends on: the harness's effective uid and two variables. Plain data.
struct AccountDefaults {
  uid_t harness_euid = 0;
  std::optional<std::string> sudo_user;    ///< SUDO_USER (sudo(8) sets it to the invoking user)
  std::optional<std::string> worker_user;  ///< FENCECHECK_WORKER_USER
  /// The current process's: geteuid(), SUDO_USER, FENCECHECK_WORKER_USER (empty counts as unset).
  static AccountDefaults from_environment();
};

/// The account named `kDefaultWorkerAccount` when nothing else names one and the harness is root.
inline constexpr const char* kDefaultWorkerAccount = "nobody";

/// Resolves the account a command worker runs as, in this order: the worker's `user:`;
/// FENCECHECK_WORKER_USER; SUDO_USER when it is not root; "nobody". A harness that is not root
/// runs every worker as itself: a `user:` or FENCECHECK_WORKER_USER naming another account is an
/// error (switching needs root). `user` is a name or a decimal uid (a uid without a passwd entry
/// is allowed: gid = uid, home "/"). Throws std::invalid_argument with the whole reason ("no
/// account \"nobdy\" on this machine (getpwnam)"; "running worker programs as alice needs root
/// ..."). Reads the passwd database (getpwnam_r/getpwuid_r): thread-safe.
[[nodiscard]] WorkerAccount resolve_worker_account(const std::optional<std::string>& user, const AccountDefaults& defaults);

/// Whether `account` can run this worker: search its cwd, execute `program` (absolute), read
/// `script` (absolute; nullopt for none). Checked for real in a child process that drops to the
/// account (setgroups, setgid, setuid; no exec). nullopt when it can; else the reason, e.g.
/// "nobody cannot search /root (the worker's cwd /root/x/scenarios): Permission denied". Only
/// meaningful when account.switches (otherwise nullopt at once). Errors of fork itself are
/// reported as a reason. Thread-safe.
[[nodiscard]] std::optional<std::string> account_cannot_run(const WorkerAccount& account, const std::filesystem::path& cwd,
                                                            const std::filesystem::path& program,
                                                            const std::optional<std::filesystem::path>& script);

/// The argv prefix that makes a program run as `account` (setpriv(1): --reuid, --regid, its
/// groups (--init-groups with a passwd entry, else --clear-groups), --pdeathsig keep so the
/// harness's PR_SET_PDEATHSIG survives the switch, --), or empty when !account.switches.
/// `setpriv` is the program's absolute path (util-linux, Essential in Debian). Pure.
[[nodiscard]] std::vector<std::string> account_prefix(const WorkerAccount& account, const std::string& setpriv);

}  // namespace fencecheck::harness
