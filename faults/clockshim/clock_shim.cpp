// fencecheck — the clock shim: an LD_PRELOAD library that moves one process's wall clock while it
// runs, without touching the machine's clock (the clock-jump fault kind, faults/kinds/clock_jump.cpp;
// docs/lock-service-redlock.md, "How the clock jump works").
//
// Why a shim of our own. Redis expires keys by its wall clock (mstime(): gettimeofday). Time
// namespaces (time_namespaces(7)) move only CLOCK_MONOTONIC and CLOCK_BOOTTIME. libfaketime, the
// obvious tool, cannot be preloaded into Debian's redis-server 7: the server is linked with
// jemalloc, whose initialisation calls clock_gettime before libfaketime has finished its own
// (dlsym, which allocates), and libfaketime gives up with "Cannot recover from unexpected recursive
// calls to clock_gettime()" (tried here with FAKETIME_DONT_FAKE_MONOTONIC=1, FAKETIME_NO_CACHE=1 and
// FAKETIME_TIMESTAMP_FILE; libfaketime issues #130 and #327, open since 2018: "we don't have a
// solution for it on libfaketime's end"). This shim never resolves the real functions with dlsym:
// it asks the kernel itself (syscall(SYS_clock_gettime)), so nothing it does can call back into it,
// and it needs no allocation at all.
//
// What it shifts: clock_gettime of CLOCK_REALTIME, CLOCK_REALTIME_COARSE, CLOCK_REALTIME_ALARM and
// CLOCK_TAI; gettimeofday; time. Every other clock (CLOCK_MONOTONIC, CLOCK_BOOTTIME, the CPU
// clocks) is the kernel's, unchanged: a real clock step moves the wall clock only, and Redis's own
// timers run on the monotonic clock. Calls inside glibc that do not go through these symbols (few)
// are not shifted. x86_64 and aarch64 Linux (64-bit time_t).
//
// Where the offset comes from: the file named by FENCECHECK_CLOCK_FILE, mapped shared and
// read-only at the first clock call; the harness rewrites it while the process runs
// (fencecheck/faults/clock_offset.h, ClockOffsetFile, which defines its layout and its seqlock).
// offset(t) = offset_ns + (t - drift_since_ns) * drift_ppm / 1e6 when drift_ppm != 0 (t: the
// kernel's realtime in ns). No variable, a missing or short file, or a wrong magic: no offset.
//
// Thread-safety: any thread may call in at any time, also during the process's start-up; the
// mapping is made once (a compare-and-swap decides who maps; the others see no offset until it is
// mapped). Async-signal-safe, like the calls it replaces.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>

#include "fencecheck/faults/clock_offset.h"

namespace {

using fencecheck::faults::ClockOffsetLayout;

enum : int { kUnmapped = 0, kMapping = 1, kMapped = 2, kAbsent = 3 };
int g_state = kUnmapped;
const ClockOffsetLayout* g_layout = nullptr;

/// The kernel's clock, without the vDSO (slower by a system call, but it cannot recurse).
long kernel_clock(clockid_t id, struct timespec* ts) { return syscall(SYS_clock_gettime, static_cast<long>(id), ts); }

const ClockOffsetLayout* layout() {
  int state = __atomic_load_n(&g_state, __ATOMIC_ACQUIRE);
  if (state == kMapped) return g_layout;
  if (state != kUnmapped) return nullptr;
  int expected = kUnmapped;
  if (!__atomic_compare_exchange_n(&g_state, &expected, kMapping, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    return nullptr;
  const char* path = std::getenv("FENCECHECK_CLOCK_FILE");
  const ClockOffsetLayout* mapped = nullptr;
  if (path != nullptr && *path != '\0') {
    // Every argument as a long: syscall(2) is variadic and reads each as a full register, so an
    // int (a literal 0 offset) would leave garbage in its upper half (a mapping past the end of
    // the file, and SIGBUS at the first read: seen in one start of five).
    const long fd = syscall(SYS_openat, static_cast<long>(AT_FDCWD), path, static_cast<long>(O_RDONLY | O_CLOEXEC));
    if (fd >= 0) {
      void* p = reinterpret_cast<void*>(syscall(SYS_mmap, static_cast<long>(0), static_cast<long>(sizeof(ClockOffsetLayout)),
                                                static_cast<long>(PROT_READ), static_cast<long>(MAP_SHARED), fd,
                                                static_cast<long>(0)));
      syscall(SYS_close, fd);
      // A file shorter than the layout maps, but reading past its end raises SIGBUS: the harness
      // creates it at its full size before the process starts, and never truncates it.
      if (p != MAP_FAILED && reinterpret_cast<unsigned long>(p) < static_cast<unsigned long>(-4096L))
        mapped = static_cast<const ClockOffsetLayout*>(p);
    }
  }
  if (mapped != nullptr && mapped->magic != fencecheck::faults::kClockOffsetMagic) mapped = nullptr;
  g_layout = mapped;
  __atomic_store_n(&g_state, mapped != nullptr ? kMapped : kAbsent, __ATOMIC_RELEASE);
  return mapped;
}

/// The offset in ns at kernel realtime `now_ns`: a consistent read of the seqlock.
std::int64_t offset_at(std::int64_t now_ns) {
  const ClockOffsetLayout* l = layout();
  if (l == nullptr) return 0;
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const std::uint64_t seq = __atomic_load_n(&l->seq, __ATOMIC_ACQUIRE);
    if (seq & 1U) continue;  // the harness is writing
    const std::int64_t offset = __atomic_load_n(&l->offset_ns, __ATOMIC_RELAXED);
    const std::int64_t ppm = __atomic_load_n(&l->drift_ppm, __ATOMIC_RELAXED);
    const std::int64_t since = __atomic_load_n(&l->drift_since_ns, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&l->seq, __ATOMIC_RELAXED) != seq) continue;
    if (ppm == 0) return offset;
    return offset + fencecheck::faults::drift_ns(now_ns - since, ppm);
  }
  return 0;  // a writer that died mid-write (kill -9): no offset rather than a torn one
}

bool shifted(clockid_t id) {
  return id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE || id == CLOCK_REALTIME_ALARM || id == CLOCK_TAI;
}

void shift(struct timespec* ts) {
  const std::int64_t now = static_cast<std::int64_t>(ts->tv_sec) * 1000000000 + ts->tv_nsec;
  const std::int64_t t = now + offset_at(now);
  ts->tv_sec = static_cast<time_t>(t / 1000000000);
  ts->tv_nsec = static_cast<long>(t % 1000000000);
  if (ts->tv_nsec < 0) {
    ts->tv_nsec += 1000000000;
    ts->tv_sec -= 1;
  }
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int clock_gettime(clockid_t id, struct timespec* ts) noexcept {
  const long rc = kernel_clock(id, ts);
  if (rc == 0 && shifted(id)) shift(ts);
  return static_cast<int>(rc);
}

// glibc declares gettimeofday's second argument as void* (a struct timezone* in older headers).
__attribute__((visibility("default"))) int gettimeofday(struct timeval* tv, void* tz) noexcept {
  if (tz != nullptr) {
    auto* z = static_cast<struct timezone*>(tz);
    z->tz_minuteswest = 0;
    z->tz_dsttime = 0;
  }
  struct timespec ts {};
  const long rc = kernel_clock(CLOCK_REALTIME, &ts);
  if (rc != 0) return static_cast<int>(rc);
  shift(&ts);
  tv->tv_sec = ts.tv_sec;
  tv->tv_usec = ts.tv_nsec / 1000;
  return 0;
}

__attribute__((visibility("default"))) time_t time(time_t* out) noexcept {
  struct timespec ts {};
  if (kernel_clock(CLOCK_REALTIME, &ts) != 0) return static_cast<time_t>(-1);
  shift(&ts);
  if (out != nullptr) *out = ts.tv_sec;
  return ts.tv_sec;
}

}  // extern "C"
