// fencecheck-worker: parses the command line, maps SIGTERM/SIGINT to a stop request, runs the
// worker (fencecheck/workers/worker.h). Events: stdout (JSON lines). Logs: stderr.
#include <pthread.h>
#include <signal.h>

#include <iostream>
#include <stop_token>
#include <thread>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "fencecheck/workers/worker.h"
#include "fencecheck/workers/worker_cli.h"

int main(int argc, char** argv) {
  fencecheck::WorkerCli cli = fencecheck::parse_worker_cli(argc, argv);
  if (!cli.options) {
    (cli.exit_code == 0 ? std::cout : std::cerr) << cli.output << std::flush;
    return cli.exit_code;
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

  fencecheck::EventWriter events(std::cout, options.id);
  const int rc = fencecheck::run_worker(options, events, stop.get_token());

  pthread_kill(signals.native_handle(), SIGUSR1);
  signals.join();
  return rc;
}
