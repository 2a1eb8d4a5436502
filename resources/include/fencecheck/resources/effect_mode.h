// fencecheck — how a side effect ("webhook", "payout") is guarded by the store: the value of the
// Fencecheck-Effect header on POST /v1/effects/{key} and of fencecheck-worker's --effect.
// Header-only: shared by the store, its client and the worker.
#pragma once

#include <array>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace fencecheck {

/// The guard on one side effect (docs/catalogue-plan.md, "Side-effect endpoint").
enum class EffectMode {
  kFenced,      ///< "fenced": the same token check as a write to the key (the correct design)
  kUnfenced,    ///< "unfenced": always applied, whatever the token (partial fencing: a mistake)
  kIdempotent,  ///< "idempotent": applied once per (key, effect id); later requests are ignored
};

namespace detail {
inline constexpr std::array<std::pair<EffectMode, std::string_view>, 3> kEffectModeNames{{
    {EffectMode::kFenced, "fenced"},
    {EffectMode::kUnfenced, "unfenced"},
    {EffectMode::kIdempotent, "idempotent"},
}};
}  // namespace detail

/// The wire name: "fenced", "unfenced", "idempotent". Total; pure; thread-safe.
[[nodiscard]] inline std::string_view effect_mode_name(EffectMode mode) {
  for (const auto& [m, n] : detail::kEffectModeNames)
    if (m == mode) return n;
  return "fenced";
}

/// The mode for a wire name (exact, case-sensitive); nullopt for anything else. Pure; thread-safe.
[[nodiscard]] inline std::optional<EffectMode> effect_mode_from_name(std::string_view name) {
  for (const auto& [m, n] : detail::kEffectModeNames)
    if (n == name) return m;
  return std::nullopt;
}

/// Every wire name, in declaration order. Pure; thread-safe.
[[nodiscard]] inline std::vector<std::string_view> effect_mode_names() {
  std::vector<std::string_view> out;
  for (const auto& [m, n] : detail::kEffectModeNames) out.push_back(n);
  return out;
}

}  // namespace fencecheck
