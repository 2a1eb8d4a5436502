#include "golden_cases.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include "fencecheck/harness/analysis.h"
#include "fencecheck/harness/checker.h"
#include "fencecheck/harness/expectation.h"
#include "fencecheck/harness/history.h"
#include "fencecheck/harness/scenario.h"
#include "fencecheck/harness/verdict_json.h"
#include "fencecheck/proto/event.h"
#include "fencecheck/proto/readback.h"
#include "../harness/history_builder.h"  // Builder, fenced_run(), unfenced_run()

namespace fencecheck::golden {
namespace {

namespace fs = std::filesystem;
namespace fh = fencecheck::harness;
using nlohmann::json;

const fs::path kSource = FENCECHECK_SOURCE_DIR;
const fs::path kSmoke = kSource / "scenarios" / "smoke";
/// The separator of the report fuzz target's inputs (tests/fuzz/report_fuzz.cpp).
constexpr std::string_view kSeparator = "\n--- readback.json ---\n";
/// The corruptions' seed; each base mixes in a hash of its name, so adding a base changes no other.
constexpr std::uint64_t kSeed = 0x16'601d'e4ULL;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + p.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Sorted entries of a directory (directory_iterator's order is the filesystem's).
std::vector<fs::path> sorted_entries(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  return h;
}

// ---------------------------------------------------------------------------------------------
// Base cases

std::string jsonl(const fh::History& h) {
  std::string out;
  for (const Event& e : h) out += to_json_line(e) + '\n';
  return out;
}

Case story(std::string name, const fh::History& h, const ReadBack& rb, ScenarioSource sc) {
  return Case{"story/" + std::move(name), jsonl(h), to_json(rb).dump(), std::move(sc)};
}

ScenarioSource yaml_file(const std::string& file) { return {ScenarioSource::Kind::kYamlFile, (kSmoke / file).string()}; }

/// The checker tests' synthetic stories (history_builder.h) against several contexts and read-backs.
std::vector<Case> story_cases() {
  const ScenarioSource fenced = yaml_file("sigstop-past-lease.yaml");
  const ScenarioSource unfenced = yaml_file("sigstop-past-lease-unfenced.yaml");
  std::vector<Case> out;
  const fh::StoryRun f = fh::fenced_run();
  const fh::StoryRun u = fh::unfenced_run();
  out.push_back(story("fenced", f.b.h, f.rb, fenced));
  out.push_back(story("unfenced", u.b.h, u.rb, unfenced));
  out.push_back(story("fenced-no-context", f.b.h, f.rb, {}));
  out.push_back(story("unfenced-no-context", u.b.h, u.rb, {}));

  ReadBack flipped = f.rb;  // one filler byte of w2's s0c1 flipped: corrupt-chunk
  std::string& data = flipped.chunks[1].data;
  data[data.find("f=x") + 2] = 'y';
  out.push_back(story("fenced-corrupt-chunk", f.b.h, flipped, fenced));

  ReadBack lost = f.rb;  // w2's acknowledged s1c1 is gone from the resource
  lost.chunks.pop_back();
  out.push_back(story("fenced-lost-chunk", f.b.h, lost, fenced));

  // A third worker, w3, that never says anything: a black box.
  const ScenarioSource three{ScenarioSource::Kind::kYamlText,
                             "name: three\nlease_ttl: 2s\nresource: {kind: store}\njob: {key: ledger}\n"
                             "workers: [{id: w1}, {id: w2}, {id: w3}]\nexpect: {outcome: safe}\n"};
  out.push_back(story("fenced-black-box", f.b.h, f.rb, three));

  // A protocol error from w1 and a write of unknown outcome (applied: the accept log has it).
  fh::StoryRun p = fh::unfenced_run();
  Event pe = fh::Builder::ev("harness", EventKind::kProtocolError);
  pe.target = "w1";
  pe.line_no = 7;
  pe.detail = "w1 line 7: write.ok has no field 'token'";
  pe.line = R"({"kind":"write.ok","key":"ledger"})";
  p.b.add(pe);
  p.b.write("w2", EventKind::kWriteInvoke, 34, 1, 1);
  p.b.write("w2", EventKind::kWriteInfo, 34, 1, 1);
  out.push_back(story("unfenced-protocol-error", p.b.h, p.rb, unfenced));

  // The catalogue's three rules the runs above never trip: a stale holder's side effect applied
  // again, a shared counter's lost updates and a holder that retries a rejected token.
  const auto job = [](const std::string& kind, const std::string& key) {
    return ScenarioSource{ScenarioSource::Kind::kYamlText,
                          "name: " + kind + "\nlease_ttl: 2s\nresource: {kind: store}\njob: {kind: " + kind +
                              ", key: " + key + "}\nworkers: [{id: w1}, {id: w2}]\nexpect: {outcome: safe}\n"};
  };
  const auto write = [](fh::Builder& b, const std::string& w, EventKind kind, const std::string& key,
                        std::int64_t token, std::optional<std::int64_t> segment, const std::string& detail,
                        std::optional<std::int64_t> high_water) {
    Event i = fh::Builder::ev(w, EventKind::kWriteInvoke);
    i.key = key;
    i.token = token;
    i.segment = segment;
    i.detail = detail;
    b.add(i);
    Event e = i;
    e.kind = kind;
    e.high_water = high_water;
    b.add(e);
  };
  {
    // w2 (token 34) pays out seg0 and seg1; w1, paused with token 33, pays out seg0 again.
    fh::Builder b;
    b.run_start();
    b.acquire_ok("w1", fh::kKey1, 33, 7001);
    b.acquire_ok("w2", fh::kKey2, 34, 7002);
    write(b, "w2", EventKind::kWriteOk, "ledger.effect", 34, 0, "", 34);
    write(b, "w2", EventKind::kWriteOk, "ledger.effect", 34, 1, "", 34);
    write(b, "w1", EventKind::kWriteOk, "ledger.effect", 33, 0, "", 34);
    ReadBack rb;
    rb.effects = {EffectRecord{"ledger", "w2:seg0", 34, "w2", 5, true, "unfenced"},
                  EffectRecord{"ledger", "w2:seg1", 34, "w2", 8, true, "unfenced"},
                  EffectRecord{"ledger", "w1:seg0", 33, "w1", 9, true, "unfenced"}};
    out.push_back(story("duplicate-effect", b.h, rb, job("side-effect", "ledger")));
  }
  {
    // w1 read 0 and stopped; w2 incremented 0 -> 3; w1 wrote 0 -> 1, then 1 -> 2.
    fh::Builder b;
    b.run_start();
    b.acquire_ok("w1", fh::kKey1, 33, 7001);
    b.acquire_ok("w2", fh::kKey2, 34, 7002);
    for (int v = 0; v < 3; ++v)
      write(b, "w2", EventKind::kWriteOk, "hits", 34, std::nullopt,
            "counter " + std::to_string(v) + " -> " + std::to_string(v + 1), std::nullopt);
    write(b, "w1", EventKind::kWriteOk, "hits", 33, std::nullopt, "counter 0 -> 1", std::nullopt);
    write(b, "w1", EventKind::kWriteOk, "hits", 33, std::nullopt, "counter 1 -> 2", std::nullopt);
    ReadBack rb;
    rb.counters = {{"hits", 2}};
    for (std::int64_t v = 1; v <= 3; ++v) rb.log.push_back(AcceptedWrite{v, "hits", kNoSlot, kNoSlot, 34, "w2", WriteKind::kCounter, v});
    for (std::int64_t v = 1; v <= 2; ++v) rb.log.push_back(AcceptedWrite{3 + v, "hits", kNoSlot, kNoSlot, 33, "w1", WriteKind::kCounter, v});
    out.push_back(story("counter-drift", b.h, rb, job("counter", "hits")));
  }
  {
    // w1's token 33 is fenced (the mark is w2's 34) and w1 retries it twice, on two segments.
    fh::StoryRun r = fh::fenced_run();
    for (std::int64_t segment : {0, 1, 1}) write(r.b, "w1", EventKind::kWriteFail, "ledger", 33, segment, "", 34);
    r.rb.rejections.push_back(RejectedWrite{"ledger", 0, 0, 33, "w1", 34});
    r.rb.rejections.push_back(RejectedWrite{"ledger", 1, 0, 33, "w1", 35});
    out.push_back(story("rejection-storm", r.b.h, r.rb, fenced));
  }
  {
    // fenced-out: w1 wrote with 48, the lock service restarted empty, and every fresh token w2
    // acquires after the heal (3, 5, 7, 9) is rejected against the mark 48.
    fh::Builder b;
    b.run_start();
    b.acquire_ok("w1", fh::kKey1, 48, 7001);
    b.write("w1", EventKind::kWriteInvoke, 48, 0, 0);
    b.write("w1", EventKind::kWriteOk, 48, 0, 0, 48);
    for (EventKind k : {EventKind::kFaultInject, EventKind::kFaultHeal}) {
      Event fault = fh::Builder::ev("harness", k);
      fault.fault = "lock-service-restart";
      fault.target = "lock-service";
      b.add(fault, k == EventKind::kFaultInject ? 1'000'000 : 1'000'000'000);
    }
    for (std::int64_t token = 3; token <= 9; token += 2) {
      Event invoke = fh::Builder::ev("w2", EventKind::kAcquireInvoke);
      invoke.lock = fh::kLock;
      invoke.ttl_ms = 2000;
      b.add(invoke, 200'000'000);
      b.acquire_ok("w2", fh::kLock + "/694d8a1b2c3d01" + std::to_string(token), token, 7000 + token);
      b.write("w2", EventKind::kWriteInvoke, token, 0, 0);
      Event fail = b.h.events.back();
      fail.kind = EventKind::kWriteFail;
      fail.high_water = 48;
      b.add(fail, 500'000'000);
    }
    ReadBack rb;
    rb.high_water = {{fh::kLedgerKey, 48}};
    rb.log = {fh::logged(1, "w1", 48, 0, 0)};
    for (std::int64_t token = 3; token <= 9; token += 2) rb.rejections.push_back(RejectedWrite{fh::kLedgerKey, 0, 0, token, "w2", 48});
    out.push_back(story("fenced-out", b.h, rb,
                        ScenarioSource{ScenarioSource::Kind::kYamlText,
                                       "name: fenced-out\nlease_ttl: 2s\nresource: {kind: store}\njob: {key: ledger}\n"
                                       "workers: [{id: w1}, {id: w2}]\nexpect: {outcome: safe}\n"}));
  }
  {
    // cross-key-rejection: a store with one global mark. w2's token 34 on ledger-b rejects w1's
    // token 33 on ledger-a, a key that never reached 34.
    fh::Builder b;
    b.run_start();
    const auto chunk_write = [&b](const std::string& w, EventKind kind, std::int64_t token, std::int64_t chunk,
                                  std::int64_t high_water, const std::string& key) {
      b.write(w, EventKind::kWriteInvoke, token, 0, chunk, std::nullopt, key);
      b.write(w, kind, token, 0, chunk, high_water, key);
    };
    b.acquire_ok("w1", fh::kKey1, 33, 7001);
    chunk_write("w1", EventKind::kWriteOk, 33, 0, 33, "ledger-a");
    b.acquire_ok("w2", fh::kKey2, 34, 7002);
    chunk_write("w2", EventKind::kWriteOk, 34, 0, 34, "ledger-b");
    chunk_write("w1", EventKind::kWriteFail, 33, 1, 34, "ledger-a");
    ReadBack rb;
    rb.fencing = "global";
    rb.log = {AcceptedWrite{1, "ledger-a", 0, 0, 33, "w1"}, AcceptedWrite{2, "ledger-b", 0, 0, 34, "w2"}};
    rb.rejections = {RejectedWrite{"ledger-a", 0, 1, 33, "w1", 34}};
    out.push_back(story("cross-key-rejection", b.h, rb, {}));
  }
  {
    // unaccounted-write (issue 31, item 9): the fenced story, then an admin tool outside the run
    // writes ledger segment 2 with the key's mark (w2's 34) and once with 35, never granted.
    fh::StoryRun r = fh::fenced_run();
    std::int64_t seq = 100;
    for (const std::int64_t token : {34, 34, 35})
      r.rb.log.push_back(AcceptedWrite{++seq, fh::kLedgerKey, 2, seq - 101, token, "admin"});
    r.rb.chunks.push_back(fh::stored("admin", 35, 2, 2, seq));
    out.push_back(story("unaccounted-write", r.b.h, r.rb, fenced));
  }
  {
    // unjustified-rejection (issue 31, item 2): an HTTP service comparing tokens as text rejects
    // every fresh token of w2 (10, 13, ..., 49) at w1's mark 9; no fault; w2 is fenced out too.
    const fh::TextCompareRun r = fh::text_compare_run();
    out.push_back(story("unjustified-rejection", r.b.h, r.rb,
                        ScenarioSource{ScenarioSource::Kind::kYamlText,
                                       "name: text-compare\nlease_ttl: 2s\nlock_service: {kind: etcd, prior_revisions: 7}\n"
                                       "resource: {kind: http, url: http://127.0.0.1:18431}\n"
                                       "job: {key: ledger, segments: 1, chunks: 2}\nworkers:\n  - {id: w1}\n"
                                       "  - id: w2\n    start_after: {worker: w1, event: acquire.ok}\n"
                                       "expect: {outcome: safe, min_rejected_writes: 1}\n"}));
  }
  return out;
}

/// The report fixtures: real runs of the smoke scenarios, with their own scenario.json.
std::vector<Case> fixture_cases() {
  std::vector<Case> out;
  for (const fs::path& dir : sorted_entries(kSource / "tests" / "report" / "fixtures"))
    out.push_back(Case{"fixture/" + dir.filename().string(), slurp(dir / "history.jsonl"), slurp(dir / "readback.json"),
                       {ScenarioSource::Kind::kJsonFile, (dir / "scenario.json").string()}});
  return out;
}

/// The report fuzz target's seed corpus, split and judged as that target does (its fixed scenario).
std::vector<Case> corpus_cases() {
  std::vector<Case> out;
  for (const fs::path& file : sorted_entries(kSource / "tests" / "fuzz" / "corpus" / "report")) {
    const std::string input = slurp(file);
    const auto cut = input.find(kSeparator);
    Case c{"corpus/" + file.filename().string(), input.substr(0, cut), std::nullopt, yaml_file("sigstop-past-lease.yaml")};
    if (cut != std::string::npos) c.readback = input.substr(cut + kSeparator.size());
    out.push_back(std::move(c));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Seeded corruptions

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + '\n';
  return out;
}

/// The indices of the lines that parse as JSON objects and satisfy `pred`.
template <typename Pred>
std::vector<std::size_t> lines_where(const std::vector<std::string>& lines, Pred pred) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const json j = json::parse(lines[i], nullptr, false);
    if (!j.is_discarded() && j.is_object() && pred(j)) out.push_back(i);
  }
  return out;
}

/// A base case's corruptions: 4 events dropped (one each), 4 adjacent pairs swapped, 3 tokens
/// changed, 2 write.ok duplicated, the history cut after a quarter, half and three quarters of its
/// lines and at 2/5 and 3/5 of its bytes (mid-line: usually a load error), and when it has a
/// read-back, an accept-log entry and a stored chunk dropped, and the read-back cut in half (a
/// load error).
std::vector<Case> corruptions(const Case& base) {
  std::mt19937_64 rng(kSeed ^ fnv1a(base.name));
  const auto pick = [&rng](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  // Up to k distinct elements of `from`, in the order drawn (so that no two cases share a name).
  const auto distinct = [&pick](std::vector<std::size_t> from, std::size_t k) {
    std::vector<std::size_t> out;
    while (out.size() < k && !from.empty()) {
      const std::size_t at = pick(from.size());
      out.push_back(from[at]);
      from.erase(from.begin() + static_cast<std::ptrdiff_t>(at));
    }
    return out;
  };
  const auto upto = [](std::size_t n) {
    std::vector<std::size_t> all(n);
    for (std::size_t i = 0; i < n; ++i) all[i] = i;
    return all;
  };
  const std::vector<std::string> lines = split_lines(base.history);
  const std::size_t n = lines.size();
  std::vector<Case> out;
  const auto add = [&](const std::string& what, std::string history, std::optional<std::string> readback) {
    out.push_back(Case{base.name + "/" + what, std::move(history), std::move(readback), base.scenario});
  };
  if (n < 2) return out;

  for (const std::size_t i : distinct(upto(n), 4)) {
    std::vector<std::string> l = lines;
    l.erase(l.begin() + static_cast<std::ptrdiff_t>(i));
    add("drop-" + std::to_string(i), join_lines(l), base.readback);
  }
  for (const std::size_t i : distinct(upto(n - 1), 4)) {
    std::vector<std::string> l = lines;
    std::swap(l[i], l[i + 1]);
    add("swap-" + std::to_string(i), join_lines(l), base.readback);
  }
  const auto with_token =
      lines_where(lines, [](const json& j) { return j.contains("token") && j["token"].is_number_integer(); });
  int k = 0;
  for (const std::size_t i : distinct(with_token, 3)) {
    json j = json::parse(lines[i]);
    const std::int64_t was = j["token"].get<std::int64_t>();
    const std::int64_t now = k == 0 ? was - 1 : k == 1 ? was + 1 : static_cast<std::int64_t>(pick(4));
    ++k;
    j["token"] = now;
    std::vector<std::string> l = lines;
    l[i] = j.dump();
    add("token-" + std::to_string(i) + "-to-" + std::to_string(now), join_lines(l), base.readback);
  }
  const auto write_ok = lines_where(lines, [](const json& j) { return j.value("kind", "") == "write.ok"; });
  for (const std::size_t i : distinct(write_ok, 2)) {
    std::vector<std::string> l = lines;
    l.insert(l.begin() + static_cast<std::ptrdiff_t>(i) + 1, lines[i]);
    add("dup-write-ok-" + std::to_string(i), join_lines(l), base.readback);
  }
  for (const std::size_t quarter : {1, 2, 3}) {
    const std::size_t keep = n * quarter / 4;
    add("cut-lines-" + std::to_string(keep),
        join_lines(std::vector<std::string>(lines.begin(), lines.begin() + static_cast<std::ptrdiff_t>(keep))),
        base.readback);
  }
  for (const std::size_t fifth : {2, 3}) {
    const std::size_t keep = base.history.size() * fifth / 5;
    add("cut-bytes-" + std::to_string(keep), base.history.substr(0, keep), base.readback);
  }

  if (base.readback) {
    const json rb = json::parse(*base.readback, nullptr, false);
    for (const char* part : {"log", "chunks"}) {
      if (rb.is_discarded() || !rb.is_object() || !rb.contains(part) || !rb[part].is_array() || rb[part].empty()) continue;
      json less = rb;
      const std::size_t i = pick(less[part].size());
      less[part].erase(i);
      add(std::string("readback-drop-") + part + "-" + std::to_string(i), base.history, less.dump());
    }
    const std::size_t keep = base.readback->size() / 2;
    add("readback-cut-bytes-" + std::to_string(keep), base.history, base.readback->substr(0, keep));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Running a case

/// This process's scratch directory (scratch_dir()); removed at exit.
struct Scratch {
  fs::path dir = fs::temp_directory_path() / ("fencecheck-golden-" + std::to_string(::getpid()));
  Scratch() { fs::create_directories(dir); }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

const fh::Scenario& load(const ScenarioSource& s) {
  static std::map<std::string, fh::Scenario> cache;
  if (auto it = cache.find(s.value); it != cache.end()) return it->second;
  switch (s.kind) {
    case ScenarioSource::Kind::kYamlFile:
      return cache.emplace(s.value, fh::load_scenario(s.value)).first->second;
    case ScenarioSource::Kind::kJsonFile:
      return cache.emplace(s.value, fh::scenario_from_json(json::parse(slurp(s.value)))).first->second;
    case ScenarioSource::Kind::kYamlText:
      return cache.emplace(s.value, fh::parse_scenario(s.value, "golden.yaml")).first->second;
    case ScenarioSource::Kind::kNone:
      break;
  }
  throw std::logic_error("no scenario to load");
}

/// verdict.json without the prose and the copies (run_case's comment says which fields).
json trimmed(json v, bool with_expectation) {
  v.erase("evidence_events");
  v.erase("schema_version");
  for (json& checker : v["checkers"])
    for (json& anomaly : checker["anomalies"]) {
      anomaly.erase("description");
      anomaly.erase("evidence_events");
    }
  if (with_expectation)
    v["expectation"] = json{{"met", v["expectation"]["met"]}};
  else
    v.erase("expectation");
  return v;
}

/// "[<name>]" for an object with a string "name" (a checker, an anomaly), so that a path says
/// which one it is in; else "".
std::string named(const json& v) {
  return v.is_object() && v.contains("name") && v["name"].is_string() ? "[" + v["name"].get<std::string>() + "]" : "";
}

std::string shown(const json& v) {
  std::string s = v.dump();
  return s.size() > 160 ? s.substr(0, 157) + "..." : s;
}

}  // namespace

std::vector<Case> all_cases() {
  std::vector<Case> bases = fixture_cases();
  for (Case& c : corpus_cases()) bases.push_back(std::move(c));
  for (Case& c : story_cases()) bases.push_back(std::move(c));
  std::vector<Case> out;
  for (const Case& base : bases) {
    out.push_back(base);
    for (Case& c : corruptions(base)) out.push_back(std::move(c));
  }
  return out;
}

const fs::path& scratch_dir() {
  static const Scratch scratch;
  return scratch.dir;
}

std::variant<LoadedCase, json> load_case(const Case& c) {
  const fs::path file = scratch_dir() / "history.jsonl";
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << c.history;
  }
  LoadedCase loaded;
  try {
    loaded.history = fh::load_history_jsonl(file);
  } catch (const fh::HistoryError& e) {
    return json{{"load_error", "history.jsonl: " + (e.line() ? "line " + std::to_string(e.line()) + ": " : std::string()) +
                                   e.message()}};
  }
  if (c.readback) {
    try {
      loaded.readback = readback_from_json(json::parse(*c.readback));
    } catch (const json::exception& e) {
      return json{{"load_error", std::string("readback.json: not valid JSON: ") + e.what()}};
    } catch (const std::invalid_argument& e) {
      return json{{"load_error", std::string("readback.json: not a read-back: ") + e.what()}};
    }
  }
  if (c.scenario.kind != ScenarioSource::Kind::kNone) {
    loaded.scenario = &load(c.scenario);
    loaded.context = fh::CheckContext::of(*loaded.scenario);
  }
  return loaded;
}

json run_case(const Case& c) {
  auto loaded = load_case(c);
  if (auto* error = std::get_if<json>(&loaded)) return *error;
  const LoadedCase& l = std::get<LoadedCase>(loaded);
  const fh::Analysis analysis = fh::analyze(l.history, l.readback, l.context);
  const fh::ExpectationResult expectation =
      l.scenario ? fh::evaluate(l.scenario->expect(), analysis, *l.scenario) : fh::ExpectationResult{};
  return trimmed(fh::verdict_to_json(analysis, expectation, l.history), l.scenario != nullptr);
}

std::optional<std::string> first_difference(const json& recorded, const json& now, const std::string& path) {
  if (recorded.is_number() && now.is_number()) {
    if (recorded.is_number_float() || now.is_number_float()) {
      // Relative tolerance 1e-9: GCC and clang may compute a floating-point figure differently in
      // its last bits; integers (counts, indices, nanoseconds) stay exact below.
      const double a = recorded.get<double>(), b = now.get<double>();
      if (a == b || std::fabs(a - b) <= 1e-9 * std::max(std::fabs(a), std::fabs(b))) return std::nullopt;
    } else if (recorded == now) {
      return std::nullopt;
    }
    return path + ": recorded " + shown(recorded) + ", now " + shown(now);
  }
  if (recorded.type() != now.type()) return path + ": recorded " + shown(recorded) + ", now " + shown(now);
  if (recorded.is_object()) {
    std::vector<std::string> keys;
    for (const auto& [k, v] : recorded.items()) keys.push_back(k);
    for (const auto& [k, v] : now.items())
      if (!recorded.contains(k)) keys.push_back(k);
    std::sort(keys.begin(), keys.end());
    for (const std::string& k : keys) {
      const std::string at = path + "/" + k;
      if (!now.contains(k)) return at + ": recorded " + shown(recorded[k]) + ", now absent";
      if (!recorded.contains(k)) return at + ": recorded absent, now " + shown(now[k]);
      if (auto d = first_difference(recorded[k], now[k], at)) return d;
    }
    return std::nullopt;
  }
  if (recorded.is_array()) {
    const std::size_t common = std::min(recorded.size(), now.size());
    for (std::size_t i = 0; i < common; ++i)
      if (auto d = first_difference(recorded[i], now[i], path + "/" + std::to_string(i) + named(recorded[i]))) return d;
    if (recorded.size() == now.size()) return std::nullopt;
    const bool longer = now.size() > recorded.size();
    return path + ": recorded " + std::to_string(recorded.size()) + " elements, now " + std::to_string(now.size()) +
           (longer ? " (first extra: " + shown(now[common]) + ")" : " (first missing: " + shown(recorded[common]) + ")");
  }
  if (recorded == now) return std::nullopt;
  return path + ": recorded " + shown(recorded) + ", now " + shown(now);
}

Tally tally(const std::vector<json>& results) {
  Tally t;
  for (const json& r : results) {
    ++t.cases;
    if (r.contains("load_error")) {
      ++t.load_errors;
      continue;
    }
    const std::string v = r.value("verdict", "");
    t.valid += v == "valid";
    t.invalid += v == "invalid";
    t.unknown += v == "unknown";
    for (const json& checker : r.value("checkers", json::array())) t.anomalies += checker.value("anomalies", json::array()).size();
  }
  return t;
}

}  // namespace fencecheck::golden
