// fencecheck tests — a ResourceFields over a JSON object, standing in for the scenario loader: its
// fail() throws FieldError with the field, the message and the offset, so tests can assert where
// an error would point.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fencecheck/resources/resource_kind.h"

namespace fencecheck::testing {

struct FieldError : std::runtime_error {
  FieldError(std::string f, const std::string& m, std::optional<std::size_t> o)
      : std::runtime_error(f + ": " + m), field(std::move(f)), message(m), offset(o) {}
  std::string field;
  std::string message;
  std::optional<std::size_t> offset;
};

/// The loader's contract as far as the postgres kind uses it. Not thread-safe.
class FakeFields final : public resources::ResourceFields {
 public:
  explicit FakeFields(nlohmann::json j) : j_(std::move(j)) {}
  std::string file() const override { return "test.yaml"; }
  bool has(std::string_view name) const override { return j_.contains(std::string(name)); }
  std::string string(std::string_view name) const override {
    const auto& v = at(name);
    if (!v.is_string()) fail(name, "expected a string");
    return v.get<std::string>();
  }
  std::vector<std::string> string_list(std::string_view name) const override {
    const auto& v = at(name);
    if (v.is_string()) return {v.get<std::string>()};
    if (!v.is_array() || v.empty()) fail(name, "expected a string or a non-empty list of strings");
    std::vector<std::string> out;
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_string()) fail(std::string(name) + "[" + std::to_string(i) + "]", "expected a string");
      out.push_back(v[i].get<std::string>());
    }
    return out;
  }
  std::int64_t integer(std::string_view name, std::int64_t, std::int64_t) const override { return at(name).get<std::int64_t>(); }
  std::chrono::nanoseconds duration(std::string_view name) const override { fail(name, "no durations here"); }
  bool boolean(std::string_view name) const override { return at(name).get<bool>(); }
  std::size_t choice(std::string_view name, const std::vector<std::string_view>& names, std::string_view) const override {
    const std::string s = string(name);
    for (std::size_t i = 0; i < names.size(); ++i)
      if (names[i] == s) return i;
    fail(name, "unknown choice");
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
  nlohmann::json j_;
};

}  // namespace fencecheck::testing
