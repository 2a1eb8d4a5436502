// fencecheck — internal to the postgres kind: an embedded PostgreSQL cluster the harness runs
// itself with Debian's server binaries (/usr/lib/postgresql/<N>/bin: initdb, postgres).
//
// - As an unprivileged user: the postmaster refuses to run as root (PostgreSQL 15 docs, 19.1
//   "The PostgreSQL User Account"), so a root harness runs initdb and postgres as the `postgres`
//   system user (Debian's postgresql-common creates it) through `setpriv --reuid --regid
//   --init-groups --pdeathsig keep`: setpriv execs the server in place (the child keeps its PID),
//   and `--pdeathsig keep` re-arms PR_SET_PDEATHSIG, which the kernel clears when the uid changes
//   (prctl(2)). A harness that is not root runs them as itself.
// - Its data directory is `run_dir/postgres-data` and its Unix socket directory
//   `run_dir/postgres-socket` when every directory above them is traversable by that user and the
//   socket path fits sun_path (107 bytes); otherwise both live in a directory of their own,
//   `<tmp>/fencecheck-pg-<run>-XXXXXX` (mode 0700, owned by that user), named in
//   `run_dir/postgres-data.location` and in the harness log, and removed by remove_own_dir().
// - initdb -A trust -U postgres --locale=C -E UTF8 --no-sync; the server listens on `host` only
//   (listen_addresses), on `port` or a free port of `host`, with its own socket directory (-k),
//   max_connections 300; pg_hba.conf trusts local and loopback connections, and `samenet` when
//   `host` is not a loopback address (a network lab's resource address).
// - Logs (ctx.log_path): postgres-initdb, postgres (the first start), postgres-<n> (the n-th).
//
// Not thread-safe; construct, start and stop it from the harness's main thread (child_process.h:
// PR_SET_PDEATHSIG follows the thread that forked the child).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fencecheck/process/server_support.h"  // EmbeddedOptions

namespace fencecheck::process {
class ChildProcess;
}

namespace fencecheck::postgres::detail {

/// The file in the run directory naming a cluster directory outside it (one line: its path).
inline constexpr const char* kLocationFile = "postgres-data.location";

class EmbeddedPostgres {
 public:
  /// Finds the binaries and the user, creates the cluster (initdb), starts the server, waits until
  /// it accepts connections (PQping) and creates database `fencecheck`. Throws
  /// resources::ResourceUnavailable (no binaries, no unprivileged user, the server does not start:
  /// with the tail of its log) or std::runtime_error.
  /// `options` (process::EmbeddedOptions): port 0 is a free port of host, kept across restarts;
  /// stop_grace is fast shutdown's bound before SIGQUIT, then SIGKILL.
  explicit EmbeddedPostgres(process::EmbeddedOptions options);
  /// stop(), then remove_own_dir().
  ~EmbeddedPostgres();
  EmbeddedPostgres(const EmbeddedPostgres&) = delete;
  EmbeddedPostgres& operator=(const EmbeddedPostgres&) = delete;

  /// Starts the server again on the same data directory and port. Throws as the constructor.
  void start();
  /// Fast shutdown (SIGINT), SIGQUIT after stop_grace, SIGKILL 2 s later. Idempotent; never throws.
  void stop() noexcept;
  /// Removes the directory of its own outside the run directory (if any) and its .location file.
  /// Call after stop(). Never throws.
  void remove_own_dir() noexcept;

  [[nodiscard]] bool running() const;
  /// A libpq connection string for database `dbname` over TCP to host:port, as the superuser
  /// `postgres` (trusted; sslmode and gssencmode disabled: the server has neither).
  [[nodiscard]] std::string dsn(const std::string& dbname) const;
  [[nodiscard]] const std::string& host() const { return options_.host; }
  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] pid_t pid() const;
  [[nodiscard]] const std::filesystem::path& data_dir() const { return data_dir_; }
  /// How long initdb and the first start took.
  [[nodiscard]] std::chrono::milliseconds init_time() const { return init_time_; }
  [[nodiscard]] std::chrono::milliseconds start_time() const { return start_time_; }

 private:
  void create();
  std::filesystem::path log(const std::string& name) const;
  std::vector<std::string> as_user() const;

  process::EmbeddedOptions options_;
  std::filesystem::path bindir_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  bool switch_user_ = false;
  std::filesystem::path own_dir_;  // outside the run directory, or empty
  std::filesystem::path data_dir_;
  std::filesystem::path socket_dir_;
  int port_ = 0;
  int starts_ = 0;
  std::unique_ptr<process::ChildProcess> proc_;
  std::chrono::milliseconds init_time_{0};
  std::chrono::milliseconds start_time_{0};
};

}  // namespace fencecheck::postgres::detail
