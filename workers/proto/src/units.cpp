#include "fencecheck/proto/units.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <limits>

namespace fencecheck {

using Duration = std::chrono::nanoseconds;

namespace {

struct Unit {
  std::string_view name;
  std::int64_t ns;
};
// Longest suffix first so "ms" is not read as "m" + "s". Hours are read ("1h", for long schedules)
// but never written: format_duration keeps minutes ("60m"), as scenario.json always had it.
constexpr std::array<Unit, 6> kUnits{{{"ns", 1}, {"us", 1'000}, {"ms", 1'000'000}, {"s", 1'000'000'000},
                                      {"m", 60'000'000'000}, {"h", 3'600'000'000'000}}};

}  // namespace

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool is_plain_decimal(std::string_view s) {
  if (!s.empty() && (s.front() == '-' || s.front() == '+')) s.remove_prefix(1);
  auto dot = s.find('.');
  if (dot == std::string_view::npos) return all_digits(s);
  return all_digits(s.substr(0, dot)) && all_digits(s.substr(dot + 1));
}

std::optional<Duration> parse_duration(std::string_view text, std::string* error) {
  auto fail = [&](std::string why) -> std::optional<Duration> {
    if (error) *error = std::move(why);
    return std::nullopt;
  };
  if (text.empty()) return fail("empty");
  if (is_plain_decimal(text)) return fail("no unit");
  const Unit* unit = nullptr;
  std::string_view number;
  for (const auto& u : kUnits) {
    // Try two-letter units before "s" and "m".
    if (text.size() > u.name.size() && text.substr(text.size() - u.name.size()) == u.name) {
      std::string_view n = text.substr(0, text.size() - u.name.size());
      if (is_plain_decimal(n)) {
        unit = &u;
        number = n;
        break;
      }
    }
  }
  if (!unit) return fail("not a duration");
  if (number.front() == '-') return fail("negative");
  if (number.front() == '+') number.remove_prefix(1);
  auto dot = number.find('.');
  std::string_view whole = number.substr(0, dot);
  std::string_view frac = dot == std::string_view::npos ? std::string_view{} : number.substr(dot + 1);
  if (whole.empty() && frac.empty()) return fail("not a duration");
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  std::int64_t w = 0;
  if (!whole.empty()) {
    auto [p, ec] = std::from_chars(whole.data(), whole.data() + whole.size(), w);
    if (ec != std::errc() || p != whole.data() + whole.size()) return fail("too large");
  }
  if (w > kMax / unit->ns) return fail("too large");
  std::int64_t ns = w * unit->ns;
  // The fraction must come out as whole nanoseconds.
  std::int64_t scale = unit->ns;
  for (char c : frac) {
    int digit = c - '0';
    if (scale % 10 != 0) {
      if (digit != 0) return fail("finer than a nanosecond");
      continue;
    }
    scale /= 10;
    if (ns > kMax - digit * scale) return fail("too large");
    ns += digit * scale;
  }
  return Duration(ns);
}

std::optional<Duration> parse_signed_duration(std::string_view text, std::string* error) {
  bool negative = false;
  if (!text.empty() && (text.front() == '-' || text.front() == '+')) {
    negative = text.front() == '-';
    text.remove_prefix(1);
    if (!text.empty() && (text.front() == '-' || text.front() == '+')) {
      if (error) *error = "not a duration";
      return std::nullopt;
    }
  }
  auto d = parse_duration(text, error);
  if (!d) return std::nullopt;
  return negative ? -*d : *d;
}

std::string format_duration(Duration d) {
  std::int64_t ns = d.count();
  if (ns == 0) return "0s";
  if (ns < 0) {
    if (ns == std::numeric_limits<std::int64_t>::min()) return std::to_string(ns) + "ns";
    return "-" + format_duration(Duration(-ns));
  }
  for (auto it = kUnits.rbegin(); it != kUnits.rend(); ++it) {
    // 120s reads better than 2m only when it is not whole minutes; prefer s for under 10 minutes.
    if (it->name == "m" && ns < 600'000'000'000) continue;
    if (it->name == "h") continue;
    if (ns % it->ns == 0) return std::to_string(ns / it->ns) + std::string(it->name);
  }
  return std::to_string(ns) + "ns";
}

namespace {

/// The percentage text's number parsed exactly as parse_percent does (from_chars, then / 100).
std::optional<double> percent_value(std::string_view number) {
  double pct = 0;
  auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), pct);
  if (ec != std::errc() || ptr != number.data() + number.size()) return std::nullopt;
  return pct / 100.0;
}

}  // namespace

std::optional<double> parse_percent(std::string_view text) {
  if (text.size() < 2 || text.back() != '%') return std::nullopt;
  text.remove_suffix(1);
  if (!is_plain_decimal(text) || text.front() == '+' || text.front() == '-') return std::nullopt;
  return percent_value(text);  // locale-independent, unlike stod
}

std::string format_percent(double fraction) {
  char buf[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, fraction * 100.0);
    std::string_view text(buf);
    if (text.find_first_of("eE") != std::string_view::npos) continue;  // the loader reads plain decimals only
    if (auto back = percent_value(text); back && *back == fraction) return std::string(text) + "%";
  }
  std::snprintf(buf, sizeof buf, "%.17f", fraction * 100.0);
  std::string text(buf);
  while (text.size() > 1 && text.back() == '0') text.pop_back();
  if (!text.empty() && text.back() == '.') text.pop_back();
  return text + "%";
}

}  // namespace fencecheck
