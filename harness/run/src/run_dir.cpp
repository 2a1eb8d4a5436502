#include "fencecheck/harness/run_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <stdexcept>

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>

namespace fencecheck::harness {
namespace fs = std::filesystem;

fs::path run_ids_directory() {
  // /run is a tmpfs emptied at boot, writable by root, who runs the faults; others share the temp
  // directory (their runs make no namespaces or cgroups, only the workers' directories there).
  if (::access("/run", W_OK) == 0) return "/run/fencecheck/run-ids";
  return fs::temp_directory_path() / ("fencecheck-run-ids-" + std::to_string(::getuid()));
}

namespace {

/// Removes the ids older than a day: a run killed with -9 leaves its id behind, and an id carries
/// its second, so one that old can no longer be handed out again.
void prune_run_ids(const fs::path& ids, std::time_t now) {
  std::error_code ec;
  for (fs::directory_iterator it(ids, ec), end; !ec && it != end; it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) == 0 && st.st_mtime + 86'400 < now) {
      std::error_code ignored;
      fs::remove(it->path(), ignored);
    }
  }
}

}  // namespace

RunDirectory RunDirectory::create(const fs::path& run_root, const std::string& scenario) {
  std::error_code ec;
  fs::create_directories(run_root, ec);
  if (ec) throw std::runtime_error("cannot create run root " + run_root.string() + ": " + ec.message());
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
  const std::string base = std::string(stamp) + "-" + scenario;
  const fs::path ids = run_ids_directory();
  fs::create_directories(ids, ec);
  if (ec) throw std::runtime_error("cannot create " + ids.string() + ": " + ec.message());
  prune_run_ids(ids, now);
  RunDirectory d;
  for (int n = 1;; ++n) {
    if (n > 1000) throw std::runtime_error("no free run directory name under " + run_root.string());
    d.run_id_ = n == 1 ? base : base + "-" + std::to_string(n);
    // The id first, machine-wide: it names kernel-wide things (network namespaces, cgroups, the
    // workers' directories), so two run roots must never hand out the same one in one second.
    const fs::path marker = ids / d.run_id_;
    const int mfd = ::open(marker.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (mfd < 0) {
      if (errno == EEXIST) continue;
      throw std::runtime_error("cannot claim run id " + marker.string() + ": " + std::strerror(errno));
    }
    ::close(mfd);
    d.path_ = run_root / d.run_id_;
    if (fs::create_directory(d.path_, ec)) {  // atomic: a concurrent run never gets the same one
      d.id_marker_ = std::shared_ptr<const fs::path>(new fs::path(marker), [](const fs::path* m) {
        std::error_code ignored;
        fs::remove(*m, ignored);
        delete m;
      });
      break;
    }
    fs::remove(marker, ec);
    if (ec) throw std::runtime_error("cannot create run directory " + d.path_.string() + ": " + ec.message());
  }
  // Locked before scenario.json exists: `--keep` only ever considers a directory holding one.
  const int fd = ::open(d.path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || ::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("cannot lock run directory " + d.path_.string());
  }
  d.lock_fd_ = std::shared_ptr<int>(new int(fd), [](int* p) {
    ::close(*p);
    delete p;
  });
  fs::create_directories(d.path_ / "logs");
  const fs::path latest = run_root / "latest";
  const fs::path tmp = run_root / (".latest-" + d.run_id_);
  fs::remove(tmp, ec);
  fs::create_directory_symlink(d.run_id_, tmp, ec);
  if (!ec) fs::rename(tmp, latest, ec);  // rename(2) replaces the old link atomically
  return d;
}

bool RunDirectory::in_use(const fs::path& path) noexcept {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool busy = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);
  return busy;
}

fs::path RunDirectory::log_path(const std::string& name) const { return path_ / "logs" / (name + ".log"); }

void RunDirectory::write_json(const std::string& name, const nlohmann::json& doc) const {
  write_with(name, [&](std::ostream& out) { out << doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace); });
}

void RunDirectory::write_with(const std::string& name, const std::function<void(std::ostream&)>& write) const {
  const fs::path target = path_ / name;
  const fs::path tmp = path_ / ("." + name + ".tmp");
  try {
    std::ofstream out(tmp);
    if (!out) throw std::runtime_error("cannot write " + tmp.string());
    write(out);
    out << '\n';
    out.flush();
    if (!out) throw std::runtime_error("cannot write " + tmp.string());
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
  fs::rename(tmp, target);
}

std::shared_ptr<void> RunDirectory::attach_log() const {
  auto sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>((path_ / "harness.log").string(), true);
  auto logger = spdlog::default_logger();
  logger->sinks().push_back(sink);
  return std::shared_ptr<void>(nullptr, [logger, sink](void*) {
    auto& sinks = logger->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink), sinks.end());
  });
}

}  // namespace fencecheck::harness
