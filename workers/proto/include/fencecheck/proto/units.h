// fencecheck — durations and percentages as scenarios write them ("200ms", "1.5s", "2%"), read and
// written the same way by every layer: the scenario loader, the fault kinds (faults/kinds/) and the
// reports. One definition below every axis (docs/architecture.md, "Layers").
//
// All functions are pure and thread-safe; none throws except std::bad_alloc.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace fencecheck {

/// Non-empty and every character an ASCII digit.
[[nodiscard]] bool all_digits(std::string_view s);
/// A plain decimal: an optional sign, digits, an optional '.' and digits ("12", "-1.5", "+.5"
/// is not: digits must stand on at least one side of the dot, and "1." and ".5" both count).
[[nodiscard]] bool is_plain_decimal(std::string_view s);

/// Parses "2s", "500ms", "1.5s", "250us", "10ns", "2m", "1h". nullopt (and *error set when given:
/// "empty", "no unit", "not a duration", "negative", "too large", "finer than a nanosecond") for
/// anything else. Zero parses (callers reject it where a positive duration is needed).
[[nodiscard]] std::optional<std::chrono::nanoseconds> parse_duration(std::string_view text, std::string* error = nullptr);
/// The same with an optional sign: "-30s", "+1.5s", "30s" (for clock offsets). Errors as
/// parse_duration's, never "negative".
[[nodiscard]] std::optional<std::chrono::nanoseconds> parse_signed_duration(std::string_view text,
                                                                           std::string* error = nullptr);
/// The shortest exact spelling: 2000000000ns -> "2s", 1500ms -> "1500ms", 90s -> "90s", whole
/// minutes from 10 minutes on ("10m"); a negative duration gets a leading '-' ("-30s").
/// parse_signed_duration(format_duration(d)) == d.
[[nodiscard]] std::string format_duration(std::chrono::nanoseconds d);

/// "12.5%" -> 0.125: a plain decimal without sign, then '%'. nullopt for anything else.
/// parse_percent(format_percent(f)) == f for every fraction format_percent is given.
[[nodiscard]] std::optional<double> parse_percent(std::string_view text);
/// A fraction as the shortest percentage text that reads back to exactly the same fraction:
/// 0.02 -> "2%", 0.125 -> "12.5%", 0.001 -> "0.1%".
[[nodiscard]] std::string format_percent(double fraction);

}  // namespace fencecheck
