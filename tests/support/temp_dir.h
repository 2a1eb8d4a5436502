// fencecheck tests and benchmarks — a fresh temporary directory, removed at scope exit. The one
// copy for tests/store, tests/worker, tests/observability and bench/ (each used to carry its own).
#pragma once

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace fencecheck::testing {

/// Creates `<root>/fencecheck-<tag>-XXXXXX` (mkdtemp(3): unique, mode 0700) and removes it with
/// everything in it when destroyed (errors on removal are ignored: a test must not throw from a
/// destructor). root defaults to std::filesystem::temp_directory_path() ($TMPDIR, else /tmp) and
/// is created when missing. Throws std::runtime_error naming the path when it cannot be created.
/// Not copyable; not thread-safe (one owner).
class TempDir {
 public:
  explicit TempDir(const std::string& tag = "test", std::filesystem::path root = {}) {
    if (root.empty()) root = std::filesystem::temp_directory_path();
    std::filesystem::create_directories(root);
    std::string tmpl = (root / ("fencecheck-" + tag + "-XXXXXX")).string();
    if (::mkdtemp(tmpl.data()) == nullptr)
      throw std::runtime_error("cannot create a temporary directory " + tmpl + ": " + std::strerror(errno));
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace fencecheck::testing
