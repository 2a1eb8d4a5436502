// fencecheck — one process's wall-clock offset, as the clock shim reads it (faults/clockshim/
// clock_shim.cpp, preloaded into an embedded server: docs/lock-service-redlock.md, "How the clock
// jump works") and the harness writes it (ClockOffsetFile; the clock-jump fault kind,
// faults/kinds/clock_jump.cpp).
//
// The file is one ClockOffsetLayout (64 bytes), created at its full size before the process that
// reads it starts, mapped shared by both sides, and never truncated (a reader of a shorter mapping
// would get SIGBUS). Writes follow a seqlock: seq odd while a write is under way, then even again;
// a reader retries while seq is odd or changed during its read (Linux's own seqcount, include/
// linux/seqlock.h, in user space). The machine's clock is never touched.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>

namespace fencecheck::faults {

/// "FCCLOCK1" as a little-endian integer: a file with another magic gives no offset.
inline constexpr std::uint64_t kClockOffsetMagic = 0x314b434f4c434346ULL;

/// The shared file's layout. offset(t) = offset_ns + (t - drift_since_ns) * drift_ppm / 1e6, t being
/// the kernel's CLOCK_REALTIME in ns (so a drift of +1000 ppm gains 1 ms per real second after
/// drift_since_ns, and nothing before it). Plain data; read and written with atomic builtins.
struct ClockOffsetLayout {
  std::uint64_t magic;
  std::uint64_t seq;             ///< seqlock: odd while the harness writes
  std::int64_t offset_ns;        ///< the step: added to the wall clock
  std::int64_t drift_ppm;        ///< parts per million the clock gains (negative: loses)
  std::int64_t drift_since_ns;   ///< kernel realtime (ns) from which drift_ppm counts
  std::int64_t reserved[3];
};
static_assert(sizeof(ClockOffsetLayout) == 64);

/// What a drift of `ppm` parts per million adds over `elapsed_ns`: elapsed * ppm / 1e6, split so
/// that no product overflows int64 for |ppm| <= 1e6 and |elapsed| below 290 years (no __int128:
/// ISO C++ has none). Pure; the shim and the writer both use it.
[[nodiscard]] constexpr std::int64_t drift_ns(std::int64_t elapsed_ns, std::int64_t ppm) {
  return (elapsed_ns / 1000000) * ppm + (elapsed_ns % 1000000) * ppm / 1000000;
}
static_assert(drift_ns(1'000'000'000, 1'000'000) == 1'000'000'000);
static_assert(drift_ns(2'500'000, 200'000) == 500'000);
static_assert(drift_ns(-3'000'000'000, -500'000) == 1'500'000'000);

/// The harness's side: creates (or opens) the file and writes the offset the shim reads.
/// Not thread-safe: one writer (the harness's fault thread, or `fencecheck cleanup`).
class ClockOffsetFile {
 public:
  /// Opens `path`, creating it with no offset when missing (or when its size or magic is not the
  /// layout's). Throws std::system_error when it cannot be created or mapped.
  explicit ClockOffsetFile(std::filesystem::path path);
  ~ClockOffsetFile();
  ClockOffsetFile(const ClockOffsetFile&) = delete;
  ClockOffsetFile& operator=(const ClockOffsetFile&) = delete;

  /// Sets a step of `offset` and a drift of `drift_ppm` counted from now (the drift so far is
  /// folded into the step first, so the clock does not jump when only the rate changes). Takes
  /// effect at the reader's next clock call.
  void set(std::chrono::nanoseconds offset, std::int64_t drift_ppm);
  /// offset 0, drift 0: the reader's clock is the kernel's again. Never throws.
  void reset() noexcept;
  /// The offset the reader sees now (step plus drift so far).
  [[nodiscard]] std::chrono::nanoseconds current() const;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  ClockOffsetLayout* map_ = nullptr;
};

/// LD_PRELOAD's value for the shim, beside the fencecheck executable (process::self_bin_dir():
/// bin/libfencecheck-clockshim.so), or empty when it is not there. FENCECHECK_CLOCKSHIM overrides.
[[nodiscard]] std::filesystem::path clock_shim_library();

/// The environment variable that names the offset file to the shim.
inline constexpr const char* kClockFileVariable = "FENCECHECK_CLOCK_FILE";

}  // namespace fencecheck::faults
