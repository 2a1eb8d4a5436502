// ClockOffsetFile and clock_shim_library (fencecheck/faults/clock_offset.h).
#include "fencecheck/faults/clock_offset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <system_error>

#include "fencecheck/process/child_process.h"

namespace fencecheck::faults {
namespace {

std::int64_t realtime_ns() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

std::int64_t offset_of(const ClockOffsetLayout& l, std::int64_t now) {
  const std::int64_t offset = __atomic_load_n(&l.offset_ns, __ATOMIC_RELAXED);
  const std::int64_t ppm = __atomic_load_n(&l.drift_ppm, __ATOMIC_RELAXED);
  if (ppm == 0) return offset;
  const std::int64_t since = __atomic_load_n(&l.drift_since_ns, __ATOMIC_RELAXED);
  return offset + drift_ns(now - since, ppm);
}

void write(ClockOffsetLayout* l, std::int64_t offset, std::int64_t ppm, std::int64_t since) {
  const std::uint64_t seq = __atomic_load_n(&l->seq, __ATOMIC_RELAXED);
  __atomic_store_n(&l->seq, seq + 1, __ATOMIC_RELAXED);  // odd: readers wait
  __atomic_thread_fence(__ATOMIC_RELEASE);
  __atomic_store_n(&l->offset_ns, offset, __ATOMIC_RELAXED);
  __atomic_store_n(&l->drift_ppm, ppm, __ATOMIC_RELAXED);
  __atomic_store_n(&l->drift_since_ns, since, __ATOMIC_RELAXED);
  __atomic_store_n(&l->seq, seq + 2, __ATOMIC_RELEASE);
}

}  // namespace

ClockOffsetFile::ClockOffsetFile(std::filesystem::path path) : path_(std::move(path)) {
  const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "clock offset file " + path_.string());
  struct stat st {};
  const bool fresh = ::fstat(fd, &st) != 0 || st.st_size != static_cast<off_t>(sizeof(ClockOffsetLayout));
  if (fresh && ::ftruncate(fd, sizeof(ClockOffsetLayout)) != 0) {
    const int e = errno;
    ::close(fd);
    throw std::system_error(e, std::generic_category(), "clock offset file " + path_.string() + ": ftruncate");
  }
  void* p = ::mmap(nullptr, sizeof(ClockOffsetLayout), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int e = errno;
  ::close(fd);
  if (p == MAP_FAILED) throw std::system_error(e, std::generic_category(), "clock offset file " + path_.string() + ": mmap");
  map_ = static_cast<ClockOffsetLayout*>(p);
  if (fresh || map_->magic != kClockOffsetMagic) {
    write(map_, 0, 0, 0);
    __atomic_store_n(&map_->magic, kClockOffsetMagic, __ATOMIC_RELEASE);
  }
}

ClockOffsetFile::~ClockOffsetFile() {
  if (map_ != nullptr) ::munmap(map_, sizeof(ClockOffsetLayout));
}

void ClockOffsetFile::set(std::chrono::nanoseconds offset, std::int64_t drift_ppm) {
  write(map_, offset.count(), drift_ppm, realtime_ns());
}

void ClockOffsetFile::reset() noexcept { write(map_, 0, 0, 0); }

std::chrono::nanoseconds ClockOffsetFile::current() const { return std::chrono::nanoseconds(offset_of(*map_, realtime_ns())); }

std::filesystem::path clock_shim_library() {
  if (const char* env = std::getenv("FENCECHECK_CLOCKSHIM"); env != nullptr && *env != '\0')
    return ::access(env, R_OK) == 0 ? std::filesystem::path(env) : std::filesystem::path();
  const auto p = process::self_bin_dir() / "libfencecheck-clockshim.so";
  return ::access(p.c_str(), R_OK) == 0 ? p : std::filesystem::path();
}

}  // namespace fencecheck::faults
