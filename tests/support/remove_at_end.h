// fencecheck tests — temporary paths removed when the test program ends, unless a test failed
// (then they are kept for the post-mortem and listed on stderr). A run directory with its etcd
// data is 60-180 MB; tests that left theirs filled /tmp by gigabytes over repeated runs.
#pragma once

#include <filesystem>
#include <iostream>
#include <mutex>
#include <vector>

#include <gtest/gtest.h>

namespace fencecheck::testing {

namespace detail {

inline std::vector<std::filesystem::path>& paths_to_remove() {
  static std::vector<std::filesystem::path> paths;
  return paths;
}
inline std::mutex& paths_to_remove_mu() {
  static std::mutex mu;
  return mu;
}

/// The gtest environment whose TearDown (after the last test) removes the registered paths.
class RemoveAtEnd : public ::testing::Environment {
 public:
  void TearDown() override {
    const std::lock_guard lock(paths_to_remove_mu());
    if (::testing::UnitTest::GetInstance()->failed_test_count() > 0) {
      for (const auto& p : paths_to_remove()) std::cerr << "kept for inspection (a test failed): " << p.string() << "\n";
      return;
    }
    for (const auto& p : paths_to_remove()) {
      std::error_code ec;
      std::filesystem::remove_all(p, ec);
    }
  }
};
/// Registered once per test program (an inline variable: one instance however many files include
/// this header), during static initialisation, before RUN_ALL_TESTS.
inline const bool kRemoveAtEndRegistered = (::testing::AddGlobalTestEnvironment(new RemoveAtEnd), true);

}  // namespace detail

/// Registers `path` (a file or a directory tree) for removal when the test program ends; returns
/// it. Thread-safe. Registering a path twice is harmless.
inline std::filesystem::path remove_at_end(std::filesystem::path path) {
  const std::lock_guard lock(detail::paths_to_remove_mu());
  detail::paths_to_remove().push_back(path);
  return path;
}

}  // namespace fencecheck::testing
