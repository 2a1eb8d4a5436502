// fencecheck-worker: parses the command line, maps SIGTERM/SIGINT to a stop request, runs the
// worker (fencecheck/workers/worker.h). Events: stdout (JSON lines). Logs: stderr.
// Under libfaketime (a skewed clock for --token-source timestamp) it requires
// FAKETIME_DONT_FAKE_MONOTONIC=1 and exits 2 otherwise (see faketime_problem()).
#include <pthread.h>
#include <signal.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <stop_token>
#include <thread>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "fencecheck/proto/worker_protocol.h"
#include "fencecheck/workers/worker.h"
#include "fencecheck/workers/worker_cli.h"

namespace {

/// libfaketime (Debian's faketime 0.9.10) fakes CLOCK_MONOTONIC too unless told not to, and then
/// turns every timed condition-variable wait into one that never ends: a worker run that way would
/// hang, not fail. A skewed clock must be the wall clock only. "" when fine, else the message.
std::string faketime_problem() {
  const char* preload = std::getenv("LD_PRELOAD");
  const char* faketime = std::getenv("FAKETIME");
  if (preload == nullptr || faketime == nullptr || std::string(preload).find("faketime") == std::string::npos) return "";
  const char* mono = std::getenv("FAKETIME_DONT_FAKE_MONOTONIC");
  if (mono != nullptr && std::string(mono) == "1") return "";
  return "fencecheck-worker: running under libfaketime (FAKETIME=" + std::string(faketime) +
         ") without FAKETIME_DONT_FAKE_MONOTONIC=1: libfaketime would also shift CLOCK_MONOTONIC, which the "
         "worker's timed waits and pause detector use (its waits would never end). Skew the wall clock only: "
         "set FAKETIME_DONT_FAKE_MONOTONIC=1.\n";
}

}  // namespace

int main(int argc, char** argv) {
  fencecheck::WorkerCli cli = fencecheck::parse_worker_cli(argc, argv);
  if (!cli.options) {
    (cli.exit_code == 0 ? std::cout : std::cerr) << cli.output << std::flush;
    return cli.exit_code;
  }
  if (auto why = faketime_problem(); !why.empty()) {
    std::cerr << why << std::flush;
    return fencecheck::kWorkerBadArgs;
  }
  const fencecheck::WorkerOptions& options = *cli.options;

  auto logger = spdlog::stderr_color_mt("fencecheck-worker");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [" + options.id + "] %v");
  logger->set_level(spdlog::level::from_str(cli.log_level));
  spdlog::set_default_logger(logger);

  // A closed stdout (the harness went away) must not kill the worker mid-release.
  ::signal(SIGPIPE, SIG_IGN);
  // SIGTERM/SIGINT are taken by one thread with sigwait; every other thread (created below,
  // after the mask is set) has them blocked. SIGUSR1 is how main wakes that thread at the end.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::stop_source stop;
  std::thread signals([&set, &stop] {
    int sig = 0;
    while (sigwait(&set, &sig) == 0) {
      if (sig == SIGUSR1) return;
      spdlog::info("signal {}: stopping", sig);
      stop.request_stop();
    }
  });

  // The worker protocol's event channel (docs/worker-protocol.md): the descriptor the harness
  // names in FENCECHECK_EVENTS_FD; stdout when run by hand (or by a test) without one.
  std::ofstream channel;
  if (const char* fd = std::getenv("FENCECHECK_EVENTS_FD"); fd && *fd) {
    channel.open(std::string("/dev/fd/") + fd, std::ios::out | std::ios::app);
    if (!channel) {
      std::cerr << "fencecheck-worker: cannot open the event channel FENCECHECK_EVENTS_FD=" << fd << "\n";
      return 2;
    }
  }
  fencecheck::EventWriter events(channel.is_open() ? static_cast<std::ostream&>(channel) : std::cout, options.id);
  {
    fencecheck::Event hello;
    hello.kind = fencecheck::EventKind::kHello;
    hello.protocol = fencecheck::kWorkerProtocolVersion;
    events.emit(std::move(hello));
  }
  const int rc = fencecheck::run_worker(options, events, stop.get_token());

  pthread_kill(signals.native_handle(), SIGUSR1);
  signals.join();
  return rc;
}
