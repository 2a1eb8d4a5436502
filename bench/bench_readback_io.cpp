// fencecheck bench — a long run's readback.json, written and read back (issue 16): element by
// element (write_readback_json, read_readback_file: what the orchestrator and `fencecheck report`
// use) against the whole document (to_json(rb).dump(2), readback_from_json(json::parse(text)):
// what they used before), and read with the log handed to a PackedLog (packed_log.h: what
// `fencecheck report` does now). Then the same file served as GET /v1/readback and fetched as the
// end of a run fetches the store's: StoreClient::readback() (the body and the AcceptedWrites
// held) against readback_into() a PackedLog (the reply spilled to a temporary file and read from
// there).
//
// Usage: bench_readback_io [events] [--dir DIR]
//   events  the synthetic run's size (synthetic_history.h, as bench_stream_check; default 10^6):
//           its read-back has about one log entry per 3.7 events
//   --dir   where readback.json is written (default $FENCECHECK_BENCH_TMP or /tmp), removed at exit
//
// Each read runs in a child process of its own (this program, re-executed), so its peak RSS
// (VmHWM) is the read's alone: the child's baseline is measured before it reads and reported apart.
// Figures, one thread: CPU seconds (CLOCK_PROCESS_CPUTIME_ID), peak RSS, and the read-back's own
// resident size (RSS after the read minus before: what any path has to hold).
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include <httplib.h>

#include <thread>

#include "bench_util.h"
#include "fencecheck/harness/packed_log.h"
#include "fencecheck/resources/store_client.h"
#include "fencecheck/proto/readback.h"
#include "synthetic_history.h"

extern char** environ;

namespace fb = fencecheck::bench;
namespace fs = std::filesystem;

namespace {

double cpu_s() { return fb::clock_s(CLOCK_PROCESS_CPUTIME_ID); }

int usage() {
  std::fprintf(stderr, "usage: bench_readback_io [events] [--dir DIR]\n");
  return 2;
}

// This process's peak RSS, MiB: VmHWM of /proc/self/status (its own address space's high-water
// mark; getrusage's ru_maxrss would carry the parent's over the exec).
double vm_hwm_mib() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0.0;
  char line[256];
  double kib = 0.0;
  while (std::fgets(line, sizeof line, f) != nullptr)
    if (std::sscanf(line, "VmHWM: %lf kB", &kib) == 1) break;
  std::fclose(f);
  return kib / 1024.0;
}

// The child: reads `file` one way, prints one line of figures.
int read_child(std::string_view how, const fs::path& file) {
  const double before = fb::current_rss_mib();
  const double c0 = cpu_s();
  fencecheck::ReadBack rb;
  fencecheck::harness::PackedLog log;
  if (how == "streamed") {
    rb = fencecheck::read_readback_file(file);
  } else if (how == "packed") {  // `fencecheck report`'s read: the log straight into a PackedLog
    rb = fencecheck::read_readback_file(file, log.sink());
  } else if (how == "fetch-whole") {  // `file` is the URL: the store client as it was
    rb = fencecheck::StoreClient(file.string(), std::chrono::seconds(60)).readback();
  } else if (how == "fetch-packed") {  // the end of a run now
    rb = fencecheck::StoreClient(file.string(), std::chrono::seconds(60)).readback_into(log.sink());
  } else {
    std::ifstream in(file, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    rb = fencecheck::readback_from_json(nlohmann::json::parse(text));
  }
  const double cpu = cpu_s() - c0;
  const double peak = vm_hwm_mib();
  std::printf("  read %-9s %zu log entries, %zu chunks: %.2f CPU s, peak RSS %.0f MiB (%.0f MiB above its start), "
              "resident after it %.0f MiB above its start\n",
              std::string(how).c_str(), rb.log.size() + log.size(), rb.chunks.size(), cpu, peak, peak - before,
              fb::current_rss_mib() - before);
  return 0;
}

int spawn_read(const char* self, const char* how, const fs::path& file) {  // or a URL, for the fetches
  std::fflush(stdout);
  const std::string path = file.string();
  char* argv[] = {const_cast<char*>(self), const_cast<char*>("--read"), const_cast<char*>(how),
                  const_cast<char*>(path.c_str()), nullptr};
  pid_t pid = 0;
  if (::posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv, environ) != 0) return 1;
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::string_view(argv[1]) == "--read") return read_child(argv[2], argv[3]);
  std::int64_t target = 1'000'000;
  std::string dir_arg;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--dir" && i + 1 < argc) dir_arg = argv[++i];
    else if (!a.empty() && a[0] != '-') target = std::atoll(argv[i]);
    else return usage();
  }
  if (target <= 0) return usage();
  const char* tmp_root = std::getenv("FENCECHECK_BENCH_TMP");
  const fs::path dir = (!dir_arg.empty() ? fs::path(dir_arg) : fs::path(tmp_root != nullptr ? tmp_root : "/tmp")) /
                       ("fencecheck-bench-readback-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path file = dir / "readback.json";

  fencecheck::ReadBack rb;
  const double r0 = fb::current_rss_mib();
  fencecheck::bench::generate_history(target, [](const fencecheck::Event&) {}, &rb);
  const double held = fb::current_rss_mib() - r0;
  std::printf("read-back of %lld events: %zu log entries, %zu chunks, %zu rejections, %.0f MiB resident\n",
              static_cast<long long>(target), rb.log.size(), rb.chunks.size(), rb.rejections.size(), held);

  double c0 = cpu_s();
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    fencecheck::write_readback_json(out, rb);
    out << '\n';
  }
  const double streamed_write = cpu_s() - c0;
  const double before_doc = fb::peak_rss_mib();
  c0 = cpu_s();
  {
    std::ofstream out(file.string() + ".doc", std::ios::binary | std::ios::trunc);
    out << fencecheck::to_json(rb).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  }
  const double doc_write = cpu_s() - c0;
  const double doc_peak = fb::peak_rss_mib();
  const bool same = fs::file_size(file) == fs::file_size(file.string() + ".doc");
  std::printf("  write streamed   %.2f CPU s, %.1f MB (no memory beyond the read-back)\n", streamed_write,
              static_cast<double>(fs::file_size(file)) / 1e6);
  std::printf("  write document   %.2f CPU s, peak RSS %.0f MiB (was %.0f before it); same size: %s\n", doc_write,
              doc_peak, before_doc, same ? "yes" : "NO");
  fs::remove(file.string() + ".doc");
  rb = {};
  int rc = spawn_read(argv[0], "packed", file);
  rc |= spawn_read(argv[0], "streamed", file);
  rc |= spawn_read(argv[0], "document", file);
  {
    // The file served compactly, as fencecheck-store's reply is, from this process.
    std::string reply;
    {
      std::ostringstream out;
      fencecheck::write_readback_json(out, fencecheck::read_readback_file(file), fencecheck::ReadBackJsonStyle{-1, true});
      reply = out.str();
    }
    httplib::Server server;
    server.Get("/v1/readback", [&](const httplib::Request&, httplib::Response& res) { res.set_content(reply, "application/json"); });
    const int port = server.bind_to_any_port("127.0.0.1");
    std::thread serving([&] { server.listen_after_bind(); });  // bound and listening: requests queue until it accepts
    std::printf("  GET /v1/readback: a %.1f MB reply\n", static_cast<double>(reply.size()) / 1e6);
    const std::string url = "http://127.0.0.1:" + std::to_string(port);
    rc |= spawn_read(argv[0], "fetch-packed", url);
    rc |= spawn_read(argv[0], "fetch-whole", url);
    server.stop();
    serving.join();
  }
  fs::remove_all(dir);
  return same ? rc : 1;
}
