#include "fencecheck/harness/junit.h"

#include "fencecheck/harness/report.h"

#include <sstream>
#include <stdexcept>

#include <pugixml.hpp>

#include "report_text.h"

namespace fencecheck::harness {
namespace fs = std::filesystem;
namespace rt = report_text;

namespace {

/// One evidence event as one readable line: "#18 +2.341 s w2 write.ok key=ledger seg=0 chunk=0 token=3 high_water=3".
std::string describe_event(std::size_t index, const Event& e, std::int64_t origin_ns) {
  std::string s = "#" + std::to_string(index);
  if (origin_ns != 0 && e.t_ns != 0) s += rt::format(" +%.3f s", static_cast<double>(e.t_ns - origin_ns) / 1e9);
  s += " " + e.source + " " + std::string(kind_name(e.kind));
  auto field = [&s](const char* name, const std::optional<std::int64_t>& v) {
    if (v) s += std::string(" ") + name + "=" + std::to_string(*v);
  };
  if (!e.key.empty()) s += " key=" + e.key;
  field("segment", e.segment);
  field("chunk", e.chunk);
  field("token", e.token);
  field("high_water", e.high_water);
  if (!e.lock_key.empty()) s += " lock_key=" + e.lock_key;
  field("revision", e.revision);
  if (e.duration_ns) s += rt::format(" duration=%.3f s", static_cast<double>(*e.duration_ns) / 1e9);
  if (!e.fault.empty()) s += " fault=" + e.fault;
  if (!e.target.empty()) s += " target=" + e.target;
  if (!e.detail.empty()) s += " (" + e.detail + ")";
  return s;
}

std::string join(const std::vector<std::string>& v, std::string_view sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : std::string(sep)) + s;
  return out;
}

std::string first_line(std::string_view s) {
  const auto nl = s.find('\n');
  return std::string(nl == std::string_view::npos ? s : s.substr(0, nl));
}

void set(pugi::xml_node node, const char* name, const std::string& value) {
  node.append_attribute(name).set_value(rt::xml_safe(value).c_str());
}

std::string seconds_attr(double s) { return rt::format("%.3f", s < 0 ? 0.0 : s); }

}  // namespace

std::string junit_suite_name(std::string_view source) {
  const fs::path p(source);
  const std::string dir = p.parent_path().filename().string();
  return dir.empty() || dir == "." || dir == ".." ? "fencecheck" : dir;
}

JUnitCase junit_case(const ScenarioResult& r, const Analysis* analysis, std::int64_t origin_ns, std::string_view suite) {
  JUnitCase c;
  c.name = r.label();  // "name #i/N" under --repeat: every repetition its own case
  c.classname = suite.empty() || suite == "fencecheck" ? std::string("fencecheck") : "fencecheck." + std::string(suite);
  c.time_s = r.duration_s;

  // What the run showed, whatever the outcome: <system-out>.
  std::ostringstream out;
  out << "expectation: " << r.expectation << "\n"
      << "verdict: " << r.verdict << "\n"
      << "expectation met: " << (r.skipped ? "skipped" : r.met ? "yes" : "no") << "\n"
      << "anomalies: " << (r.anomalies.empty() ? "none" : join(r.anomalies, ", ")) << "\n"
      << "rejected writes: " << r.rejected_writes << "\n"
      << "lease expiries during work: "
      << expiries_text(r) << "\n"
      << "longest pause: " << longest_pause_text(r) << "\n"
      << "duration: " << rt::seconds(r.duration_s) << "\n";
  for (const auto& w : r.black_box_workers) out << w << ": " << kBlackBoxNote << "\n";
  if (!r.run_dir.empty()) {
    out << "run directory: " << r.run_dir.string() << "\n"
        << "report: " << (r.run_dir / "report.html").string() << "\n";
  }
  c.system_out = out.str();

  if (r.skipped) {
    c.status = JUnitCase::Status::kSkipped;
    c.message = r.reasons.empty() ? "skipped" : first_line(r.reasons.front());
    return c;
  }
  if (r.exit_code == kExitMet && r.met) return c;

  // Failure (not met) or error (the harness could not run or judge it).
  std::ostringstream d;
  if (r.exit_code == kExitEnvironment || r.exit_code == kExitInternal || r.exit_code == kExitBadInput) {
    c.status = JUnitCase::Status::kError;
    c.type = r.exit_code == kExitEnvironment ? "environment" : r.exit_code == kExitBadInput ? "bad-input" : "internal";
  } else {
    c.status = JUnitCase::Status::kFailed;
    c.type = r.anomalies.empty() ? "expectation-not-met" : join(r.anomalies, ",");
  }
  c.message = r.reasons.empty() ? (c.status == JUnitCase::Status::kError ? "the harness failed" : "expectation not met")
                                : first_line(r.reasons.front());
  d << "scenario " << r.scenario << " (expected: " << r.expectation << ", verdict: " << r.verdict << ")\n";
  if (!r.reasons.empty()) {
    d << "\nwhy:\n";
    for (const auto& why : r.reasons) d << "  - " << why << "\n";
  }
  // Each line that broke the worker protocol, verbatim (its reason is among the above).
  if (!r.protocol_errors.empty()) {
    d << "\nprotocol errors (the run cannot be judged safe):\n";
    for (const auto& pe : r.protocol_errors) d << "  - " << protocol_error_line_text(pe, 4096) << "\n";
  }
  if (!r.black_box_workers.empty()) {
    d << "\n";
    for (const auto& w : r.black_box_workers) d << w << ": " << kBlackBoxNote << "\n";
  }
  if (analysis != nullptr) {
    for (const auto& checker : analysis->checkers) {
      if (!checker.error.empty()) d << "\nchecker " << checker.name << " could not decide: " << checker.error << "\n";
      for (const auto& an : checker.anomalies) {
        d << "\nanomaly " << an.name << " (checker " << checker.name << "): " << an.description << "\n";
        if (!an.tokens.empty()) {
          d << "  tokens:";
          for (auto t : an.tokens) d << " " << t;
          d << "\n";
        }
        if (!an.clients.empty()) d << "  clients: " << join(an.clients, ", ") << "\n";
        if (!an.evidence.empty()) d << "  evidence (history.jsonl line = index + 1):\n";
        for (std::size_t i : an.evidence) {
          if (auto it = analysis->evidence_events.find(i); it != analysis->evidence_events.end())
            d << "    " << describe_event(i, it->second, origin_ns) << "\n";
          else
            d << "    #" << i << "\n";
        }
      }
    }
  }
  if (!r.run_dir.empty()) d << "\nrun directory: " << r.run_dir.string() << " (report.html draws the timeline)\n";
  c.details = d.str();
  return c;
}

std::string junit_timestamp(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return buf;
}

std::string render_junit(const JUnitSuite& suite) {
  std::size_t failures = 0, errors = 0, skipped = 0;
  double time = 0;
  for (const auto& c : suite.cases) {
    failures += c.status == JUnitCase::Status::kFailed;
    errors += c.status == JUnitCase::Status::kError;
    skipped += c.status == JUnitCase::Status::kSkipped;
    time += c.time_s;
  }
  pugi::xml_document doc;
  auto decl = doc.append_child(pugi::node_declaration);
  decl.append_attribute("version").set_value("1.0");
  decl.append_attribute("encoding").set_value("UTF-8");

  auto counts = [&](pugi::xml_node n) {
    set(n, "tests", std::to_string(suite.cases.size()));
    set(n, "failures", std::to_string(failures));
    set(n, "errors", std::to_string(errors));
    set(n, "skipped", std::to_string(skipped));
    set(n, "time", seconds_attr(time));
  };
  auto root = doc.append_child("testsuites");
  set(root, "name", "fencecheck");
  counts(root);
  auto ts = root.append_child("testsuite");
  set(ts, "name", suite.name.empty() ? "fencecheck" : suite.name);
  counts(ts);
  set(ts, "timestamp", suite.timestamp.empty() ? junit_timestamp(std::time(nullptr)) : suite.timestamp);  // required by the schema
  if (!suite.hostname.empty()) set(ts, "hostname", suite.hostname);

  for (const auto& c : suite.cases) {
    auto tc = ts.append_child("testcase");
    set(tc, "name", c.name);
    set(tc, "classname", c.classname);
    set(tc, "time", seconds_attr(c.time_s));
    const char* element = nullptr;
    switch (c.status) {
      case JUnitCase::Status::kPassed: break;
      case JUnitCase::Status::kFailed: element = "failure"; break;
      case JUnitCase::Status::kError: element = "error"; break;
      case JUnitCase::Status::kSkipped: element = "skipped"; break;
    }
    if (element != nullptr) {
      auto e = tc.append_child(element);
      set(e, "message", c.message);
      if (c.status != JUnitCase::Status::kSkipped) {
        set(e, "type", c.type);
        e.append_child(pugi::node_pcdata).set_value(rt::xml_safe(c.details).c_str());
      }
    }
    if (!c.system_out.empty())
      tc.append_child("system-out").append_child(pugi::node_pcdata).set_value(rt::xml_safe(c.system_out).c_str());
  }
  std::ostringstream out;
  doc.save(out, "  ", pugi::format_default, pugi::encoding_utf8);
  return out.str();
}

void write_junit(const fs::path& path, const JUnitSuite& suite) {
  const std::string text = render_junit(suite);
  std::error_code ec;
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
  rt::write_file_atomically(path, text);
}

}  // namespace fencecheck::harness
