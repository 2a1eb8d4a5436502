// fencecheck — internal to the zookeeper kind: a standalone ZooKeeper 3.8 server the harness runs
// itself from Debian's `zookeeper` package (never the system service).
//
// The command (no wrapper script: the JVM is the child, so PR_SET_PDEATHSIG reaches it):
//   java -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xmx256m -Dorg.slf4j.simpleLogger.*
//        -cp /usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar
//        org.apache.zookeeper.server.ZooKeeperServerMain <run_dir>/zookeeper.cfg
// java is found on PATH; the jars in /usr/share/java (Debian's libzookeeper-java and
// libslf4j-java), or FENCECHECK_ZOOKEEPER_CLASSPATH. Debian's zookeeper.jar names its other jars in
// its manifest's Class-Path. slf4j-simple is the server's log binding: without one the server logs
// nothing (slf4j's no-op default), and the kind needs its log: the line "Expiring session 0x...,
// timeout of N ms exceeded" (ZooKeeperServer.expire, INFO) is how the issuer's history tells an
// expiry from a release (zookeeper_kind.h). It logs to stderr, which is the log file itself
// (ctx.log_path("zookeeper"), then "zookeeper-2", ... per start): each line is written before the
// change it announces is made.
// ZooKeeperServerMain, not QuorumPeerMain: one server, no election (QuorumPeerMain with no
// servers listed runs ZooKeeperServerMain anyway). The two serial-GC/C1 flags halve the JVM's
// start on a small machine; measured start to first `srvr` answer: see docs/lock-service-zookeeper.md.
//
// Configuration (zoo.cfg keys, ZooKeeper Administrator's Guide, "Configuration Parameters"):
//   tickTime=<tick_time, 100 ms>   the session clock: the server expires sessions in buckets of one
//                                  tick, so a session ends between its timeout and timeout + tick
//                                  after the last sign of life; 100 ms keeps that error small
//                                  against the 1-10 s leases scenarios use (ZooKeeper's 2000 ms
//                                  default would add up to 2 s).
//   minSessionTimeout=2*tickTime   ZooKeeper's own default, written out: 200 ms at the default tick
//   maxSessionTimeout=max(60000, 20*tickTime)   so every timeout of 1-60 s is granted as asked
//   dataDir=<run_dir>/zookeeper-data, clientPort, clientPortAddress=<host> (loopback, or the
//   network lab's lock-service address), admin.enableServer=false (no Jetty on port 8080),
//   4lw.commands.whitelist=ruok,srvr,stat,cons,dump, maxClientCnxns=0 (no per-address limit: every
//   worker connects from 127.0.0.1), forceSync=no (the transaction log is written, not fsynced, per
//   commit: a killed server loses nothing the page cache holds; only a machine crash would),
//   preAllocSize=4096 (KB: each transaction log file is preallocated 4 MB, not 64 MB; a run writes
//   far less).
//
// Ready = the `srvr` four-letter word answers with "Mode: standalone" (the server serves clients).
// Stopped with SIGTERM (then SIGKILL after stop_grace); started again on the same data directory
// and port, or on a fresh one: the old directory is kept beside it as zookeeper-data.<n> for
// inspection.
//
// Orphans: the server is the harness's own child with PR_SET_PDEATHSIG=SIGKILL (ChildProcess), so a
// killed harness takes it along; as a second line, `run_dir/zookeeper.pid` names its pid and
// configuration while it runs, and stop_orphaned_zookeeper() (zookeeper_kind.h) ends a server
// that a dead harness left (only a process whose command line names that configuration file).
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

#include "fencecheck/locks/lock_service_kind.h"  // OrphanReport
#include "fencecheck/process/server_support.h"  // EmbeddedOptions

namespace fencecheck::process {
class ChildProcess;
}

namespace fencecheck::locks::zk {

/// The pid record in the run directory ("pid <n>", "config <path>", "harness <n>" lines); an
/// ensemble member's is "zookeeper-<i>.pid".
inline constexpr const char* kPidFile = "zookeeper.pid";
/// The main class of an ensemble member.
inline constexpr const char* kQuorumMainClass = "org.apache.zookeeper.server.quorum.QuorumPeerMain";
/// The main class of the embedded server (what the orphan sweep looks for in a command line).
inline constexpr const char* kMainClass = "org.apache.zookeeper.server.ZooKeeperServerMain";

class EmbeddedZooKeeper {
 public:
  /// Finds java and the jars, writes the configuration, starts the server and waits until it
  /// serves. Throws LockServiceUnavailable (no java, no jars, the server exits or does not answer:
  /// with the tail of its log).
  /// `options`: process::EmbeddedOptions (port 0: a free port of host, up to 5 tries when it is
  /// taken, kept across restarts; stop_grace: after SIGTERM, before SIGKILL); `tick_time`: the
  /// server's tickTime.
  EmbeddedZooKeeper(process::EmbeddedOptions options, std::chrono::milliseconds tick_time);
  /// stop().
  ~EmbeddedZooKeeper();
  EmbeddedZooKeeper(const EmbeddedZooKeeper&) = delete;
  EmbeddedZooKeeper& operator=(const EmbeddedZooKeeper&) = delete;

  /// Starts the server again at the same address; with fresh_data on an empty data directory.
  /// Idempotent while running (fresh_data then stops it first). Throws as the constructor.
  void start(bool fresh_data);
  /// SIGTERM, SIGKILL after stop_grace. Idempotent; never throws.
  void stop() noexcept;

  [[nodiscard]] bool running() const;
  [[nodiscard]] pid_t pid() const;
  [[nodiscard]] const std::string& host() const { return options_.host; }
  [[nodiscard]] int port() const { return port_; }
  /// "host:port" (an IPv6 host in brackets).
  [[nodiscard]] std::string endpoint() const;
  [[nodiscard]] const std::filesystem::path& data_dir() const { return data_dir_; }
  [[nodiscard]] const std::filesystem::path& config_file() const { return config_; }
  /// The server's log files, one per start, oldest first.
  [[nodiscard]] std::vector<std::filesystem::path> logs() const { return logs_; }
  /// How long the last start took, from the fork to the first `srvr` answer.
  [[nodiscard]] std::chrono::milliseconds start_time() const { return start_time_; }

 private:
  void write_config(int port) const;
  std::filesystem::path log(const std::string& name) const;

  process::EmbeddedOptions options_;
  std::chrono::milliseconds tick_time_;
  std::filesystem::path java_;
  std::string classpath_;
  std::filesystem::path data_dir_;
  std::filesystem::path config_;
  int port_ = 0;
  int starts_ = 0;
  std::vector<std::filesystem::path> logs_;
  std::unique_ptr<process::ChildProcess> proc_;
  std::chrono::milliseconds start_time_{0};
};

/// An embedded ensemble of 3 or 5 ZooKeeper 3.8 servers (QuorumPeerMain), for
/// `lock_service: {kind: zookeeper, members: 3}` (issue 35; docs/lock-service-zookeeper.md, "The
/// embedded ensemble"). Member i (1-based) is server.i (myid i in its own data directory
/// <run_dir>/zookeeper-data-<i>), configured by <run_dir>/zookeeper-<i>.cfg with every server's
/// `server.N=host:quorum:election` line. On loopback each member gets three free ports of its own
/// (client, quorum, election); with places (network: namespaces) each runs in its own namespace at
/// its own address on ZooKeeper's usual ports 2181/2888/3888, started through
/// {"ip","netns","exec",<netns>}, so a partition between members is a real one.
///
/// Configuration beyond the standalone server's (embedded_zookeeper.h above; Administrator's Guide,
/// "Cluster Options"): initLimit (ticks a follower may take to connect to and sync with its
/// leader), syncLimit (ticks without a leader's ping before a follower gives it up, and without a
/// quorum's acks before a leader steps down: a member cut off from the others keeps serving its
/// clients' reads and pings for up to this long), standaloneEnabled=false, reconfigEnabled=false.
///
/// Start-up: member n (the highest myid) is started first and the others once its election port
/// listens: FastLeaderElection elects the highest (epoch, zxid, myid) among the first quorum that
/// talks, and with member n already up that quorum includes it, so member n leads every fresh
/// ensemble (the same ensemble each run). start() returns once every member's `srvr` answers with
/// "Mode: leader" or "Mode: follower" and exactly one leads.
///
/// Thread-safety: not synchronised; the orchestrator's main thread drives it (PR_SET_PDEATHSIG
/// follows the thread that forked a member). endpoints() may be read from any thread once the
/// constructor returned.
class ZooKeeperEnsemble {
 public:
  struct Place {
    std::string host = "127.0.0.1";  ///< the address the member binds (client, quorum, election)
    std::string netns;               ///< "" on the harness's network; else the namespace it runs in
  };
  struct Options {
    int members = 3;
    /// One per member; empty: every member at `host` with free ports.
    std::vector<Place> places;
    std::string host = "127.0.0.1";
    std::filesystem::path run_dir;
    /// The log file of a named process (RunDirectory::log_path); unset: <run_dir>/logs/<name>.log.
    std::function<std::filesystem::path(const std::string&)> log_path;
    std::chrono::milliseconds tick_time{100};
    int init_limit = 50;  ///< ticks
    int sync_limit = 20;  ///< ticks
    /// start(): the whole ensemble; start_member(): the one member.
    std::chrono::milliseconds start_timeout{30000};
    std::chrono::milliseconds stop_grace{2000};  ///< SIGTERM, then SIGKILL
    int port_attempts = 3;  ///< whole-ensemble retries when a free port was taken (loopback only)
    /// The clock shim to preload into every member (faults::clock_shim_library()), or empty: the
    /// members run without it. With it, member i reads its wall clock offset from
    /// <data_dir(i)>/clock-offset (fencecheck/faults/clock_offset.h), created with no offset before
    /// the member first starts and kept across its restarts: the clock-jump fault moves that
    /// member's System.currentTimeMillis (logs, znode ctime/mtime on the leader), not its
    /// System.nanoTime (session expiry, ticks). docs/lock-service-zookeeper.md, "Clock faults".
    std::filesystem::path clock_shim;
  };

  /// Finds java and the jars, writes every member's configuration and myid, starts the ensemble
  /// (order above) and returns once every member serves with one leader. Throws
  /// LockServiceUnavailable (no java or jars, a member exits or does not serve in time: with the
  /// tail of its log); whatever was started is stopped again.
  explicit ZooKeeperEnsemble(Options options);
  /// stop().
  ~ZooKeeperEnsemble();
  ZooKeeperEnsemble(const ZooKeeperEnsemble&) = delete;
  ZooKeeperEnsemble& operator=(const ZooKeeperEnsemble&) = delete;

  [[nodiscard]] int size() const { return static_cast<int>(members_.size()); }
  /// Member `index`'s client address, "host:port"; fixed for the ensemble's life. Throws
  /// std::out_of_range.
  [[nodiscard]] std::string endpoint(int index) const;
  /// Every member's, in index order.
  [[nodiscard]] std::vector<std::string> endpoints() const;
  /// Its pid; 0 while it is down.
  [[nodiscard]] int pid(int index) const;
  [[nodiscard]] const Place& place(int index) const;
  [[nodiscard]] int client_port(int index) const;
  [[nodiscard]] const std::filesystem::path& data_dir(int index) const;
  /// Whether the members run with the clock shim (Options::clock_shim was set).
  [[nodiscard]] bool clock_shim() const { return !options_.clock_shim.empty(); }
  /// Every log file of every member, one per start, oldest first (the leader's says "Expiring
  /// session 0x..."; any member may lead).
  [[nodiscard]] std::vector<std::filesystem::path> logs() const;
  /// From the first fork to every member serving, of the constructor's start.
  [[nodiscard]] std::chrono::milliseconds start_time() const { return start_time_; }

  /// Each running member's `srvr` Mode (500 ms each). The member saying "leader"; when two do (a
  /// leader cut off from the others says so until syncLimit ticks pass), the one with the higher
  /// epoch (the zxid's high 32 bits). nullopt when none does (an election under way, no quorum).
  /// `why` says what each member answered ("member 1: follower, zxid 0x100000003; member 3:
  /// leader, zxid 0x100000003"). Never throws.
  [[nodiscard]] std::optional<int> leader(std::string& why) const;

  /// Ends member `index`: SIGKILL at once with kill9, else SIGTERM and SIGKILL after stop_grace;
  /// reaped. Its data stays. Idempotent. Throws std::out_of_range, std::runtime_error when it did
  /// not end.
  void stop_member(int index, bool kill9);
  /// Starts member `index` again on its own data and configuration (same ports) and returns once
  /// its `srvr` says leader or follower (it has joined a quorum). No-op while it runs. Throws
  /// std::runtime_error (it exits or does not serve within start_timeout: it is killed again, with
  /// its log's tail), std::out_of_range.
  void start_member(int index);
  /// Starts every member that is down (all launched, then each waited for: one alone has no
  /// quorum). Throws as start_member().
  void start_all();
  /// Every member: SIGCONT and SIGTERM to all, then each reaped (SIGKILL after stop_grace).
  /// Idempotent; never throws.
  void stop() noexcept;

 private:
  struct Member;
  void launch(Member& m);
  void wait_serving(Member& m, std::chrono::steady_clock::time_point deadline);
  void start_once();
  Member& at(int index) const;

  Options options_;
  std::filesystem::path java_;
  std::string classpath_;
  std::vector<std::unique_ptr<Member>> members_;
  std::chrono::milliseconds start_time_{0};
};

/// What stop_orphaned_zookeeper found and did, one sentence per server (none when nothing ran).
/// Ends the embedded server `run_dir/zookeeper.pid` names (and each ensemble member's,
/// `run_dir/zookeeper-<i>.pid`) when that process still runs with that
/// configuration and its parent is gone (pid 1 or a subreaper adopted it), or always with `force`:
/// SIGTERM, SIGKILL after 5 s, and then it must be gone within 2 s; otherwise it says so, counts it
/// in not_stopped and keeps the record, so that the next cleanup retries. Never throws.
[[nodiscard]] OrphanReport stop_orphaned_zookeeper(const std::filesystem::path& run_dir, bool force);

}  // namespace fencecheck::locks::zk
