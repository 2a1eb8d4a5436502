// fencecheck tests — a fencecheck::KindFields over a JSON object, standing in for the scenario
// loader (harness/scenario/src/scenario.cpp's Fields), so a kind's parse() (resource or
// lock-service) can be tested alone: scalars as YAML gives them (string() of an integer is its text, integer() of a numeric
// string its value), and fail() throws FieldError with the field, the message and the offset, so a
// test asserts where the loader's error would point. Not thread-safe.
#pragma once

#include <filesystem>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "fencecheck/proto/kind_fields.h"
#include "fencecheck/proto/units.h"

namespace fencecheck::testing {

/// What FakeFields::fail throws. what() is the message alone (the loader prefixes the location).
struct FieldError : std::runtime_error {
  FieldError(std::string f, const std::string& m, std::optional<std::size_t> o)
      : std::runtime_error(m), field(std::move(f)), message(m), offset(o) {}
  std::string field;
  std::string message;
  std::optional<std::size_t> offset;
};

class FakeFields final : public fencecheck::KindFields {
 public:
  using Value = nlohmann::json;
  FakeFields() = default;
  /// The fields of a JSON object (a normalized configuration, parse()'s output, parses again).
  explicit FakeFields(nlohmann::json j) : j_(std::move(j)) {}
  FakeFields(std::initializer_list<std::pair<const std::string, Value>> v) {
    for (const auto& [k, val] : v) j_[k] = val;
  }
  static FakeFields from_json(const nlohmann::json& j) { return FakeFields(j); }

  std::string file() const override { return "test.yaml"; }
  bool has(std::string_view name) const override { return j_.contains(std::string(name)); }
  std::string string(std::string_view name) const override {
    const auto& v = at(name);
    if (v.is_number_integer()) return std::to_string(v.get<std::int64_t>());
    if (!v.is_string()) fail(name, "expected a string");
    return v.get<std::string>();
  }
  std::vector<std::string> string_list(std::string_view name) const override {
    const auto& v = at(name);
    if (!v.is_array()) return {string(name)};
    if (v.empty()) fail(name, "expected a string or a non-empty list of strings");
    std::vector<std::string> out;
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_string()) fail(std::string(name) + "[" + std::to_string(i) + "]", "expected a string");
      out.push_back(v[i].get<std::string>());
    }
    return out;
  }
  std::int64_t integer(std::string_view name, std::int64_t min, std::int64_t max) const override {
    const auto& v = at(name);
    std::int64_t n = 0;
    if (v.is_number_integer()) {
      n = v.get<std::int64_t>();
    } else {
      try {
        const std::string s = string(name);
        std::size_t used = 0;
        n = std::stoll(s, &used);
        if (used != s.size()) throw std::invalid_argument("trailing");
      } catch (const std::logic_error&) {
        fail(name, "must be an integer");
      }
    }
    if (n < min || n > max) fail(name, "must be in " + std::to_string(min) + ".." + std::to_string(max));
    return n;
  }
  /// A duration as the loader reads it (fencecheck/proto/units.h's parse_duration: "1.5s"),
  /// above zero.
  std::chrono::nanoseconds duration(std::string_view name) const override {
    const auto d = duration_or_zero(name);
    if (d.count() == 0) fail(name, "expected a positive duration, got \"" + string(name) + "\"");
    return d;
  }
  std::chrono::nanoseconds duration_or_zero(std::string_view name) const override {
    const auto d = parse_duration(string(name));
    if (!d) fail(name, "expected a duration such as 200ms or 2s");
    return *d;
  }
  double percentage(std::string_view name, double lo_pct, double hi_pct, std::string_view example) const override {
    const auto f = parse_percent(string(name));
    if (!f) fail(name, "expected a percentage like \"" + std::string(example) + "\"");
    if (!(*f * 100.0 >= lo_pct) || *f * 100.0 > hi_pct)
      fail(name, "expected a percentage between " + format_percent(lo_pct / 100.0) + " and " +
                     format_percent(hi_pct / 100.0));
    return *f;
  }
  bool boolean(std::string_view name) const override {
    const auto& v = at(name);
    if (!v.is_boolean()) fail(name, "expected true or false");
    return v.get<bool>();
  }
  std::vector<std::pair<std::string, std::string>> env_map(std::string_view name) const override {
    const auto& v = at(name);
    if (!v.is_object()) fail(name, "expected a mapping of variable names to values");
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& [k, val] : v.items()) {
      if (!val.is_string()) fail(std::string(name) + "." + k, "expected a string value");
      out.emplace_back(k, val.get<std::string>());
    }
    return out;  // nlohmann's object is sorted by key
  }
  std::filesystem::path base_dir() const override { return base_dir_; }
  /// What base_dir() returns (default: the working directory).
  void set_base_dir(std::filesystem::path d) { base_dir_ = std::move(d); }
  std::size_t choice(std::string_view name, const std::vector<std::string_view>& names,
                     std::string_view what) const override {
    const std::string s = string(name);
    for (std::size_t i = 0; i < names.size(); ++i)
      if (names[i] == s) return i;
    fail(name, "unknown " + std::string(what));
  }
  [[noreturn]] void fail(std::string_view name, const std::string& message,
                         std::optional<std::size_t> offset = std::nullopt) const override {
    throw FieldError(std::string(name), message, offset);
  }

 private:
  const nlohmann::json& at(std::string_view name) const {
    auto it = j_.find(std::string(name));
    if (it == j_.end()) fail(name, "missing");
    return *it;
  }
  nlohmann::json j_ = nlohmann::json::object();
  std::filesystem::path base_dir_ = std::filesystem::current_path();
};

}  // namespace fencecheck::testing
