// What `fencecheck run` checks before anything starts: see preflight.h.
#include "fencecheck/harness/preflight.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "fencecheck/resources/resource_kind.h"

namespace fencecheck::harness {
namespace fs = std::filesystem;

std::vector<NeededProgram> needed_programs(const std::vector<Scenario>& scenarios) {
  std::vector<NeededProgram> out;
  const auto add = [&](std::string name, std::string why) {
    if (std::none_of(out.begin(), out.end(), [&](const NeededProgram& p) { return p.name == name; }))
      out.push_back({std::move(name), std::move(why)});
  };
  for (const auto& s : scenarios)
    if (std::any_of(s.workers().begin(), s.workers().end(), [](const WorkerSpec& w) { return !w.command; }))
      add("fencecheck-worker", "needed by scenarios with a reference worker");
  for (const auto& s : scenarios)
    if (const auto* kind = resources::find_resource_kind(s.resource().kind))
      for (auto& p : kind->programs(s.resource().config))
        add(std::move(p), "needed by scenarios whose resource kind is " + s.resource().kind);
  return out;
}

std::optional<std::string> check_bin_dir(const fs::path& dir, bool explicit_flag, const std::vector<NeededProgram>& programs) {
  const std::string shown = explicit_flag ? "--bin-dir " + dir.string() : "beside fencecheck (" + dir.string() + ")";
  const std::string hint = explicit_flag ? "" : "; pass --bin-dir DIR where they are";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    if (ec && ec != std::errc::no_such_file_or_directory) return shown + ": " + ec.message();
    return shown + ": " + (fs::exists(dir, ec) ? "not a directory" : "no such directory") + hint;
  }
  std::string missing;
  for (const auto& [p, needed] : programs) {
    const fs::path exe = dir / p;
    const bool file = fs::is_regular_file(exe, ec);  // follows symlinks, as exec does
    std::string why;
    if (!file) why = fs::exists(exe, ec) ? " (not a regular file)" : "";
    else if (::access(exe.c_str(), X_OK) != 0) why = " (not executable)";
    else continue;
    missing += (missing.empty() ? "" : ", ") + p + why + " [" + needed + "]";
  }
  if (missing.empty()) return std::nullopt;
  return shown + ": missing " + missing + hint;
}

namespace {

/// path made absolute and normal, without a trailing separator ("runs/" and "runs" are one place).
fs::path normal(const fs::path& path) {
  fs::path p = fs::absolute(path).lexically_normal();
  if (!p.has_filename() && p != p.root_path()) p = p.parent_path();
  return p;
}

/// The nearest of path and its ancestors that exists (path itself when it does), with the error
/// that stopped the walk when one is not a directory or cannot be examined.
struct Existing {
  fs::path dir;
  std::optional<std::string> error;
};

Existing nearest_existing(const fs::path& path) {
  fs::path p = normal(path);
  for (;;) {
    std::error_code ec;
    const auto st = fs::status(p, ec);
    if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory)
      return {p, p.string() + ": " + ec.message()};
    if (fs::exists(st)) {
      if (!fs::is_directory(st)) return {p, p.string() + " is not a directory"};
      return {p, std::nullopt};
    }
    if (!p.has_parent_path() || p.parent_path() == p) return {p, "no existing directory above it"};
    p = p.parent_path();
  }
}

}  // namespace

std::optional<std::string> check_run_root(const fs::path& run_root) {
  const std::string shown = "--run-root " + run_root.string() + ": ";
  const Existing at = nearest_existing(run_root);
  if (at.error) return shown + *at.error;
  std::string templ = (at.dir / ".fencecheck-probe-XXXXXX").string();
  if (::mkdtemp(templ.data()) == nullptr) {
    const int err = errno;
    return shown + "cannot create a directory in " + at.dir.string() + " (" + std::strerror(err) + ")";
  }
  ::rmdir(templ.c_str());
  return std::nullopt;
}

std::optional<std::string> check_junit_path(const fs::path& junit, const fs::path& run_root) {
  const std::string shown = "--junit " + junit.string() + ": ";
  std::error_code ec;
  if (fs::is_directory(junit, ec)) return shown + "cannot write a file there (it is a directory)";
  const fs::path parent = normal(junit).parent_path();
  const auto st = fs::status(parent, ec);
  if (!fs::exists(st)) {
    if (parent == normal(run_root))
      return std::nullopt;  // the run root: created before the first scenario (check_run_root vouched for it)
    return shown + "its directory " + parent.string() + " does not exist (fencecheck does not create it)";
  }
  if (!fs::is_directory(st)) return shown + parent.string() + " is not a directory";
  const fs::path probe = parent / (".fencecheck-junit-probe-" + std::to_string(::getpid()));
  const bool writable = std::ofstream(probe).good();
  fs::remove(probe, ec);
  if (!writable) return shown + "cannot write a file there";
  return std::nullopt;
}

}  // namespace fencecheck::harness
