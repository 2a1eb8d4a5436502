// fencecheck — shared helpers of the libFuzzer targets (tests/fuzz/*.cpp; docs/fuzzing.md).
//
// A target's oracle that fails calls fuzz_fail(), which prints what was wrong and aborts: libFuzzer
// then saves the input as crash-<sha1> and reports it like any sanitizer finding.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>

namespace fencecheck::fuzz {

/// Prints "fuzz oracle: <what>" to stderr and aborts (a crash to libFuzzer). Never returns.
[[noreturn]] inline void fuzz_fail(const std::string& what) {
  std::fprintf(stderr, "fuzz oracle: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

/// A scratch directory of this process, made once: under $FENCECHECK_FUZZ_SCRATCH when set
/// (scripts/fuzz.sh points it into its own scratch directory, so that a crash, which skips the
/// removal at exit, leaves nothing elsewhere), else under /dev/shm when it exists (the store
/// fdatasyncs every record; tmpfs makes that free), else under TMPDIR or /tmp. Removed at a normal
/// exit. Not thread-safe (libFuzzer runs one input at a time per process).
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    std::error_code ec;
    const char* chosen = std::getenv("FENCECHECK_FUZZ_SCRATCH");
    std::filesystem::path base = chosen != nullptr && *chosen != '\0' ? std::filesystem::path(chosen)
                                 : std::filesystem::is_directory("/dev/shm", ec) ? std::filesystem::path("/dev/shm")
                                                                                 : std::filesystem::temp_directory_path();
    std::string tmpl = (base / "fencecheck-fuzz-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) fuzz_fail("cannot make a scratch directory under " + base.string());
    static const std::filesystem::path made = tmpl;
    std::atexit([] {
      std::error_code e;
      std::filesystem::remove_all(made, e);
    });
    return made;
  }();
  return dir;
}

/// scratch_dir()/name, emptied: removed with everything in it and made again. For a fresh store
/// per input (the store targets). Fails the run when it cannot.
inline std::filesystem::path fresh_dir(const std::string& name) {
  const auto dir = scratch_dir() / name;
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir, ec);
  if (ec) fuzz_fail("cannot make " + dir.string() + ": " + ec.message());
  return dir;
}

/// Writes bytes to path (truncating). Fails the run when it cannot.
inline void write_file(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) fuzz_fail("cannot write " + path.string());
}

}  // namespace fencecheck::fuzz
