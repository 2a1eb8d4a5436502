// fencecheck — the scenario loader's reader of one kind's fields, shared by every axis that has
// kinds (the resource axis, resource_kind.h; the lock-service axis, lock_service_kind.h; the fault
// axis, fault_kind.h): a kind
// validates its own fields through it and never builds file:line:col locations itself. The loader
// (harness/scenario, scenario.cpp) implements it; tests implement it over JSON
// (tests/support/fake_resource_fields.h). Here, below both axes, so that neither includes the other.
//
// Thread-safety: an implementation is read by one kind's parse() at a time.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fencecheck {

/// One kind's mapping of a scenario (`resource:`, `lock_service:`, a fault), as the loader hands it to the
/// kind. Every accessor that fails throws the loader's error (ScenarioError "file:line:col:
/// message") located at the field; a kind never builds locations itself.
class KindFields {
 public:
  virtual ~KindFields() = default;
  /// The scenario file's name, for messages that must name it.
  [[nodiscard]] virtual std::string file() const = 0;
  /// True when `name` is present.
  [[nodiscard]] virtual bool has(std::string_view name) const = 0;
  /// The field as a string (a scalar); throws at the field when it is not one.
  [[nodiscard]] virtual std::string string(std::string_view name) const = 0;
  /// The field as a list of strings; a single string is a list of one. Throws at the field (or at
  /// the item) when it is neither, or when the list is empty. Items are named "<field>[i]" in
  /// fail().
  [[nodiscard]] virtual std::vector<std::string> string_list(std::string_view name) const = 0;
  /// The field as an integer in [min, max]; throws at the field otherwise.
  [[nodiscard]] virtual std::int64_t integer(std::string_view name, std::int64_t min, std::int64_t max) const = 0;
  /// The field as a duration ("200ms", "2s"; scenario.h's parse_duration); throws otherwise.
  [[nodiscard]] virtual std::chrono::nanoseconds duration(std::string_view name) const = 0;
  /// The field as a boolean; throws otherwise.
  [[nodiscard]] virtual bool boolean(std::string_view name) const = 0;
  /// The field as a duration that may be zero ("0ms"), never negative; throws otherwise.
  [[nodiscard]] virtual std::chrono::nanoseconds duration_or_zero(std::string_view name) const = 0;
  /// The field as a percentage from lo_pct to hi_pct (in percent, both inclusive) as a fraction
  /// ("2%" -> 0.02; fencecheck/proto/units.h's parse_percent); throws at the field otherwise, with
  /// `example` ("2%") showing the form when the value is no percentage at all.
  [[nodiscard]] virtual double percentage(std::string_view name, double lo_pct, double hi_pct,
                                          std::string_view example) const = 0;
  /// The field as a mapping of environment variable names ([A-Za-z_][A-Za-z0-9_]*) to string
  /// values, sorted by name; throws at the field (or at the key) when it is not a mapping of
  /// scalars, a key is no variable name, or a key repeats. Keys are named "<field>.<key>" in fail().
  [[nodiscard]] virtual std::vector<std::pair<std::string, std::string>> env_map(std::string_view name) const = 0;
  /// The directory relative paths of this scenario are taken from (the scenario file's own,
  /// absolute; the working directory for text that came from no file), as for workers' commands.
  [[nodiscard]] virtual std::filesystem::path base_dir() const = 0;
  /// The field as one of `names` (its index); throws "unknown <what> ...; expected one of: ...".
  [[nodiscard]] virtual std::size_t choice(std::string_view name, const std::vector<std::string_view>& names,
                                           std::string_view what) const = 0;
  /// Throws the loader's error at the field `name` ("" = the kind's mapping itself; "write[1]" =
  /// the second item of a list). With
  /// `offset`, at that byte offset inside the field's string value (line and column counted
  /// through a multi-line block scalar), so an error in an SQL statement points at the word.
  [[noreturn]] virtual void fail(std::string_view name, const std::string& message,
                                 std::optional<std::size_t> offset = std::nullopt) const = 0;
};

}  // namespace fencecheck
