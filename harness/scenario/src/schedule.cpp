#include "fencecheck/harness/schedule.h"

#include <algorithm>
#include <chrono>
#include <limits>

namespace fencecheck::harness {

std::int64_t SplitMix64::between(std::int64_t lo, std::int64_t hi) {
  const std::uint64_t span = static_cast<std::uint64_t>(hi) - static_cast<std::uint64_t>(lo);  // hi - lo, mod 2^64
  if (span == std::numeric_limits<std::uint64_t>::max()) return static_cast<std::int64_t>(next());
  const std::uint64_t range = span + 1;
  // The largest multiple of range that fits: draws at or above it would favour the low values.
  const std::uint64_t limit = std::numeric_limits<std::uint64_t>::max() - std::numeric_limits<std::uint64_t>::max() % range;
  std::uint64_t x = next();
  while (x >= limit) x = next();
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(lo) + x % range);
}

namespace {

using std::chrono::milliseconds;

Duration draw_ms(SplitMix64& rng, Duration lo, Duration hi) {
  const auto a = std::chrono::duration_cast<milliseconds>(lo).count();
  const auto b = std::chrono::duration_cast<milliseconds>(hi).count();
  return milliseconds(rng.between(a, b));
}

}  // namespace

std::vector<PlannedFault> plan_schedule(const ScheduleSpec& spec, std::uint64_t seed) {
  std::vector<PlannedFault> out;
  if (spec.faults.empty() || spec.max_at_once < 1) return out;
  std::int64_t total_weight = 0;
  for (const auto& k : spec.faults) total_weight += k.weight;
  if (total_weight < 1) return out;
  SplitMix64 rng(seed);
  std::vector<Duration> ends;  // end times of the planned faults still possibly in effect
  Duration t = draw_ms(rng, spec.min_interval, spec.max_interval);
  while (true) {
    // The kind, by weight.
    std::int64_t r = rng.between(0, total_weight - 1);
    std::size_t k = 0;
    while (r >= spec.faults[k].weight) r -= spec.faults[k++].weight;
    const ScheduleKind& kind = spec.faults[k];
    const Duration d = draw_ms(rng, kind.min_duration, kind.max_duration);
    // The at-once limit: wait for enough of the faults in effect at t to end.
    std::erase_if(ends, [&](Duration e) { return e <= t; });
    if (static_cast<std::int64_t>(ends.size()) >= spec.max_at_once) {
      std::sort(ends.begin(), ends.end());
      t = ends[ends.size() - static_cast<std::size_t>(spec.max_at_once)];
      std::erase_if(ends, [&](Duration e) { return e <= t; });
    }
    if (t + d > spec.duration) break;
    PlannedFault p;
    p.index = out.size();
    p.at = t;
    p.fault = kind.fault;
    p.fault.duration = d;
    // A member target (fault.member) is resolved when it fires; a worker, chosen then by the rule.
    p.fault.target = targets_worker(kind.fault.kind) && !kind.fault.member ? std::string() : std::string(kLockServiceTarget);
    p.rule = kind.target;
    p.kind_index = k;
    out.push_back(std::move(p));
    ends.push_back(t + d);
    t += draw_ms(rng, spec.min_interval, spec.max_interval);
  }
  return out;
}

std::size_t pick_target(std::uint64_t seed, std::size_t index, std::size_t n) {
  if (n <= 1) return 0;
  // A generator of its own per fault: seed and index mixed through one SplitMix64 step.
  SplitMix64 mix(seed ^ (0xd1b54a32d192ed03ULL * (static_cast<std::uint64_t>(index) + 1)));
  SplitMix64 rng(mix.next());
  return static_cast<std::size_t>(rng.between(0, static_cast<std::int64_t>(n) - 1));
}

}  // namespace fencecheck::harness
