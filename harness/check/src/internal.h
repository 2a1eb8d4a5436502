// fencecheck — helpers shared by the checkers (checkers.cpp) and the figures (analysis.cpp), so
// that a figure and the anomaly it explains always count the same things. Private to the library.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fencecheck/harness/analysis.h"
#include "fencecheck/harness/checker.h"
#include "fencecheck/harness/history.h"
#include "fencecheck/proto/readback.h"

namespace fencecheck::harness::detail {

/// Side-effect events carry the key "<job key>.effect" (catalogue-plan.md, "Events added").
inline constexpr std::string_view kEffectSuffix = ".effect";
[[nodiscard]] bool is_effect_key(std::string_view key);
/// "ledger.effect" -> "ledger"; any other key unchanged.
[[nodiscard]] std::string effect_base(std::string_view key);

/// A write the fence refused: write.fail with a token and a high_water above it.
[[nodiscard]] bool is_fenced_rejection(const Event& e);

/// Fenced rejections per (client, token), from the history and the read-back; sorted.
[[nodiscard]] std::vector<TokenRejections> rejections_per_token(const History& history, const ReadBack& readback);

/// The identity of a side effect: its id without a leading "<client>:".
[[nodiscard]] std::string effect_identity(const EffectRecord& e);

/// One side effect applied more than once, per the duplicate-effect rule (checkers.h).
struct EffectDuplicates {
  std::string key;
  std::string identity;
  std::vector<const EffectRecord*> applications;  ///< every applied one, in seq order
  std::vector<const EffectRecord*> duplicates;    ///< those whose token was not above an earlier one's
};
/// Every side effect with at least one duplicate application, sorted by key, identity.
[[nodiscard]] std::vector<EffectDuplicates> effect_duplicates(const ReadBack& readback);

/// Counter figures: every key of the read-back's counters and every key with an acknowledged or
/// unknown increment (write.ok / write.info without a chunk, not a side effect), sorted by key.
[[nodiscard]] std::vector<CounterFigure> counter_figures(const History& history, const ReadBack& readback);

/// The lease TTL to judge liveness with: the context's, else the largest ttl_ms of the workers'
/// acquire.ok / acquire.invoke events, else nullopt.
[[nodiscard]] std::optional<std::chrono::nanoseconds> lease_ttl_of(const History& history, const CheckContext& context);

/// Index of the last fault.heal, if any.
[[nodiscard]] std::optional<std::size_t> last_heal(const History& history);

}  // namespace fencecheck::harness::detail
