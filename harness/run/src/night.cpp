// A night: one invocation of `fencecheck run` (night.h).
#include "fencecheck/harness/night.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "fencecheck/harness/junit.h"

namespace fencecheck::harness {
namespace fs = std::filesystem;

std::string new_night_id(std::time_t started, long pid) {
  std::tm tm{};
  gmtime_r(&started, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
  return std::string(stamp) + "-" + std::to_string(pid);
}

void record_night(const fs::path& run_dir, const std::string& id) {
  const fs::path file = run_dir / "night";
  std::ofstream out(file);
  out << id << '\n';
  if (!out) throw std::runtime_error("cannot write " + file.string());
}

std::optional<std::string> recorded_night(const fs::path& run_dir) {
  std::ifstream in(run_dir / "night");
  std::string id;
  if (!in || !std::getline(in, id) || id.empty() || id.size() > 200) return std::nullopt;
  const bool plain = std::all_of(id.begin(), id.end(), [](unsigned char c) {
    return std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.';
  });
  if (!plain) return std::nullopt;
  return id;
}

fs::path night_summary_path(const fs::path& run_root, const std::string& id) {
  return run_root / ("night-" + id + ".json");
}

bool night_failure(const ScenarioResult& r) {
  return r.exit_code != kExitMet && !(r.skipped && r.exit_code == kExitEnvironment);
}

nlohmann::json night_summary_json(const NightSummary& night) {
  nlohmann::json runs = nlohmann::json::array();
  nlohmann::json failed = nlohmann::json::array();
  std::size_t met = 0;
  for (const auto& r : night.results) {
    nlohmann::json j = r.to_json();
    j["label"] = r.label();
    j["run_id"] = r.run_dir.filename().string();
    runs.push_back(std::move(j));
    met += r.met ? 1 : 0;
    if (night_failure(r)) failed.push_back(r.label());
  }
  return {{"night", night.id},
          {"started", junit_timestamp(night.started) + "Z"},
          {"finished", junit_timestamp(night.finished) + "Z"},
          {"exit_code", night.exit_code},
          {"interrupted", night.interrupted},
          {"scenarios", night.results.size()},
          {"met", met},
          {"failed", failed},
          {"runs", runs}};
}

namespace {

/// Points `link` at `target` (a relative name), replacing what was there in one rename(2).
void point_link(const fs::path& link, const fs::path& target) {
  const fs::path tmp = link.parent_path() / ("." + link.filename().string() + "-" + target.filename().string());
  std::error_code ec;
  fs::remove(tmp, ec);
  fs::create_symlink(target, tmp, ec);
  if (!ec) fs::rename(tmp, link, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw std::runtime_error("cannot point " + link.string() + " at " + target.string() + ": " + ec.message());
  }
}

}  // namespace

NightFiles write_night_summary(const fs::path& run_root, const NightSummary& night) {
  NightFiles files;
  files.summary = night_summary_path(run_root, night.id);
  const fs::path tmp = run_root / ("." + files.summary.filename().string() + ".tmp");
  {
    std::ofstream out(tmp);
    out << night_summary_json(night).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    if (!out) throw std::runtime_error("cannot write " + tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, files.summary, ec);
  if (ec) throw std::runtime_error("cannot write " + files.summary.string() + ": " + ec.message());
  point_link(run_root / "latest-night.json", files.summary.filename());
  for (const auto& r : night.results)
    if (night_failure(r) && !r.run_dir.empty()) {
      files.first_failed = r.run_dir;
      break;
    }
  if (files.first_failed) {
    point_link(run_root / "latest-failed", files.first_failed->filename());
  } else {
    fs::remove(run_root / "latest-failed", ec);  // this night did not fail: no stale pointer to an old one
    if (ec) throw std::runtime_error("cannot remove " + (run_root / "latest-failed").string() + ": " + ec.message());
  }
  return files;
}

std::string format_night_footer(const NightSummary& night, const NightFiles& files, const fs::path& run_root) {
  std::ostringstream out;
  const auto met = std::count_if(night.results.begin(), night.results.end(), [](const auto& r) { return r.met; });
  // Met, but not with exit 0 (a planned fault this machine could not give: exit 3): said as such.
  const auto incomplete =
      std::count_if(night.results.begin(), night.results.end(), [](const auto& r) { return r.met && night_failure(r); });
  out << "night " << night.id << ": " << met << " of " << night.results.size() << " met their expectation";
  if (incomplete > 0) out << " (" << incomplete << " of them incomplete: not every planned fault ran)";
  out << (night.interrupted ? " (interrupted)" : "") << "\n";
  for (const auto& r : night.results) {
    if (!night_failure(r)) continue;
    out << (r.met ? "  INCOMPLETE " : "  FAILED ") << r.label() << " (exit " << r.exit_code << "): ";
    if (r.met && !r.reasons.empty()) out << r.reasons.front() << ": ";
    if (!r.run_dir.empty()) out << (r.run_dir / "report.html").string();
    else out << (r.reasons.empty() ? "no run directory" : r.reasons.front());
    out << "\n";
  }
  out << "summary: " << files.summary.string() << "\n";
  if (files.first_failed)
    out << (run_root / "latest-failed").string() << " -> " << files.first_failed->filename().string() << "\n";
  return out.str();
}

}  // namespace fencecheck::harness
