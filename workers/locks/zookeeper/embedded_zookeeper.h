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
//   commit: a killed server loses nothing the page cache holds; only a machine crash would).
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

/// The pid record in the run directory (two lines: "pid <n>", "config <path>").
inline constexpr const char* kPidFile = "zookeeper.pid";
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

/// What stop_orphaned_zookeeper found and did, one sentence per server (none when nothing ran).
/// Ends the embedded server `run_dir/zookeeper.pid` names when that process still runs with that
/// configuration and its parent is gone (pid 1 or a subreaper adopted it), or always with `force`:
/// SIGTERM, SIGKILL after 5 s, and then it must be gone within 2 s; otherwise it says so, counts it
/// in not_stopped and keeps the record, so that the next cleanup retries. Never throws.
[[nodiscard]] OrphanReport stop_orphaned_zookeeper(const std::filesystem::path& run_dir, bool force);

}  // namespace fencecheck::locks::zk
