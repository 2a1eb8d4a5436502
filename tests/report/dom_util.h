// Test helpers for the report tests: fixture copies, and reading report.html (as written, or as
// a browser's dumped DOM) by its start tags, classes and data-* attributes.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "../support/remove_at_end.h"

namespace fctest {

namespace fs = std::filesystem;

inline const fs::path kSource = FENCECHECK_SOURCE_DIR;
/// Stored real runs of scenarios/smoke (scenario.json, history.jsonl, readback.json, verdict.json).
inline const fs::path kFixtures = kSource / "tests" / "report" / "fixtures";

/// A fresh, empty directory $TMPDIR/fc-report-<pid>-<name>, removed when the test program ends
/// unless a test failed (tests/support/remove_at_end.h).
inline fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("fc-report-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return fencecheck::testing::remove_at_end(d);
}

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// A copy of a fixture run directory in a fresh temporary directory (fixtures are never written).
inline fs::path copy_fixture(const std::string& name, const std::string& as) {
  const fs::path dst = fresh_dir(as) / name;
  fs::create_directories(dst);
  for (const auto& f : fs::directory_iterator(kFixtures / name)) fs::copy_file(f.path(), dst / f.path().filename());
  return dst;
}

using Attrs = std::map<std::string, std::string>;

/// Every start tag <tag ...> of a document, as attribute maps.
inline std::vector<Attrs> start_tags(const std::string& doc, const std::string& tag) {
  std::vector<Attrs> out;
  const std::regex tag_re("<" + tag + R"((\s[^>]*)?>)");
  const std::regex attr_re(R"re(([A-Za-z_:][-A-Za-z0-9_:.]*)="([^"]*)")re");
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), tag_re); it != std::sregex_iterator(); ++it) {
    Attrs attrs;
    const std::string inner = (*it)[1].str();
    for (auto a = std::sregex_iterator(inner.begin(), inner.end(), attr_re); a != std::sregex_iterator(); ++a)
      attrs[(*a)[1].str()] = (*a)[2].str();
    out.push_back(std::move(attrs));
  }
  return out;
}

/// Whether the tag's class attribute has every class in `classes` (space-separated).
inline bool has_class(const Attrs& attrs, const std::string& classes) {
  auto it = attrs.find("class");
  if (it == attrs.end()) return false;
  std::set<std::string> have;
  std::istringstream in(it->second);
  for (std::string c; in >> c;) have.insert(c);
  std::istringstream want(classes);
  for (std::string c; want >> c;)
    if (!have.count(c)) return false;
  return true;
}

/// The <g> elements with these classes and these attribute values, in document order.
inline std::vector<Attrs> marks(const std::string& doc, const std::string& classes, const Attrs& data = {}) {
  std::vector<Attrs> out;
  for (auto& t : start_tags(doc, "g")) {
    if (!has_class(t, classes)) continue;
    bool ok = true;
    for (const auto& [k, v] : data) ok = ok && t.count(k) && t.at(k) == v;
    if (ok) out.push_back(t);
  }
  return out;
}

/// The headline lines of report.html ("In short", <li class="headline" data-worker=...>), in order.
inline std::vector<Attrs> headline_items(const std::string& doc) {
  std::vector<Attrs> out;
  for (auto& t : start_tags(doc, "li"))
    if (has_class(t, "headline")) out.push_back(t);
  return out;
}

/// A headline line's facts in one comparable string: "w1 token 2 paused 6.00 s; w2 took token 3;
/// old token's write rejected" (from its data-* attributes).
inline std::string headline_facts(const Attrs& item) {
  auto get = [&](const char* k) { return item.count(k) ? item.at(k) : std::string("?"); };
  return get("data-worker") + " token " + get("data-token") + " paused " + get("data-pause-s") + " s; " +
         get("data-successor") + " took token " + get("data-successor-token") + "; old token's write " + get("data-outcome");
}

/// The markup from the element with this id up to its first "</g>" (a mark and its label).
inline std::string element_text(const std::string& doc, const std::string& id) {
  const auto at = doc.find("id=\"" + id + "\"");
  if (at == std::string::npos) return {};
  const auto end = doc.find("</g>", at);
  return doc.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

}  // namespace fctest
