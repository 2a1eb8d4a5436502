// fencecheck — a fault schedule's plan: seed -> the faults it will fire, when, of what kind, for
// how long, and by which target rule (docs/scenario-format.md, "schedule").
//
// The generator is a pure function of (ScheduleSpec, seed) whose output is the same on every
// platform and standard library: its random numbers come from SplitMix64 written out here (Steele,
// Lea and Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014; the constants of
// Vigna's reference splitmix64.c), and integers in a range are drawn by rejection (no modulo bias),
// never with std::uniform_int_distribution, whose mapping differs between libstdc++ and libc++.
// So a night's schedule can be replayed from the seed written in schedule.jsonl.
//
// Thread-safety: everything here is pure or a value type; a SplitMix64 is not shared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "fencecheck/harness/scenario.h"

namespace fencecheck::harness {

/// SplitMix64: a 64-bit state advanced by the golden-ratio increment and mixed (Vigna's
/// splitmix64.c). next() of a generator seeded with 0 gives 0xe220a8397b1dcdaf first.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  /// A uniform integer in [lo, hi] (lo <= hi; the full int64 range is allowed), by rejection of
  /// the top partial block of 2^64 so that no value is favoured.
  std::int64_t between(std::int64_t lo, std::int64_t hi);

 private:
  std::uint64_t state_;
};

/// One fault the schedule will fire.
struct PlannedFault {
  std::size_t index = 0;   ///< 0-based, in firing order
  Duration at{};           ///< when, after the run starts (whole ms)
  /// kind, the kind's parameters and the drawn duration (whole ms); target: "" for a worker kind
  /// (chosen by `rule` when it fires), kLockServiceTarget for lock-service-restart and for a
  /// member target (`member`, its selector: the members are resolved when it fires); no trigger.
  FaultSpec fault;
  ScheduleTarget rule = ScheduleTarget::kHolders;  ///< unused when the target is not a worker
  std::size_t kind_index = 0;  ///< which entry of ScheduleSpec::faults it was drawn from
  bool operator==(const PlannedFault&) const = default;
};

/// The schedule's plan for `seed`. Pure; the same (spec, seed) gives the same plan everywhere.
/// The first fault starts one interval after the run starts; for each fault, in order: its kind
/// (weighted), its duration (uniform whole ms in the kind's range), then the interval to the next
/// fault's start (uniform whole ms in the range). A fault due while max_at_once planned faults are
/// still in effect starts when enough of them have ended. The plan stops at the first fault that
/// would not end by the schedule's duration, so every fault heals before the workers are stopped.
[[nodiscard]] std::vector<PlannedFault> plan_schedule(const ScheduleSpec& spec, std::uint64_t seed);

/// Which of `candidates` (n >= 1, in the caller's stable order, e.g. sorted worker ids) the
/// `index`-th scheduled fault hits: a draw of its own from (seed, index), so one fault's choice does
/// not shift the plan or the others' choices. Pure.
[[nodiscard]] std::size_t pick_target(std::uint64_t seed, std::size_t index, std::size_t n);

}  // namespace fencecheck::harness
