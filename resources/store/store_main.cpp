// fencecheck-store: the reference fenced store (FencedStore behind StoreServer). Thin main:
// parse arguments, open the store, bind, announce the address on stdout, serve until
// SIGTERM/SIGINT, close cleanly.
//
// stdout carries exactly one line, once listening, then nothing:
//   {"listening":"127.0.0.1:PORT","fencing":"per-key","effect_mode":"fenced","pid":N}
// --fencing per-key|none|global|check-then-write; --check-window-ms N (check-then-write only,
// default 200) is how long the store lets go of its lock between the check and the write.
// --repair-log starts on a damaged log anyway, keeping every readable record (store.h, "Recovery").
// --effect-mode fenced|unfenced|idempotent (default fenced) is how every side effect
// (POST /v1/effects/{key}) is guarded: the store's design, which no request can change
// (store_server.h).
// Logs go to stderr. Exit: 0 after a clean stop, 1 when the store or the listener cannot start,
// 2 on bad arguments, 3 when the log is damaged beyond a torn tail (nothing changed; the message
// names the file, the byte offset and the record; --repair-log starts it).
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "fencecheck/resources/store.h"
#include "fencecheck/resources/store_server.h"

namespace {

std::string join(const std::vector<std::string_view>& names) {
  std::string out;
  for (auto n : names) out += (out.empty() ? "" : "|") + std::string(n);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fencecheck-store: the reference fenced store. Keeps the highest fencing token accepted per key "
               "and rejects lower ones atomically with the write; every accepted write is fsynced before the reply."};
  std::string listen = "127.0.0.1:0";
  std::string data_dir;
  std::string fencing = "per-key";
  std::string effect_mode = "fenced";
  std::size_t max_body_bytes = 64 * 1024;
  std::size_t threads = 128;
  std::int64_t check_window_ms = 200;
  std::string log_level = "info";
  app.add_option("--listen", listen, "host:port to listen on; port 0 picks a free port")->capture_default_str();
  app.add_option("--data-dir", data_dir, "directory of the store's log (created when missing)")->required();
  app.add_option("--fencing", fencing, "fencing mode: " + join(fencecheck::fencing_mode_names()))->capture_default_str();
  app.add_option("--effect-mode", effect_mode,
                 "how every side effect (POST /v1/effects/{key}) is guarded: " + join(fencecheck::effect_mode_names()) +
                     "; requests cannot change it")
      ->capture_default_str();
  auto* window = app.add_option("--check-window-ms", check_window_ms,
                                "check-then-write only: ms between reading the key's high-water mark and writing")
                     ->capture_default_str()
                     ->check(CLI::Range(std::int64_t{0}, std::int64_t{3600000}));
  app.add_option("--max-body-bytes", max_body_bytes, "largest chunk accepted, bytes (413 above)")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, fencecheck::kMaxChunkBytes));
  app.add_option("--threads", threads, "HTTP worker threads (one per concurrent connection)")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, std::size_t{4096}));
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error|critical|off")->capture_default_str();
  bool repair_log = false;
  app.add_flag("--repair-log", repair_log,
               "start even when the log is damaged beyond a torn tail (otherwise refused, exit 3): keep every "
               "readable record and each key's highest token among them, copy the damaged file to "
               "store.log.damaged.N, write the repaired log atomically, and report what was lost");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);  // prints help (rc 0) or the error with a hint
    return rc == 0 ? 0 : 2;
  }
  auto mode = fencecheck::fencing_mode_from_name(fencing);
  if (!mode) {
    std::cerr << "fencecheck-store: --fencing '" << fencing << "' is not one of " << join(fencecheck::fencing_mode_names())
              << "\n";
    return 2;
  }
  auto effects = fencecheck::effect_mode_from_name(effect_mode);
  if (!effects) {
    std::cerr << "fencecheck-store: --effect-mode '" << effect_mode << "' is not one of "
              << join(fencecheck::effect_mode_names()) << "\n";
    return 2;
  }
  if (window->count() > 0 && *mode != fencecheck::FencingMode::kCheckThenWrite) {
    std::cerr << "fencecheck-store: --check-window-ms applies only to --fencing check-then-write (got --fencing "
              << fencing << ")\n";
    return 2;
  }
  std::pair<std::string, int> address;
  try {
    address = fencecheck::parse_listen_address(listen);
  } catch (const std::invalid_argument& e) {
    std::cerr << "fencecheck-store: --listen: " << e.what() << "\n";
    return 2;
  }
  auto level = spdlog::level::from_str(log_level);
  if (level == spdlog::level::off && log_level != "off") {
    std::cerr << "fencecheck-store: --log-level '" << log_level << "' is not a spdlog level\n";
    return 2;
  }
  spdlog::set_default_logger(spdlog::stderr_color_mt("fencecheck-store"));
  spdlog::set_level(level);

  // A reader that goes away (the harness closing our stderr pipe) must not kill the store
  // mid-flush with SIGPIPE; the write just fails.
  ::signal(SIGPIPE, SIG_IGN);

  // Block the stop signals in every thread (the store's and httplib's inherit this mask); one
  // thread takes them with sigwait, so no handler runs in an async-signal context.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  try {
    fencecheck::StoreOptions store_options;
    store_options.check_window = std::chrono::milliseconds(check_window_ms);
    store_options.repair_log = repair_log;
    std::unique_ptr<fencecheck::FencedStore> store;
    try {
      store = fencecheck::FencedStore::open(data_dir, *mode, store_options);
    } catch (const fencecheck::StoreLogDamaged& e) {
      spdlog::error("{}", e.what());
      return 3;
    }
    spdlog::info("opened {} ({})", store->log_path().string(), store->recovery().summary());

    fencecheck::StoreServerOptions options;
    options.host = address.first;
    options.port = address.second;
    options.max_body_bytes = max_body_bytes;
    options.threads = threads;
    options.effect_mode = *effects;
    fencecheck::StoreServer server(*store, options);

    std::atomic<int> got_signal{0};
    std::thread signals([&] {
      int sig = 0;
      if (sigwait(&stop_signals, &sig) == 0) got_signal = sig;
      server.stop();
    });

    nlohmann::ordered_json hello;
    hello["listening"] = server.address();
    hello["fencing"] = std::string(fencecheck::fencing_mode_name(*mode));
    hello["effect_mode"] = effect_mode;
    hello["pid"] = static_cast<long>(::getpid());
    std::cout << hello.dump() << std::endl;  // endl: the harness waits for this line
    if (*mode == fencecheck::FencingMode::kCheckThenWrite)
      spdlog::info("listening on {} (fencing {}, check window {} ms, effects {}, max body {} bytes)", server.address(),
                   fencing, check_window_ms, effect_mode, max_body_bytes);
    else
      spdlog::info("listening on {} (fencing {}, effects {}, max body {} bytes)", server.address(), fencing, effect_mode,
                   max_body_bytes);

    const bool ok = server.run();
    if (got_signal == 0) pthread_kill(signals.native_handle(), SIGTERM);  // wake the sigwait
    signals.join();
    store->close();
    if (!ok) {
      spdlog::error("the HTTP accept loop failed");
      return 1;
    }
    spdlog::info("stopped by signal {}; log closed cleanly", got_signal.load());
    return 0;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
}
