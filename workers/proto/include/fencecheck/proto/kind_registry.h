// fencecheck — the registry both kind axes share (resources/registry.cpp for ResourceKind,
// workers/locks/registry.cpp for LockServiceKind; docs/architecture.md, "Adding a kind"): a
// constant table of built-in kinds, one row per kind (static libraries drop self-registering
// objects, and with them the kind), then the kinds registered at run time by tests and out-of-tree
// code, in registration order.
//
// Thread-safety: every member is thread-safe (one mutex guards the registered kinds). Kinds are
// never removed, so a pointer find() or all() gave stays valid as long as the kind itself lives
// (built-in kinds are function-local statics; a registered kind must outlive every use).
#pragma once

#include <filesystem>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fencecheck {

/// `Kind` has `std::string_view name() const` (and, for stop_orphans(), `stop_orphans(run_dir, force)`).
template <class Kind>
class KindRegistry {
 public:
  using Row = const Kind& (*)();
  /// `builtin`: the constant table (it must outlive the registry); `what`: the axis's word for
  /// messages ("resource kind", "lock service kind").
  KindRegistry(std::span<const Row> builtin, std::string_view what) : builtin_(builtin), what_(what) {}

  /// Every kind: the built-in table's order, then the registered ones (a snapshot).
  [[nodiscard]] std::vector<const Kind*> all() const {
    std::vector<const Kind*> out;
    for (Row row : builtin_) out.push_back(&row());
    std::lock_guard lock(mutex_);
    out.insert(out.end(), added_.begin(), added_.end());
    return out;
  }
  /// The kind named `name`, or nullptr.
  [[nodiscard]] const Kind* find(std::string_view name) const {
    for (const Kind* k : all())
      if (k->name() == name) return k;
    return nullptr;
  }
  /// Every kind's name, in all()'s order.
  [[nodiscard]] std::vector<std::string_view> names() const {
    std::vector<std::string_view> out;
    for (const Kind* k : all()) out.push_back(k->name());
    return out;
  }
  /// Every kind's stop_orphans(run_dir, force) (`fencecheck cleanup`), in all()'s order: their
  /// sentences one after another and the sum of what was not stopped. `Report` has `said` (a
  /// vector of strings) and `not_stopped` (an int).
  template <class Report>
  [[nodiscard]] Report stop_orphans(const std::filesystem::path& run_dir, bool force) const {
    Report out;
    for (const Kind* k : all()) {
      Report one = k->stop_orphans(run_dir, force);
      for (auto& line : one.said) out.said.push_back(std::move(line));
      out.not_stopped += one.not_stopped;
    }
    return out;
  }
  /// Adds `kind` after every kind there is. `also()` runs first, under the registry's lock (the
  /// resource axis registers the kind's writer there); when it throws, nothing is added. Throws
  /// std::invalid_argument "<what> "<name>" is already registered" when the name is taken.
  template <class Also>
  void add(const Kind& kind, Also&& also) {
    const std::string name(kind.name());
    std::lock_guard lock(mutex_);
    for (Row row : builtin_)
      if (row().name() == name) throw taken(name, " (built in)");
    for (const Kind* k : added_)
      if (k->name() == name) throw taken(name, "");
    std::forward<Also>(also)();
    added_.push_back(&kind);
  }

 private:
  [[nodiscard]] std::invalid_argument taken(const std::string& name, const char* where) const {
    return std::invalid_argument(std::string(what_) + " \"" + name + "\" is already registered" + where);
  }

  std::span<const Row> builtin_;
  std::string_view what_;
  mutable std::mutex mutex_;
  std::vector<const Kind*> added_;
};

}  // namespace fencecheck
