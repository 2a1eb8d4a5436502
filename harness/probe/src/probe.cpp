// fencecheck probe: the rules of fencing, checked one by one against a resource (probe.h,
// docs/probe.md). Everything here goes through the resource axis's interfaces (resource_kind.h,
// writer.h); no kind is special-cased. token-required speaks raw HTTP to endpoints that have a
// "url", using the HTTP write contract's field names and defaults (docs/resource-http.md; the
// defaults are fencecheck-store's own contract).
#include "fencecheck/harness/probe.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <barrier>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <limits>
#include <map>
#include <ostream>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <tuple>

#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include "fencecheck/process/child_process.h"
#include "fencecheck/harness/orchestrator.h"
#include "fencecheck/harness/yaml_documents.h"
#include "fencecheck/http/client.h"
#include "fencecheck/proto/chunk.h"

namespace fencecheck::harness {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::string_view kLower = "lower-token-rejected";
constexpr std::string_view kEqual = "equal-token";
constexpr std::string_view kPerKey = "per-key";
constexpr std::string_view kConcurrent = "concurrent";
constexpr std::string_view kNoChange = "rejection-changes-nothing";
constexpr std::string_view kTokenRequired = "token-required";
constexpr std::string_view kRestart = "survives-restart";

constexpr std::size_t kChunkBytes = 64;     // each chunk the probe writes (self-describing: chunk.h)
constexpr std::size_t kMaxCitedPairs = 3;   // concurrent: violations shown with their steps
constexpr std::string_view kClient = "probe";

std::string fmt_s(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f s", s);
  return buf;
}

std::string one_line(std::string s, std::size_t max = 300) {
  for (char& c : s)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  if (s.size() > max) s = s.substr(0, max) + "...";
  return s;
}

std::string outcome_name(WriteOutcome o) {
  switch (o) {
    case WriteOutcome::kAccepted: return "accepted";
    case WriteOutcome::kRejected: return "rejected";
    case WriteOutcome::kUnknown: return "unknown";
    case WriteOutcome::kInvalid: return "invalid";
  }
  return "unknown";
}

bool is_accepted(const ProbeStep& s) { return s.outcome == "accepted"; }
bool is_rejected(const ProbeStep& s) { return s.outcome == "rejected"; }

/// What a write reply was, in words for an evidence line: "accepted", "rejected (high-water 5)",
/// "outcome unknown (Connection refused)", "called invalid (HTTP 400)".
std::string outcome_words(const ProbeStep& s) {
  if (s.outcome == "accepted") return "accepted";
  if (s.outcome == "rejected")
    return s.high_water != 0 ? "rejected (high-water " + std::to_string(s.high_water) + ")" : "rejected";
  if (s.outcome == "invalid")
    return "called invalid" + (s.http_status != 0 ? " (HTTP " + std::to_string(s.http_status) + ")" : std::string()) +
           (s.error.empty() ? "" : ": " + one_line(s.error, 120));
  return "of unknown outcome" + (s.error.empty() ? std::string() : " (" + one_line(s.error, 120) + ")");
}

// ---------------------------------------------------------------- the probe file

[[noreturn]] void fail_at(const std::string& file, const YAML::Mark& mark, const std::string& message) {
  if (mark.is_null() || mark.line < 0) throw ScenarioError(file, 1, 1, message);
  throw ScenarioError(file, mark.line + 1, mark.column + 1, message);
}

// The rest of a minimal scenario, so that the loader validates a lone `resource:` exactly as it
// validates a scenario's (the kind's parse(), file:line:col). Nothing of it is used.
constexpr std::string_view kWrapperBlock =
    "name: fencecheck-probe\n"
    "lease_ttl: 2s\n"
    "job: {key: fencecheck-probe}\n"
    "workers: [{id: probe}]\n"
    "expect: {outcome: safe}\n";
constexpr std::string_view kWrapperFlow =
    "name: fencecheck-probe, lease_ttl: 2s, job: {key: fencecheck-probe}, workers: [{id: probe}], "
    "expect: {outcome: safe}, ";

/// Lines of a text as a YAML parser counts them (a last line without '\n' counts).
std::size_t count_lines(std::string_view text) {
  const auto newlines = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
  return text.empty() || text.back() == '\n' ? newlines : newlines + 1;
}

/// Every line of `block` indented by `indent` spaces.
std::string indented(std::string_view block, std::size_t indent) {
  std::string out;
  std::size_t start = 0;
  while (start < block.size()) {
    const std::size_t nl = block.find('\n', start);
    const std::size_t end = nl == std::string_view::npos ? block.size() : nl + 1;
    out += std::string(indent, ' ');
    out += block.substr(start, end - start);
    start = end;
  }
  return out;
}

}  // namespace

ProbeResource load_probe_resource(const fs::path& path) {
  const std::string file = path.string();
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw ScenarioError(file, 0, 0, "is a directory, expected a probe file (a resource or a scenario)");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ScenarioError(file, 0, 0, "cannot read the probe file: " + std::generic_category().message(errno));
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) throw ScenarioError(file, 0, 0, "cannot read the probe file");
  const std::string text = buf.str();

  YamlDocuments docs;
  try {
    docs = load_yaml_documents(text);  // not YAML::LoadAll: yaml_documents.h
  } catch (const YAML::Exception& e) {
    fail_at(file, e.mark, std::string(dynamic_cast<const YAML::ParserException*>(&e) ? "YAML syntax error: " : "YAML error: ") + e.msg);
  }
  ProbeResource out;
  out.source = file;
  const YAML::Node root = docs.count == 0 ? YAML::Node() : docs.first;
  // A scenario (it has a name), or more than one document: the scenario loader says everything.
  if (docs.count > 1 || (root.IsMap() && root["name"])) {
    Scenario sc = parse_scenario(text, file);
    out.spec = sc.resource();
    out.scenario = sc.name();
    return out;
  }
  if (!root.IsMap())
    fail_at(file, root.Mark(),
            root.IsNull() ? "the file is empty: expected a mapping `resource: {kind: ..., ...}` (or a whole scenario)"
                          : "expected a mapping `resource: {kind: ..., ...}` (or a whole scenario)");
  for (auto it = root.begin(); it != root.end(); ++it) {
    const YAML::Node k = it->first;
    if (!k.IsScalar() || k.Scalar() != "resource")
      fail_at(file, k.Mark(),
              "unknown key " + (k.IsScalar() ? "\"" + k.Scalar() + "\"" : std::string("(not a name)")) +
                  ": a probe file holds only `resource:` (or is a whole scenario, with name, lease_ttl, ...)");
  }
  if (!root["resource"]) fail_at(file, root.Mark(), "missing required field \"resource\"");

  // Wrap, keeping every position of the user's text: a block mapping gets the rest of a scenario
  // after its last line; a flow mapping ({...}, JSON) right after its opening brace, and errors on
  // that line are shifted back by the inserted length.
  std::string wrapped;
  std::size_t insert_line = 0, shift = 0;
  if (root.Style() == YAML::EmitterStyle::Flow && root.Mark().pos >= 0 &&
      static_cast<std::size_t>(root.Mark().pos) < text.size() && text[static_cast<std::size_t>(root.Mark().pos)] == '{') {
    const auto at = static_cast<std::size_t>(root.Mark().pos) + 1;
    wrapped = text.substr(0, at) + std::string(kWrapperFlow) + text.substr(at);
    insert_line = static_cast<std::size_t>(root.Mark().line) + 1;
    shift = kWrapperFlow.size();
  } else {
    wrapped = text;
    if (!wrapped.empty() && wrapped.back() != '\n') wrapped += '\n';
    wrapped += indented(kWrapperBlock, root.Mark().column > 0 ? static_cast<std::size_t>(root.Mark().column) : 0);
  }
  const std::size_t user_lines = count_lines(text);
  try {
    Scenario sc = parse_scenario(wrapped, file);
    out.spec = sc.resource();
    auto& pos = out.spec.positions;
    for (auto& [field, lc] : pos)
      if (shift != 0 && static_cast<std::size_t>(lc.first) == insert_line && static_cast<std::size_t>(lc.second) > shift)
        lc.second -= static_cast<int>(shift);
  } catch (const ScenarioError& e) {
    const auto line = static_cast<std::size_t>(e.line());
    if (line > user_lines)
      throw ScenarioError(file, 0, 0,
                          "cannot read `resource:` from this file (" + e.message() +
                              "); write it as one YAML document holding only `resource:`, or give a whole scenario");
    int col = e.column();
    if (shift != 0 && line == insert_line && static_cast<std::size_t>(col) > shift) col -= static_cast<int>(shift);
    throw ScenarioError(e.file(), e.line(), col, e.message());
  }
  return out;
}

// ---------------------------------------------------------------- names and step text

std::string_view to_string(ProbeVerdict v) {
  switch (v) {
    case ProbeVerdict::kHolds: return "holds";
    case ProbeVerdict::kBroken: return "broken";
    case ProbeVerdict::kNotApplicable: return "not-applicable";
    case ProbeVerdict::kUnknown: return "unknown";
  }
  return "unknown";
}

std::vector<std::int64_t> probe_token_crossings(std::int64_t base) {
  std::vector<std::int64_t> out;
  // The first four powers of ten whose b - 1 is above the base (digit-length boundaries)...
  std::int64_t p = 10;
  for (int found = 0; found < 4 && p <= std::numeric_limits<std::int64_t>::max() / 10; p *= 10)
    if (p - 1 > base) {
      out.push_back(p);
      ++found;
    }
  // ... and the binary ones: 32-bit signed and unsigned integers, a double's exact integers.
  for (const std::int64_t b : {std::int64_t{1} << 31, std::int64_t{1} << 32, std::int64_t{1} << 53})
    if (b - 1 > base) out.push_back(b);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

const std::vector<std::string_view>& probe_rule_names() {
  static const std::vector<std::string_view> names{kLower, kEqual, kPerKey, kConcurrent, kNoChange, kTokenRequired, kRestart};
  return names;
}

std::string ProbeStep::request_text() const {
  if (op == "write" || op == "raw-write") {
    std::string s = op + " " + key + " seg " + std::to_string(segment) + " chunk " + std::to_string(chunk) + " token " +
                    (op == "raw-write" ? token_text : std::to_string(token));
    if (!client.empty()) s += " client " + client;
    return s;
  }
  if (op == "log")
    return "accept log: seq " + std::to_string(seq) + " " + key + " seg " + std::to_string(segment) + " chunk " +
           std::to_string(chunk) + " token " + std::to_string(token) + " client " + client;
  return op;
}

std::string ProbeStep::reply_text() const {
  std::string s = outcome;
  std::vector<std::string> parts;
  if (http_status != 0) parts.push_back("HTTP " + std::to_string(http_status));
  if (high_water != 0) parts.push_back("high-water " + std::to_string(high_water));
  if (seq != 0 && op != "log") parts.push_back("seq " + std::to_string(seq));
  if (!parts.empty()) {
    s += " (";
    for (std::size_t i = 0; i < parts.size(); ++i) s += (i ? ", " : "") + parts[i];
    s += ")";
  }
  if (!error.empty()) s += ": " + one_line(error);
  if (!note.empty()) s += " -- " + note;
  return s;
}

// ---------------------------------------------------------------- the probe itself

namespace {

/// "http://host[:port][/base]" -> endpoint and base path. nullopt when it is not that.
struct RawUrl {
  http::Endpoint endpoint;
  std::string base;
};

std::optional<RawUrl> parse_raw_url(std::string_view url) {
  constexpr std::string_view kScheme = "http://";
  if (url.size() <= kScheme.size() || url.substr(0, kScheme.size()) != kScheme) return std::nullopt;
  std::string_view rest = url.substr(kScheme.size());
  const auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  RawUrl out;
  out.base = slash == std::string_view::npos ? "" : std::string(rest.substr(slash));
  while (!out.base.empty() && out.base.back() == '/') out.base.pop_back();
  std::string_view host = authority, port;
  if (!authority.empty() && authority.front() == '[') {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = authority.substr(1, close - 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') return std::nullopt;
      port = authority.substr(close + 2);
    }
  } else if (const auto colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  if (host.empty()) return std::nullopt;
  out.endpoint.host = std::string(host);
  out.endpoint.port = 80;
  if (!port.empty()) {
    int p = 0;
    for (char c : port) {
      if (c < '0' || c > '9' || p > 65535) return std::nullopt;
      p = p * 10 + (c - '0');
    }
    if (p < 1 || p > 65535) return std::nullopt;
    out.endpoint.port = p;
  }
  return out;
}

std::string replace_all(std::string s, std::string_view from, const std::string& to) {
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

std::string endpoint_string(const nlohmann::json& endpoint, const char* name, std::string_view fallback) {
  auto it = endpoint.find(name);
  return it != endpoint.end() && it->is_string() ? it->get<std::string>() : std::string(fallback);
}

/// What the read-back holds for one key: the part a write to that key may change.
struct KeyView {
  std::vector<StoredChunk> chunks;
  std::vector<AcceptedWrite> log;
  std::optional<std::int64_t> high_water;
};

KeyView view_of(const ReadBack& rb, const std::string& key) {
  KeyView v;
  for (const auto& c : rb.chunks)
    if (c.key == key) v.chunks.push_back(c);
  for (const auto& l : rb.log)
    if (l.key == key) v.log.push_back(l);
  if (auto it = rb.high_water.find(key); it != rb.high_water.end()) v.high_water = it->second;
  auto by_slot = [](const StoredChunk& a, const StoredChunk& b) {
    return std::tie(a.segment, a.chunk) < std::tie(b.segment, b.chunk);
  };
  std::sort(v.chunks.begin(), v.chunks.end(), by_slot);
  return v;
}

std::string describe_view(const KeyView& v, const resources::Evidence& ev) {
  std::string s = std::to_string(v.chunks.size()) + " chunk" + (v.chunks.size() == 1 ? "" : "s");
  if (ev.accept_log) s += ", " + std::to_string(v.log.size()) + " accept-log entr" + (v.log.size() == 1 ? "y" : "ies");
  if (ev.high_water) s += ", high-water " + (v.high_water ? std::to_string(*v.high_water) : std::string("none"));
  return s;
}

std::string describe_chunk(const StoredChunk& c) {
  return "token " + std::to_string(c.token) + " client " + c.client + " seq " + std::to_string(c.seq) + " (" +
         std::to_string(c.data.size()) + " bytes, crc " + std::to_string(crc32(c.data)) + ")";
}

/// Every difference between two views of a key, one line each ("" when identical).
std::vector<std::string> diff_views(const KeyView& before, const KeyView& after, const resources::Evidence& ev) {
  std::vector<std::string> out;
  std::map<std::pair<std::int64_t, std::int64_t>, const StoredChunk*> b, a;
  for (const auto& c : before.chunks) b[{c.segment, c.chunk}] = &c;
  for (const auto& c : after.chunks) a[{c.segment, c.chunk}] = &c;
  auto slot = [](const std::pair<std::int64_t, std::int64_t>& s) {
    return "seg " + std::to_string(s.first) + " chunk " + std::to_string(s.second);
  };
  for (const auto& [s, c] : b) {
    auto it = a.find(s);
    if (it == a.end()) {
      out.push_back(slot(s) + " disappeared (was " + describe_chunk(*c) + ")");
      continue;
    }
    const StoredChunk& n = *it->second;
    if (n.token != c->token || n.client != c->client || n.seq != c->seq || n.data != c->data)
      out.push_back(slot(s) + " changed: " + describe_chunk(*c) + " -> " + describe_chunk(n));
  }
  for (const auto& [s, c] : a)
    if (!b.count(s)) out.push_back(slot(s) + " appeared: " + describe_chunk(*c));
  if (ev.accept_log) {
    auto same = [](const AcceptedWrite& x, const AcceptedWrite& y) {
      return x.seq == y.seq && x.segment == y.segment && x.chunk == y.chunk && x.token == y.token && x.client == y.client;
    };
    if (before.log.size() != after.log.size() || !std::equal(before.log.begin(), before.log.end(), after.log.begin(), same)) {
      std::string s = "accept log " + std::to_string(before.log.size()) + " -> " + std::to_string(after.log.size()) + " entries";
      for (const auto& l : after.log)
        if (std::none_of(before.log.begin(), before.log.end(), [&](const AcceptedWrite& x) { return same(x, l); }))
          s += "; new: seq " + std::to_string(l.seq) + " seg " + std::to_string(l.segment) + " chunk " +
               std::to_string(l.chunk) + " token " + std::to_string(l.token) + " client " + l.client;
      out.push_back(s);
    }
  }
  if (ev.high_water && before.high_water != after.high_water)
    out.push_back("high-water " + (before.high_water ? std::to_string(*before.high_water) : std::string("none")) + " -> " +
                  (after.high_water ? std::to_string(*after.high_water) : std::string("none")));
  return out;
}

/// A pair of accepted writes on one key: `higher` (token) came first, `lower` after it.
struct Inversion {
  std::size_t round = 0;
  ProbeStep higher, lower;
  std::string source;  ///< "replies in real time", "reply seqs", "accept log"
};

class Prober {
 public:
  Prober(const ProbeTarget& target, ProbeOptions options, ProbeWriterFactory make_writer)
      : target_(target), opt_(std::move(options)), make_writer_(std::move(make_writer)), start_(Clock::now()) {
    if (!make_writer_) make_writer_ = [](const nlohmann::json& ep, std::chrono::milliseconds t) { return make_resource_writer(ep, t); };
    last_token_ = opt_.token_base;
    endpoint_ = target_.instance->endpoint();
  }

  ProbeReport run() {
    ProbeReport report;
    report.source = target_.source;
    report.kind = target_.kind;
    report.design = target_.design;
    report.describe = target_.instance->describe();
    report.embedded = target_.embedded;
    report.evidence = target_.evidence;
    report.endpoint = endpoint_;
    using Rule = ProbeRuleResult (Prober::*)();
    const std::vector<std::pair<std::string_view, Rule>> rules{
        {kLower, &Prober::lower_token_rejected}, {kEqual, &Prober::equal_token},
        {kPerKey, &Prober::per_key},             {kConcurrent, &Prober::concurrent},
        {kNoChange, &Prober::rejection_changes_nothing}, {kTokenRequired, &Prober::token_required},
        {kRestart, &Prober::survives_restart}};
    for (const auto& [name, fn] : rules) {
      const auto t0 = Clock::now();
      ProbeRuleResult r;
      try {
        r = (this->*fn)();
      } catch (const std::exception& e) {
        r = ProbeRuleResult{};
        r.verdict = ProbeVerdict::kUnknown;
        r.evidence = std::string("the probe could not run this rule: ") + one_line(e.what());
      }
      r.rule = std::string(name);
      if (r.verdict != ProbeVerdict::kBroken) r.anomaly.clear();
      r.duration_s = std::chrono::duration<double>(Clock::now() - t0).count();
      spdlog::debug("probe: {} {} ({:.3f} s): {}", name, to_string(r.verdict), r.duration_s, r.evidence);
      report.rules.push_back(std::move(r));
    }
    report.duration_s = std::chrono::duration<double>(Clock::now() - start_).count();
    report.options = opt_;
    report.keys = keys_;
    return report;
  }

 private:
  // ---- helpers

  double ms(Clock::time_point t) const { return std::chrono::duration<double, std::milli>(t - start_).count(); }
  std::int64_t next_token() { return ++last_token_; }
  std::string key(std::string_view suffix) {
    std::string k = opt_.key_prefix + "-" + std::string(suffix);
    if (std::find(keys_.begin(), keys_.end(), k) == keys_.end()) keys_.push_back(k);
    return k;
  }
  std::string short_key(const std::string& k) const {
    return k.size() > opt_.key_prefix.size() + 1 && k.compare(0, opt_.key_prefix.size(), opt_.key_prefix) == 0
               ? k.substr(opt_.key_prefix.size() + 1)
               : k;
  }
  std::unique_ptr<ResourceWriter> writer() {
    try {
      return make_writer_(endpoint_, opt_.timeout);
    } catch (const std::exception& e) {
      throw std::runtime_error(std::string("cannot make the kind's writer from its endpoint: ") + e.what());
    }
  }

  /// One write through the kind's writer. Thread-safe (touches nothing of the Prober's but start_).
  ProbeStep write(ResourceWriter& w, const std::string& k, std::int64_t segment, std::int64_t chunk, std::int64_t token,
                  std::string_view client) const {
    ProbeStep s;
    s.op = "write";
    s.key = k;
    s.segment = segment;
    s.chunk = chunk;
    s.token = token;
    s.client = std::string(client);
    const std::string bytes = encode_chunk(ChunkHeader{s.client, token, k, segment, chunk}, kChunkBytes);
    const auto sent = Clock::now();
    try {
      const WriteReply r = w.write(k, segment, chunk, FencingToken(token), client, bytes);
      s.replied_ms = ms(Clock::now());
      s.outcome = outcome_name(r.outcome);
      s.high_water = r.high_water;
      s.seq = r.outcome == WriteOutcome::kAccepted ? r.seq : 0;
      s.http_status = r.http_status;
      s.error = r.outcome == WriteOutcome::kAccepted ? "" : r.error;
    } catch (const std::exception& e) {
      s.replied_ms = ms(Clock::now());
      s.outcome = "unknown";
      s.error = std::string("the writer threw: ") + e.what();
    }
    s.sent_ms = ms(sent);
    return s;
  }

  /// Reads everything back; the step says whether it worked.
  std::optional<ReadBack> read_back(ProbeStep& s) const {
    s.op = "readback";
    const auto sent = Clock::now();
    try {
      // Only the probe's own keys: a user's table holds rows of theirs, which are never compared.
      const std::set<std::string> own(keys_.begin(), keys_.end());
      target_.instance->set_read_scope(own);
      ReadBack rb = target_.instance->readback();
      drop_foreign_rows(rb, own);
      s.outcome = "ok";
      s.sent_ms = ms(sent);
      s.replied_ms = ms(Clock::now());
      return rb;
    } catch (const std::exception& e) {
      s.outcome = "failed";
      s.error = e.what();
      s.sent_ms = ms(sent);
      s.replied_ms = ms(Clock::now());
      return std::nullopt;
    }
  }

  static ProbeRuleResult verdict(ProbeRuleResult r, ProbeVerdict v, std::string evidence, std::string anomaly = "") {
    r.verdict = v;
    r.evidence = std::move(evidence);
    r.anomaly = std::move(anomaly);
    return r;
  }

  /// The first write to a fresh key must be accepted: everything a rule concludes depends on it.
  std::optional<ProbeRuleResult> require_first_accepted(const ProbeRuleResult& r, const ProbeStep& s) const {
    if (is_accepted(s)) return std::nullopt;
    std::string why = "the first write to fresh key " + short_key(s.key) + " (token " + std::to_string(s.token) + ") was " +
                      outcome_words(s) + ": nothing to compare against";
    if (is_rejected(s)) why += " (a fresh key has no mark of its own: the resource's mark is not per key?)";
    return verdict(r, ProbeVerdict::kUnknown, why);
  }

  // ---- 1. lower-token-rejected

  ProbeRuleResult lower_token_rejected() {
    const std::vector<std::int64_t> crossings = probe_token_crossings(opt_.token_base);
    if (crossings.empty()) {  // a base past every boundary: one pair of the next tokens
      const std::int64_t lo = next_token(), hi = next_token();
      return lower_token_once("lower", lo, hi);
    }
    // One fresh key per boundary b, b then b - 1, in rising order (so that a resource with one
    // mark for every key accepts each b too): a token that crosses a digit-length boundary, 32
    // bits or a double's exact integers must compare as a number there as well.
    ProbeRuleResult r;
    std::vector<std::string> broken, unknown, held;
    for (const std::int64_t b : crossings) {
      last_token_ = b;
      ProbeRuleResult one = lower_token_once("lower-" + std::to_string(b), b - 1, b);
      const std::string pair = std::to_string(b - 1) + " after " + std::to_string(b);
      if (one.verdict == ProbeVerdict::kBroken) broken.push_back(pair);
      else if (one.verdict == ProbeVerdict::kHolds) held.push_back(pair);
      else unknown.push_back(pair + " (" + one.evidence + ")");
      for (auto& s : one.steps) r.steps.push_back(std::move(s));
    }
    const std::string of = " of " + std::to_string(crossings.size()) + " boundary crossings";
    if (!broken.empty()) {
      std::string ev = "the lower token was accepted at " + std::to_string(broken.size()) + of + ": " + join_words(broken);
      if (!held.empty())
        ev += "; rejected at " + join_words(held) +
              " (a resource that compares tokens as text, \"10\" < \"9\", or keeps them in too few bits)";
      else
        ev += " (the resource does not fence these keys)";
      return verdict(r, ProbeVerdict::kBroken, ev, "stale-write-accepted");
    }
    if (!unknown.empty())
      return verdict(r, ProbeVerdict::kUnknown,
                     "not decided at " + std::to_string(unknown.size()) + of + ": " + join_words(unknown, "; ") +
                         (held.empty() ? "" : "; rejected at " + join_words(held)));
    return verdict(r, ProbeVerdict::kHolds, "token b - 1 after b on a fresh key, rejected at each" + of + ": " + join_words(held));
  }

  /// "a, b and c" (evidence lines).
  static std::string join_words(const std::vector<std::string>& items, std::string_view sep = ", ") {
    std::string out;
    for (std::size_t k = 0; k < items.size(); ++k)
      out += (k == 0 ? "" : k + 1 == items.size() ? " and " : std::string(sep)) + items[k];
    return out;
  }

  /// hi to a fresh key, then lo (< hi): lo must be rejected.
  ProbeRuleResult lower_token_once(std::string_view suffix, std::int64_t lo, std::int64_t hi) {
    ProbeRuleResult r;
    auto w = writer();
    const std::string k = key(suffix);
    r.steps.push_back(write(*w, k, 0, 0, hi, kClient));
    if (auto bad = require_first_accepted(r, r.steps.back())) return *bad;
    r.steps.push_back(write(*w, k, 0, 1, lo, kClient));
    const ProbeStep& s = r.steps.back();
    const std::string what = "token " + std::to_string(lo) + " after " + std::to_string(hi) + " on key " + short_key(k);
    if (is_rejected(s)) return verdict(r, ProbeVerdict::kHolds, what + ": " + outcome_words(s));
    if (is_accepted(s)) {
      r.steps.back().note = "a lower token accepted after " + std::to_string(hi);
      return verdict(r, ProbeVerdict::kBroken, what + ": accepted (the resource does not fence this key)",
                     "stale-write-accepted");
    }
    return verdict(r, ProbeVerdict::kUnknown, what + ": " + outcome_words(s));
  }

  // ---- 2. equal-token

  ProbeRuleResult equal_token() {
    ProbeRuleResult r;
    auto w = writer();
    const std::string k = key("equal");
    const std::int64_t t = next_token();
    r.steps.push_back(write(*w, k, 0, 0, t, kClient));
    if (auto bad = require_first_accepted(r, r.steps.back())) return *bad;
    r.steps.push_back(write(*w, k, 0, 1, t, kClient));
    const ProbeStep& s = r.steps.back();
    const std::string what = "the same holder's next chunk under token " + std::to_string(t) + " on key " + short_key(k);
    if (is_accepted(s)) return verdict(r, ProbeVerdict::kHolds, what + ": accepted (token >= mark)");
    if (is_rejected(s)) {
      r.steps.back().note = "the holder's own token refused: a strict token > mark comparison";
      return verdict(r, ProbeVerdict::kBroken,
                     what + ": " + outcome_words(s) + "; a holder can write only one chunk per token (fenced out)",
                     "fenced-out");
    }
    return verdict(r, ProbeVerdict::kUnknown, what + ": " + outcome_words(s));
  }

  // ---- 3. per-key

  ProbeRuleResult per_key() {
    ProbeRuleResult r;
    auto w = writer();
    const std::string a = key("per-key-a"), b = key("per-key-b");
    const std::int64_t lo = next_token(), hi = next_token();
    r.steps.push_back(write(*w, a, 0, 0, hi, kClient));
    if (auto bad = require_first_accepted(r, r.steps.back())) return *bad;
    r.steps.push_back(write(*w, b, 0, 0, lo, kClient));
    const ProbeStep& s = r.steps.back();
    const std::string what = "token " + std::to_string(lo) + " on fresh key " + short_key(b) + " after " +
                             std::to_string(hi) + " on key " + short_key(a);
    if (is_accepted(s)) return verdict(r, ProbeVerdict::kHolds, what + ": accepted (one mark per key)");
    if (is_rejected(s)) {
      r.steps.back().note = "refused by another key's mark: one high-water mark for the whole resource";
      return verdict(r, ProbeVerdict::kBroken, what + ": " + outcome_words(s) + " (a global mark, not per key)",
                     "cross-key-rejection");
    }
    return verdict(r, ProbeVerdict::kUnknown, what + ": " + outcome_words(s));
  }

  // ---- 4. concurrent

  ProbeRuleResult concurrent() {
    ProbeRuleResult r;
    const auto rounds = static_cast<std::size_t>(opt_.rounds);
    const auto writers = static_cast<std::size_t>(opt_.writers);
    const auto chunks = static_cast<std::size_t>(opt_.chunks_per_writer);
    // The plan, from the seed alone: each round's key, which writer holds which token, and a
    // start jitter of 0-300 us before each write (so that no writer always goes first).
    std::mt19937_64 rng(opt_.seed);
    std::vector<std::string> keys(rounds);
    std::vector<std::vector<std::int64_t>> tokens(rounds, std::vector<std::int64_t>(writers));
    std::vector<std::vector<std::vector<int>>> jitter_us(rounds, std::vector<std::vector<int>>(writers, std::vector<int>(chunks)));
    for (std::size_t round = 0; round < rounds; ++round) {
      keys[round] = key("concurrent-" + std::to_string(round));
      auto& t = tokens[round];
      for (auto& tok : t) tok = next_token();
      for (std::size_t i = t.size(); i > 1; --i) std::swap(t[i - 1], t[static_cast<std::size_t>(rng() % i)]);  // Fisher-Yates
      for (auto& per_writer : jitter_us[round])
        for (auto& j : per_writer) j = static_cast<int>(rng() % 300);
    }
    std::vector<std::unique_ptr<ResourceWriter>> ws;
    for (std::size_t i = 0; i < writers; ++i) ws.push_back(writer());

    // Each writer thread, round by round: wait for every writer (a barrier), then write up to
    // `chunks` chunks under its token to its own segment of the round's key, stopping at the
    // first reply that is not accepted (as a holder would).
    std::vector<std::vector<std::vector<ProbeStep>>> steps(writers, std::vector<std::vector<ProbeStep>>(rounds));
    // Once a round's replies show the rule broken (a lower token accepted after a higher one, in
    // real time or by reply seqs), the rounds after it are not run: more of them would only count
    // the same thing again, and a resource that holds each write for a window (check-then-write)
    // would take rounds x 3 windows. Judged at each round's barrier, by its completion step (run
    // by one thread while every writer waits: the steps of the rounds before are settled).
    std::size_t phase = 0;           // barrier phases completed: the round about to start
    std::size_t rounds_run = rounds;  // rounds begun
    bool stop = false;                // written by the completion step only, read after the barrier
    const auto on_round = [&]() noexcept {
      if (phase > 0 && round_shows_inversion(steps, phase - 1)) {
        stop = true;
        rounds_run = phase;
      }
      ++phase;
    };
    std::barrier sync(static_cast<std::ptrdiff_t>(writers), on_round);
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < writers; ++i) {
      threads.emplace_back([&, i] {
        const std::string client = std::string(kClient) + "-w" + std::to_string(i + 1);
        for (std::size_t round = 0; round < rounds; ++round) {
          sync.arrive_and_wait();
          if (stop) break;
          for (std::size_t j = 0; j < chunks; ++j) {
            if (const int us = jitter_us[round][i][j]; us > 0) std::this_thread::sleep_for(std::chrono::microseconds(us));
            steps[i][round].push_back(write(*ws[i], keys[round], static_cast<std::int64_t>(i), static_cast<std::int64_t>(j),
                                            tokens[round][i], client));
            if (!is_accepted(steps[i][round].back())) break;
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    for (std::size_t round = rounds_run; round < rounds; ++round)  // keys never written
      keys_.erase(std::remove(keys_.begin(), keys_.end(), keys[round]), keys_.end());

    std::size_t sent = 0, accepted = 0, rejected = 0, unknown = 0, invalid = 0;
    std::vector<Inversion> found;
    std::set<std::size_t> bad_rounds;
    // Each lower write counted once, whichever evidence shows it first (replies in real time, then
    // the accept log, then reply seqs).
    std::set<std::tuple<std::string, std::int64_t, std::int64_t>> counted;
    auto add = [&](Inversion inv) {
      if (!counted.insert({inv.lower.key, inv.lower.segment, inv.lower.chunk}).second) return;
      bad_rounds.insert(inv.round);
      if (found.size() < kMaxCitedPairs) found.push_back(std::move(inv));
    };
    std::map<std::string, std::size_t> round_of;
    for (std::size_t round = 0; round < rounds; ++round) round_of[keys[round]] = round;
    std::vector<std::vector<const ProbeStep*>> acc(rounds);
    for (std::size_t round = 0; round < rounds; ++round) {
      for (std::size_t i = 0; i < writers; ++i)
        for (const auto& s : steps[i][round]) {
          ++sent;
          if (is_accepted(s)) ++accepted, acc[round].push_back(&s);
          else if (is_rejected(s)) ++rejected;
          else if (s.outcome == "invalid") ++invalid;
          else ++unknown;
        }
      // Replies in real time: a lower token accepted although its request was sent after a
      // higher token's accept reply had arrived.
      for (const ProbeStep* lower : acc[round])
        for (const ProbeStep* higher : acc[round])
          if (higher->token > lower->token && higher->replied_ms < lower->sent_ms) {
            add({round, *higher, *lower, "replies in real time"});
            break;
          }
    }
    // The accept log, where the kind has one: per key in the resource's acceptance order.
    bool log_checked = false;
    std::string log_problem;
    if (target_.evidence.accept_log) {
      ProbeStep rs;
      if (auto rb = read_back(rs)) {
        log_checked = true;
        std::vector<AcceptedWrite> log = rb->log;
        std::sort(log.begin(), log.end(), [](const AcceptedWrite& x, const AcceptedWrite& y) { return x.seq < y.seq; });
        auto as_step = [](const AcceptedWrite& l) {
          ProbeStep s;
          s.op = "log";
          s.key = l.key;
          s.segment = l.segment;
          s.chunk = l.chunk;
          s.token = l.token;
          s.client = l.client;
          s.seq = l.seq;
          s.outcome = "accepted";
          return s;
        };
        std::map<std::string, const AcceptedWrite*> top;
        for (const auto& l : log) {
          auto it = round_of.find(l.key);
          if (it == round_of.end()) continue;
          const AcceptedWrite*& t = top[l.key];
          if (t != nullptr && l.token < t->token) add({it->second, as_step(*t), as_step(l), "accept log"});
          if (t == nullptr || l.token > t->token) t = &l;
        }
      } else {
        log_problem = rs.error;
        r.steps.push_back(rs);
      }
    }
    // Reply seqs: the resource's own acceptance order, where its replies give one.
    bool seqs_seen = false;
    for (std::size_t round = 0; round < rounds; ++round) {
      std::vector<const ProbeStep*> by_seq;
      for (const ProbeStep* s : acc[round])
        if (s->seq > 0) by_seq.push_back(s);
      seqs_seen = seqs_seen || !by_seq.empty();
      std::sort(by_seq.begin(), by_seq.end(), [](const ProbeStep* x, const ProbeStep* y) { return x->seq < y->seq; });
      const ProbeStep* top = nullptr;
      for (const ProbeStep* s : by_seq) {
        if (top != nullptr && s->token < top->token) add({round, *top, *s, "reply seqs"});
        if (top == nullptr || s->token > top->token) top = s;
      }
    }
    const std::size_t pairs = counted.size();

    std::string checked = "replies in real time";
    if (seqs_seen) checked += ", reply seqs";
    if (log_checked) checked += ", the accept log";
    const std::string ran = rounds_run < rounds ? std::to_string(rounds_run) + " of " + std::to_string(rounds) +
                                                      " rounds (stopped once a round showed the rule broken)"
                                                : std::to_string(rounds) + " rounds";
    const std::string counts = ran + " x " + std::to_string(writers) + " writers: " +
                               std::to_string(sent) + " writes, " + std::to_string(accepted) + " accepted, " +
                               std::to_string(rejected) + " rejected" +
                               (unknown ? ", " + std::to_string(unknown) + " unknown" : std::string()) +
                               (invalid ? ", " + std::to_string(invalid) + " invalid" : std::string());
    if (pairs > 0) {
      const Inversion& first = found.front();
      // The probe's own write behind a log entry: writer `segment`'s write number `chunk` of the round.
      auto write_of = [&](std::size_t round, const ProbeStep& entry) -> const ProbeStep* {
        if (entry.segment < 0 || static_cast<std::size_t>(entry.segment) >= writers || entry.chunk < 0) return nullptr;
        const auto& mine = steps[static_cast<std::size_t>(entry.segment)][round];
        if (static_cast<std::size_t>(entry.chunk) >= mine.size()) return nullptr;
        const ProbeStep& w = mine[static_cast<std::size_t>(entry.chunk)];
        return w.token == entry.token ? &w : nullptr;
      };
      for (const auto& inv : found) {
        const std::string where = "round " + std::to_string(inv.round) + ", " + inv.source;
        ProbeStep h = inv.higher, l = inv.lower;
        h.note = where + ": the higher token, accepted first";
        l.note = where + ": token " + std::to_string(l.token) + " accepted after " + std::to_string(h.token);
        r.steps.push_back(h);
        r.steps.push_back(l);
        if (inv.source == "accept log") {  // and the requests and replies behind the two entries
          for (const ProbeStep* w : {write_of(inv.round, inv.higher), write_of(inv.round, inv.lower)}) {
            if (w == nullptr) continue;
            r.steps.push_back(*w);
            r.steps.back().note = where + ": the write behind seq " + std::to_string(w->seq);
          }
        }
      }
      std::string ev = std::to_string(bad_rounds.size()) + " of " + std::to_string(rounds_run) +
                       " rounds left a lower token accepted after a higher one (" + std::to_string(pairs) + " such write" +
                       (pairs == 1 ? "" : "s") + "); first: round " + std::to_string(first.round) + " (key " +
                       short_key(first.lower.key) + "), " + first.source + ": token " + std::to_string(first.lower.token) +
                       " accepted after " + std::to_string(first.higher.token) + "; " + counts;
      return verdict(r, ProbeVerdict::kBroken, ev, "stale-write-accepted");
    }
    if (target_.evidence.accept_log && !log_checked)
      return verdict(r, ProbeVerdict::kUnknown,
                     counts + "; no inversion in the replies, but the accept log could not be read: " + one_line(log_problem, 160));
    if (unknown > 0 && !log_checked)
      return verdict(r, ProbeVerdict::kUnknown,
                     counts + "; no inversion in the replies, but " + std::to_string(unknown) +
                         " outcome(s) are unknown and the kind has no accept log to settle them");
    if (accepted == 0)
      return verdict(r, ProbeVerdict::kUnknown, counts + ": nothing was accepted, so nothing could be inverted");
    return verdict(r, ProbeVerdict::kHolds, counts + "; no lower token accepted after a higher one (checked: " + checked + ")");
  }

  /// Whether the replies of one round of `concurrent` already show a lower token accepted after a
  /// higher one on its key: in real time (the lower's request sent after the higher's accept reply
  /// came), or by the reply seqs. steps[writer][round]. Pure.
  static bool round_shows_inversion(const std::vector<std::vector<std::vector<ProbeStep>>>& steps, std::size_t round) {
    std::vector<const ProbeStep*> acc;
    for (const auto& writer : steps)
      for (const ProbeStep& s : writer[round])
        if (is_accepted(s)) acc.push_back(&s);
    for (const ProbeStep* lower : acc)
      for (const ProbeStep* higher : acc)
        if (higher->token > lower->token && higher->replied_ms < lower->sent_ms) return true;
    std::vector<const ProbeStep*> by_seq;
    for (const ProbeStep* s : acc)
      if (s->seq > 0) by_seq.push_back(s);
    std::sort(by_seq.begin(), by_seq.end(), [](const ProbeStep* x, const ProbeStep* y) { return x->seq < y->seq; });
    std::int64_t top = std::numeric_limits<std::int64_t>::min();
    for (const ProbeStep* s : by_seq) {
      if (s->token < top) return true;
      top = std::max(top, s->token);
    }
    return false;
  }

  // ---- 5. rejection-changes-nothing

  ProbeRuleResult rejection_changes_nothing() {
    ProbeRuleResult r;
    if (!target_.evidence.chunks)
      return verdict(r, ProbeVerdict::kNotApplicable,
                     "the kind's read-back does not return chunk contents, so before and after cannot be compared");
    auto w = writer();
    const std::string k = key("no-change");
    const std::int64_t lo = next_token(), hi = next_token();
    r.steps.push_back(write(*w, k, 0, 0, hi, kClient));
    if (auto bad = require_first_accepted(r, r.steps.back())) return *bad;
    ProbeStep before_step;
    auto before = read_back(before_step);
    r.steps.push_back(before_step);
    if (!before) return verdict(r, ProbeVerdict::kUnknown, "the read-back before the rejected writes failed: " + one_line(before_step.error, 160));
    const KeyView vb = view_of(*before, k);
    r.steps.back().note = "key " + short_key(k) + ": " + describe_view(vb, target_.evidence);
    // An accepted write and no chunk of its key read back: "identical before and after" would
    // compare nothing with nothing (a read_back that does not return the probe's keys).
    if (vb.chunks.empty())
      return verdict(r, ProbeVerdict::kUnknown,
                     "the read-back shows no chunk of key " + short_key(k) + " after its write with token " +
                         std::to_string(hi) + " was accepted, so a comparison of before and after would test nothing "
                         "(does read_back return the rows the write stores, for the keys in $keys?)");
    // The lower token, to the slot the higher one wrote (an overwrite) and to a new slot.
    r.steps.push_back(write(*w, k, 0, 0, lo, kClient));
    r.steps.push_back(write(*w, k, 0, 1, lo, kClient));
    const ProbeStep over = r.steps[r.steps.size() - 2], fresh = r.steps.back();
    ProbeStep after_step;
    auto after = read_back(after_step);
    r.steps.push_back(after_step);
    if (!is_rejected(over) || !is_rejected(fresh)) {
      const ProbeStep& s = is_rejected(over) ? fresh : over;
      return verdict(r, ProbeVerdict::kUnknown,
                     "the lower token " + std::to_string(lo) + " (seg " + std::to_string(s.segment) + " chunk " +
                         std::to_string(s.chunk) + ") was " + outcome_words(s) + ", not rejected: no rejection to examine" +
                         (is_accepted(s) ? " (see lower-token-rejected)" : ""));
    }
    if (!after) return verdict(r, ProbeVerdict::kUnknown, "the read-back after the rejected writes failed: " + one_line(after_step.error, 160));
    const KeyView va = view_of(*after, k);
    r.steps.back().note = "key " + short_key(k) + ": " + describe_view(va, target_.evidence);
    const auto diffs = diff_views(vb, va, target_.evidence);
    const std::string what = "2 rejected writes (token " + std::to_string(lo) + " after " + std::to_string(hi) +
                             ": an overwrite of seg 0 chunk 0 and a new seg 0 chunk 1) on key " + short_key(k);
    if (diffs.empty())
      return verdict(r, ProbeVerdict::kHolds, what + ": read-back identical before and after (" + describe_view(va, target_.evidence) + ")");
    std::string all;
    for (const auto& d : diffs) all += (all.empty() ? "" : "; ") + d;
    r.steps.back().note += "; changed: " + all;
    return verdict(r, ProbeVerdict::kBroken, what + " changed it: " + all);
  }

  // ---- 6. token-required

  ProbeRuleResult token_required() {
    ProbeRuleResult r;
    auto url = endpoint_.find("url");
    if (url == endpoint_.end() || !url->is_string())
      return verdict(r, ProbeVerdict::kNotApplicable,
                     "the endpoint of kind " + target_.kind + " has no url: its writer sends the token as a typed "
                     "integer (e.g. an SQL parameter), so a write without one cannot be sent");
    const auto raw = parse_raw_url(url->get<std::string>());
    if (!raw) return verdict(r, ProbeVerdict::kUnknown, "the endpoint's url \"" + url->get<std::string>() + "\" is not http://host[:port][/path]");
    // The HTTP write contract (docs/resource-http.md); its defaults are fencecheck-store's.
    const std::string method = endpoint_string(endpoint_, "method", "PUT");
    const std::string path = endpoint_string(endpoint_, "path", "/v1/keys/{key}/segments/{segment}/chunks/{chunk}");
    const std::string token_header = endpoint_string(endpoint_, "token_header", "Fencing-Token");
    const std::string writer_header = endpoint_string(endpoint_, "writer_header", "Fencecheck-Client");
    const std::string k = key("token");
    const http::Timeouts timeouts{opt_.timeout, opt_.timeout, opt_.timeout};

    auto send = [&](std::int64_t chunk, std::optional<std::string> token_value) {
      ProbeStep s;
      s.op = "raw-write";
      s.key = k;
      s.segment = 0;
      s.chunk = chunk;
      s.client = std::string(kClient);
      s.token_text = token_value ? "\"" + *token_value + "\"" : "(none)";
      if (token_value) {
        const TokenParse p = parse_token(*token_value);
        s.token = p.ok ? p.token.value() : 0;
      }
      http::Request req;
      req.method = method;
      req.target = raw->base + replace_all(replace_all(replace_all(path, "{key}", k), "{segment}", "0"), "{chunk}", std::to_string(chunk));
      req.content_type = "application/octet-stream";
      if (token_value) req.headers.emplace_back(token_header, *token_value);
      req.headers.emplace_back(writer_header, s.client);
      req.body = encode_chunk(ChunkHeader{s.client, s.token, k, 0, chunk}, kChunkBytes);
      const auto sent = Clock::now();
      const http::Reply rep = http::exchange(raw->endpoint, req, timeouts);
      s.sent_ms = ms(sent);
      s.replied_ms = ms(Clock::now());
      s.http_status = rep.complete() ? rep.status : 0;
      if (!rep.complete()) {
        s.outcome = "unknown";
        s.error = method + " " + url->get<std::string>() + req.target + ": " + rep.error_text();
      } else if (rep.status >= 200 && rep.status < 300) {
        s.outcome = "accepted";
      } else if (rep.status >= 400 && rep.status < 500) {
        s.outcome = "refused";
        auto j = nlohmann::json::parse(rep.body, nullptr, false);
        s.error = j.is_object() && j.contains("error") && j["error"].is_string() ? j["error"].get<std::string>() : one_line(rep.body, 160);
      } else {
        s.outcome = "unknown";
        s.error = one_line(rep.body, 160);
      }
      return s;
    };
    // The three bad requests first, while the key has no mark (so that "-1" cannot be refused
    // merely for being below one), then a control with a valid token to the same path: without
    // it, a 404 from a wrong path would pass for a refusal.
    r.steps.push_back(send(0, std::nullopt));
    r.steps.push_back(send(1, "abc"));
    r.steps.push_back(send(2, "-1"));
    const std::int64_t good = next_token();
    r.steps.push_back(send(3, std::to_string(good)));
    r.steps.back().note = "control: a valid token to the same path";
    const ProbeStep control = r.steps.back();

    std::vector<std::string> accepted_bad, unknown_bad, summary;
    for (std::size_t i = 0; i < 3; ++i) {
      const ProbeStep& s = r.steps[i];
      summary.push_back(s.token_text + ": " + (s.http_status ? "HTTP " + std::to_string(s.http_status) : s.outcome));
      if (s.outcome == "accepted") accepted_bad.push_back(s.token_text), r.steps[i].note = "accepted without a valid token";
      else if (s.outcome != "refused") unknown_bad.push_back(s.token_text);
    }
    // Where the read-back shows chunks: the bad requests must have stored nothing.
    std::vector<std::string> stored_bad;
    if (target_.evidence.chunks) {
      ProbeStep rs;
      if (auto rb = read_back(rs)) {
        const KeyView v = view_of(*rb, k);
        for (const auto& c : v.chunks)
          if (c.segment == 0 && c.chunk >= 0 && c.chunk <= 2) stored_bad.push_back("seg 0 chunk " + std::to_string(c.chunk) + " (" + describe_chunk(c) + ")");
        rs.note = "key " + short_key(k) + ": " + describe_view(v, target_.evidence);
      }
      r.steps.push_back(rs);
    }
    std::string joined;
    for (const auto& s : summary) joined += (joined.empty() ? "" : ", ") + s;
    const std::string ctl = "control token " + std::to_string(good) + ": " +
                            (control.http_status ? "HTTP " + std::to_string(control.http_status) : control.outcome);
    if (!accepted_bad.empty() || !stored_bad.empty()) {
      std::string ev = "a write without a valid token was ";
      if (!accepted_bad.empty()) {
        std::string which;
        for (const auto& a : accepted_bad) which += (which.empty() ? "" : ", ") + a;
        ev += "accepted (token " + which + ")";
      }
      if (!stored_bad.empty()) {
        std::string which;
        for (const auto& a : stored_bad) which += (which.empty() ? "" : "; ") + a;
        ev += std::string(accepted_bad.empty() ? "" : " and ") + "stored: " + which;
      }
      return verdict(r, ProbeVerdict::kBroken, ev + " (" + joined + "; " + ctl + ")");
    }
    if (control.outcome != "accepted")
      return verdict(r, ProbeVerdict::kUnknown,
                     joined + "; but the " + ctl + " was not accepted either, so the raw requests may not reach the "
                     "write path and their refusals prove nothing" + (control.error.empty() ? "" : " (" + one_line(control.error, 120) + ")"));
    if (!unknown_bad.empty()) return verdict(r, ProbeVerdict::kUnknown, joined + " (no 4xx: outcome unknown); " + ctl);
    return verdict(r, ProbeVerdict::kHolds, "refused: " + joined + "; " + ctl + (target_.evidence.chunks ? "; nothing stored" : ""));
  }

  // ---- 7. survives-restart

  ProbeRuleResult survives_restart() {
    ProbeRuleResult r;
    if (!target_.embedded)
      return verdict(r, ProbeVerdict::kNotApplicable, "the resource is the user's (external): the harness does not own it and never restarts it");
    auto w = writer();
    const std::string k = key("restart");
    const std::int64_t lo1 = next_token(), lo2 = next_token(), hi = next_token();
    r.steps.push_back(write(*w, k, 0, 0, hi, kClient));
    if (auto bad = require_first_accepted(r, r.steps.back())) return *bad;
    // Before the restart: a lower token is rejected (else there is no mark to lose).
    r.steps.push_back(write(*w, k, 0, 1, lo2, kClient));
    if (!is_rejected(r.steps.back()))
      return verdict(r, ProbeVerdict::kUnknown,
                     "before any restart, token " + std::to_string(lo2) + " after " + std::to_string(hi) + " was " +
                         outcome_words(r.steps.back()) + ": no mark to lose" +
                         (is_accepted(r.steps.back()) ? " (see lower-token-rejected)" : ""));
    ProbeStep rs;
    rs.op = "restart";
    const auto t0 = Clock::now();
    bool restarted = false;
    try {
      restarted = target_.instance->restart();
      rs.outcome = restarted ? "ok" : "not supported";
    } catch (const std::exception& e) {
      rs.outcome = "failed";
      rs.error = e.what();
    }
    rs.sent_ms = ms(t0);
    rs.replied_ms = ms(Clock::now());
    r.steps.push_back(rs);
    if (rs.outcome == "failed") return verdict(r, ProbeVerdict::kUnknown, "the restart failed: " + one_line(rs.error, 160));
    if (!restarted)
      return verdict(r, ProbeVerdict::kNotApplicable, "resource kind " + target_.kind + " cannot restart its instance");
    endpoint_ = target_.instance->endpoint();
    w = writer();  // a writer holding a connection (a database session) lost it in the restart
    r.steps.push_back(write(*w, k, 0, 2, lo1, kClient));
    const ProbeStep& s = r.steps.back();
    const std::string what = "after a restart (" + fmt_s((rs.replied_ms - rs.sent_ms) / 1000.0) + "), token " + std::to_string(lo1) +
                             " after " + std::to_string(hi) + " on key " + short_key(k);
    if (is_rejected(s)) return verdict(r, ProbeVerdict::kHolds, what + ": " + outcome_words(s));
    if (is_accepted(s)) {
      r.steps.back().note = "the high-water mark " + std::to_string(hi) + " did not survive the restart";
      return verdict(r, ProbeVerdict::kBroken, what + ": accepted (the mark was lost in the restart)", "stale-write-accepted");
    }
    return verdict(r, ProbeVerdict::kUnknown, what + ": " + outcome_words(s));
  }

  const ProbeTarget& target_;
  ProbeOptions opt_;
  ProbeWriterFactory make_writer_;
  Clock::time_point start_;
  nlohmann::json endpoint_;
  std::int64_t last_token_ = 0;
  std::vector<std::string> keys_;
};

std::string random_hex(std::size_t digits) {
  std::random_device rd;
  std::string out;
  static constexpr char kHex[] = "0123456789abcdef";
  while (out.size() < digits) {
    auto v = rd();
    for (int i = 0; i < 8 && out.size() < digits; ++i, v >>= 4) out += kHex[v & 0xF];
  }
  return out;
}

void check_options(const ProbeOptions& o) {
  if (o.rounds < 1 || o.rounds > 100000) throw std::invalid_argument("--rounds must be between 1 and 100000, got " + std::to_string(o.rounds));
  if (o.writers < 2 || o.writers > 64) throw std::invalid_argument("--writers must be between 2 and 64, got " + std::to_string(o.writers));
  if (o.chunks_per_writer < 1 || o.chunks_per_writer > 1000)
    throw std::invalid_argument("chunks per writer must be between 1 and 1000, got " + std::to_string(o.chunks_per_writer));
  if (o.timeout.count() < 1) throw std::invalid_argument("--timeout-ms must be positive");
  if (o.token_base < 0 || o.token_base > (std::int64_t{1} << 62))
    throw std::invalid_argument("--token-base must be between 0 and 2^62 (4611686018427387904), got " +
                                std::to_string(o.token_base));
  if (!o.key_prefix.empty() && (o.key_prefix.size() > 200 || !is_safe_name(o.key_prefix, 200)))
    throw std::invalid_argument("the key prefix must be 1-200 characters of [A-Za-z0-9_.-], got \"" + o.key_prefix + "\"");
}

}  // namespace

ProbeReport run_probe(const ProbeTarget& target, const ProbeOptions& options, const ProbeWriterFactory& make_writer) {
  if (target.instance == nullptr) throw std::invalid_argument("run_probe: no resource instance");
  check_options(options);
  ProbeOptions o = options;
  if (o.key_prefix.empty()) o.key_prefix = "fencecheck-probe-" + random_hex(8);
  Prober p(target, o, make_writer);
  return p.run();
}

int probe_exit_code(const ProbeReport& report) {
  for (const auto& r : report.rules)
    if (r.verdict == ProbeVerdict::kBroken || r.verdict == ProbeVerdict::kUnknown) return kExitNotMet;
  return kExitMet;
}

// ---------------------------------------------------------------- output

namespace {

/// The keys as suffixes of the prefix, runs of "<stem>-<n>" folded: "concurrent-0 .. concurrent-49 (50)".
std::string keys_line(const ProbeReport& rep) {
  const std::string& prefix = rep.options.key_prefix;
  std::vector<std::string> parts;
  std::string stem;
  long first = -1, last = -1;
  auto flush = [&] {
    if (first < 0) return;
    if (first == last) parts.push_back(stem + std::to_string(first));
    else parts.push_back(stem + std::to_string(first) + " .. " + stem + std::to_string(last) + " (" + std::to_string(last - first + 1) + ")");
    first = last = -1;
  };
  for (const auto& k : rep.keys) {
    std::string s = k.compare(0, prefix.size() + 1, prefix + "-") == 0 ? k.substr(prefix.size() + 1) : k;
    const auto dash = s.rfind('-');
    const bool numbered = dash != std::string::npos && dash + 1 < s.size() &&
                          std::all_of(s.begin() + static_cast<std::ptrdiff_t>(dash) + 1, s.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
                          s.size() - dash - 1 < 10;
    if (numbered) {
      const std::string st = s.substr(0, dash + 1);
      const long n = std::stol(s.substr(dash + 1));
      if (first >= 0 && st == stem && n == last + 1) {
        last = n;
        continue;
      }
      flush();
      stem = st;
      first = last = n;
      continue;
    }
    flush();
    parts.push_back(s);
  }
  flush();
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

std::string step_line(const ProbeStep& s) {
  char at[32];
  if (s.op == "log")
    std::snprintf(at, sizeof at, "%13s", "");  // an entry the read-back holds: no time of its own
  else
    std::snprintf(at, sizeof at, "%+10.3f ms", s.sent_ms);
  std::string line = std::string(at) + "  " + s.request_text();
  if (s.op != "log") line += "  ->  " + s.reply_text();
  else if (!s.note.empty()) line += "  -- " + s.note;
  return line;
}

std::string steps_text(const ProbeRuleResult& r) {
  std::string out;
  for (const auto& s : r.steps) out += step_line(s) + "\n";
  return out;
}

std::size_t count_verdict(const ProbeReport& rep, ProbeVerdict v) {
  return static_cast<std::size_t>(std::count_if(rep.rules.begin(), rep.rules.end(), [v](const auto& r) { return r.verdict == v; }));
}

nlohmann::json step_json(const ProbeStep& s) {
  nlohmann::json j{{"op", s.op}, {"outcome", s.outcome}, {"sent_ms", s.sent_ms}, {"replied_ms", s.replied_ms}};
  if (!s.key.empty()) {
    j["key"] = s.key;
    j["segment"] = s.segment;
    j["chunk"] = s.chunk;
  }
  if (s.op == "write" || s.op == "log") j["token"] = s.token;
  if (s.op == "raw-write") j["token_header"] = s.token_text;
  if (!s.client.empty()) j["client"] = s.client;
  if (s.high_water != 0) j["high_water"] = s.high_water;
  if (s.seq != 0) j["seq"] = s.seq;
  if (s.http_status != 0) j["http_status"] = s.http_status;
  if (!s.error.empty()) j["error"] = s.error;
  if (!s.note.empty()) j["note"] = s.note;
  j["text"] = s.op == "log" ? s.request_text() : s.request_text() + " -> " + s.reply_text();
  return j;
}

}  // namespace

namespace {
/// "tokens: 9/10, 99/100, ..., then from 9007199254740993" (the table's header).
std::string tokens_line(std::int64_t base) {
  const auto crossings = probe_token_crossings(base);
  if (crossings.empty()) return "tokens from " + std::to_string(base + 1);
  std::string out = "tokens: lower-token-rejected crosses ";
  for (std::size_t k = 0; k < crossings.size(); ++k)
    out += (k ? ", " : "") + std::to_string(crossings[k] - 1) + "/" + std::to_string(crossings[k]);
  return out + "; the other rules use tokens from " + std::to_string(crossings.back() + 1);
}
}  // namespace

std::string format_probe_table(const ProbeReport& rep) {
  std::ostringstream o;
  o << "fencecheck probe: resource " << rep.kind << " (" << rep.design << ") from " << rep.source << "\n"
    << "  " << rep.describe << (rep.embedded ? ", embedded (started in " + fmt_s(rep.open_s) + ")" : ", external") << "\n"
    << "  keys written (prefix " << rep.options.key_prefix << "-): " << keys_line(rep) << "\n"
    << "  concurrent: seed " << rep.options.seed << ", " << rep.options.rounds << " rounds x " << rep.options.writers
    << " writers x " << rep.options.chunks_per_writer << " chunks; " << tokens_line(rep.options.token_base) << "\n\n";
  std::size_t w_rule = 4, w_verdict = 7;
  for (const auto& r : rep.rules) {
    w_rule = std::max(w_rule, r.rule.size());
    w_verdict = std::max(w_verdict, to_string(r.verdict).size());
  }
  auto row = [&](std::string_view a, std::string_view b, std::string_view c) {
    o << a << std::string(w_rule + 2 - a.size(), ' ') << b << std::string(w_verdict + 2 - b.size(), ' ') << c << "\n";
  };
  row("rule", "verdict", "evidence");
  for (const auto& r : rep.rules) row(r.rule, to_string(r.verdict), r.evidence);
  for (const auto& r : rep.rules) {
    if (r.verdict != ProbeVerdict::kBroken && r.verdict != ProbeVerdict::kUnknown) continue;
    o << "\n" << r.rule << ": " << to_string(r.verdict) << (r.anomaly.empty() ? "" : " (" + r.anomaly + ")") << "\n";
    for (const auto& s : r.steps) o << "  " << step_line(s) << "\n";
  }
  o << "\n"
    << rep.rules.size() << " rules: " << count_verdict(rep, ProbeVerdict::kHolds) << " hold, "
    << count_verdict(rep, ProbeVerdict::kBroken) << " broken, " << count_verdict(rep, ProbeVerdict::kNotApplicable)
    << " not applicable, " << count_verdict(rep, ProbeVerdict::kUnknown) << " unknown; probe " << fmt_s(rep.duration_s);
  if (rep.embedded) o << " (+ " << fmt_s(rep.open_s) << " starting the resource)";
  o << "\n";
  if (rep.probe_dir_kept) o << "probe directory kept: " << rep.probe_dir.string() << " (the resource's data and logs)\n";
  if (!rep.cleanup_outcome.empty() && rep.cleanup_outcome != "embedded")
    o << "rows the probe wrote: " << rep.cleanup_outcome << ": " << rep.cleanup << "\n";
  return o.str();
}

nlohmann::json probe_to_json(const ProbeReport& rep) {
  nlohmann::json rules = nlohmann::json::array();
  for (const auto& r : rep.rules) {
    nlohmann::json steps = nlohmann::json::array();
    for (const auto& s : r.steps) steps.push_back(step_json(s));
    nlohmann::json j{{"rule", r.rule}, {"verdict", to_string(r.verdict)}, {"evidence", r.evidence},
                     {"duration_s", r.duration_s}, {"steps", std::move(steps)}};
    if (!r.anomaly.empty()) j["anomaly"] = r.anomaly;
    rules.push_back(std::move(j));
  }
  return {
      {"source", rep.source},
      {"resource",
       {{"kind", rep.kind},
        {"design", rep.design},
        {"describe", rep.describe},
        {"embedded", rep.embedded},
        {"endpoint", rep.endpoint},
        {"evidence",
         {{"chunks", rep.evidence.chunks}, {"accept_log", rep.evidence.accept_log}, {"rejections", rep.evidence.rejections},
          {"high_water", rep.evidence.high_water}}}}},
      {"options",
       {{"seed", rep.options.seed},
        {"rounds", rep.options.rounds},
        {"writers", rep.options.writers},
        {"chunks_per_writer", rep.options.chunks_per_writer},
        {"timeout_ms", rep.options.timeout.count()},
        {"token_base", rep.options.token_base}}},
      {"key_prefix", rep.options.key_prefix},
      {"keys", rep.keys},
      {"rules", std::move(rules)},
      {"summary",
       {{"holds", count_verdict(rep, ProbeVerdict::kHolds)},
        {"broken", count_verdict(rep, ProbeVerdict::kBroken)},
        {"not_applicable", count_verdict(rep, ProbeVerdict::kNotApplicable)},
        {"unknown", count_verdict(rep, ProbeVerdict::kUnknown)}}},
      {"exit_code", probe_exit_code(rep)},
      {"duration_s", rep.duration_s},
      {"open_s", rep.open_s},
      {"probe_dir", rep.probe_dir_kept ? nlohmann::json(rep.probe_dir.string()) : nlohmann::json(nullptr)},
      {"cleanup",
       rep.cleanup_outcome.empty() ? nlohmann::json(nullptr)
                                   : nlohmann::json{{"outcome", rep.cleanup_outcome}, {"said", rep.cleanup}}},
  };
}

JUnitSuite probe_junit(const ProbeReport& rep) {
  JUnitSuite suite;
  suite.name = "probe";
  for (const auto& r : rep.rules) {
    JUnitCase c;
    c.name = r.rule;
    c.classname = "fencecheck.probe." + rep.kind;
    c.time_s = r.duration_s;
    c.message = r.evidence;
    c.system_out = "resource: " + rep.kind + " (" + rep.design + "), " + rep.describe + "\nverdict: " +
                   std::string(to_string(r.verdict)) + "\nevidence: " + r.evidence + "\n" + steps_text(r);
    switch (r.verdict) {
      case ProbeVerdict::kHolds: c.status = JUnitCase::Status::kPassed; break;
      case ProbeVerdict::kBroken:
        c.status = JUnitCase::Status::kFailed;
        c.type = r.anomaly.empty() ? r.rule : r.anomaly;
        c.details = r.evidence + "\n\nrequests and replies:\n" + steps_text(r);
        break;
      case ProbeVerdict::kNotApplicable: c.status = JUnitCase::Status::kSkipped; break;
      case ProbeVerdict::kUnknown:
        c.status = JUnitCase::Status::kError;
        c.type = "unknown";
        c.details = r.evidence + "\n\nrequests and replies:\n" + steps_text(r);
        break;
    }
    suite.cases.push_back(std::move(c));
  }
  return suite;
}

// ---------------------------------------------------------------- the command

namespace {

/// True when a file can be created at `path` (its directory is created): checked before the
/// probe starts, as `fencecheck run --junit` does.
bool writable(const fs::path& path) {
  std::error_code ec;
  const fs::path parent = fs::absolute(path, ec).parent_path();
  fs::create_directories(parent, ec);
  const fs::path test = parent / (".fencecheck-probe-write-test-" + std::to_string(::getpid()));
  const bool ok = !fs::is_directory(path, ec) && std::ofstream(test).good();
  fs::remove(test, ec);
  return ok;
}

void write_text_file(const fs::path& path, const std::string& text) {
  std::error_code ec;
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
  const fs::path tmp = path.string() + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << text;
    if (!f.flush()) throw std::runtime_error("cannot write " + tmp.string());
  }
  fs::rename(tmp, path);
}

std::string utc_stamp() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

}  // namespace

int probe_command(const ProbeCommandOptions& options, std::ostream& out, std::ostream& err) {
  try {
    check_options(options.probe);
  } catch (const std::invalid_argument& e) {
    err << "fencecheck probe: " << e.what() << "\n";
    return kExitBadInput;
  }
  for (const auto& [flag, path] : {std::pair<const char*, std::string>{"--json", options.json_path}, {"--junit", options.junit_path}}) {
    if (path.empty() || path == "-") continue;
    if (!writable(path)) {
      err << "fencecheck probe: " << flag << " " << path << ": cannot write a file there\n";
      return kExitBadInput;
    }
  }
  ProbeResource res;
  try {
    res = load_probe_resource(options.file);
  } catch (const ScenarioError& e) {
    err << e.what() << "\n";
    return kExitBadInput;
  }
  const resources::ResourceKind* kind = resources::find_resource_kind(res.spec.kind);
  if (kind == nullptr) {  // the loader accepted it, so it is registered; kept for safety
    err << "fencecheck probe: resource kind " << res.spec.kind << " is not registered\n";
    return kExitInternal;
  }

  // The probe's own directory: the embedded instance's data and logs.
  std::error_code ec;
  if (fs::exists(options.run_root, ec) && !fs::is_directory(options.run_root, ec)) {
    err << "fencecheck probe: --run-root " << options.run_root.string() << " exists and is not a directory\n";
    return kExitBadInput;
  }
  fs::create_directories(options.run_root, ec);
  std::string tmpl = (options.run_root / ("probe-" + utc_stamp() + "-XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    err << "fencecheck probe: cannot create a directory under --run-root " << options.run_root.string() << ": "
        << std::strerror(errno) << "\n";
    return kExitBadInput;
  }
  const fs::path dir = tmpl;
  fs::create_directories(dir / "logs", ec);
  auto remove_dir = [&dir] {
    std::error_code rm;
    fs::remove_all(dir, rm);
  };

  resources::ResourceRunContext ctx;
  ctx.run_dir = dir;
  ctx.log_path = [dir](const std::string& name) { return dir / "logs" / (name + ".log"); };
  ctx.bin_dir = options.bin_dir.empty() ? process::self_bin_dir() : options.bin_dir;
  ctx.run_id = dir.filename().string();

  std::unique_ptr<resources::ResourceInstance> instance;
  const auto t_open = Clock::now();
  try {
    instance = options.open ? options.open(*kind, res.spec.config, ctx) : kind->open(res.spec.config, ctx);
    if (!instance) throw std::runtime_error("the kind opened no instance");
    if (!instance->healthy()) {
      const std::string what = instance->describe();
      instance->stop();
      throw resources::ResourceUnavailable(what + " does not answer its health check");
    }
  } catch (const resources::ResourceUnavailable& e) {
    err << "fencecheck probe: resource " << res.spec.kind << " (" << res.source << "): " << e.what() << "\n";
    remove_dir();
    return kExitEnvironment;
  } catch (const resources::ResourceConfigError& e) {
    auto at = res.spec.positions.find(e.field());
    if (at == res.spec.positions.end()) at = res.spec.positions.find("");
    const auto [line, col] = at == res.spec.positions.end() ? std::pair<int, int>{0, 0} : at->second;
    err << ScenarioError(res.source, line, col, "resource" + (e.field().empty() ? std::string() : "." + e.field()) + ": " + e.what()).what()
        << "\n";
    remove_dir();
    return kExitBadInput;
  } catch (const ScenarioError& e) {
    err << e.what() << "\n";
    remove_dir();
    return kExitBadInput;
  } catch (const std::exception& e) {
    err << "fencecheck probe: could not open resource " << res.spec.kind << ": " << e.what() << " (logs: " << (dir / "logs").string()
        << ")\n";
    return kExitInternal;
  }
  const double open_s = std::chrono::duration<double>(Clock::now() - t_open).count();

  ProbeTarget target;
  target.instance = instance.get();
  target.kind = res.spec.kind;
  target.design = kind->design(res.spec.config);
  target.embedded = kind->embedded(res.spec.config);
  target.evidence = kind->evidence(res.spec.config);
  target.source = res.source;
  ProbeReport report;
  try {
    report = run_probe(target, options.probe, options.make_writer);
  } catch (const std::exception& e) {
    instance->stop();
    err << "fencecheck probe: internal error: " << e.what() << "\n";
    return kExitInternal;
  }
  // The rows the probe wrote: removed from a resource of the user's unless --keep; an embedded
  // one's go with its data directory.
  if (target.embedded) {
    report.cleanup_outcome = "embedded";
    report.cleanup = "the embedded resource's data goes with the probe's directory";
  } else if (options.keep) {
    report.cleanup_outcome = "kept";
    report.cleanup = "--keep: the rows of the " + std::to_string(report.keys.size()) + " keys the probe wrote (prefix " +
                     report.options.key_prefix + "-) are left in the resource";
  } else {
    const resources::ResourceInstance::Removal removal = instance->remove_keys(report.keys);
    report.cleanup_outcome = removal.removed ? "removed" : "left";
    report.cleanup = removal.removed ? removal.said
                                     : removal.said + " (" + std::to_string(report.keys.size()) + " keys, prefix " +
                                           report.options.key_prefix + "-)";
  }
  instance->stop();
  instance.reset();
  report.open_s = open_s;
  report.probe_dir = dir;
  const int code = probe_exit_code(report);
  report.probe_dir_kept = code != kExitMet;
  if (!report.probe_dir_kept) remove_dir();

  int result = code;
  try {
    if (!options.json_path.empty() && options.json_path != "-") write_text_file(options.json_path, probe_to_json(report).dump(2) + "\n");
    if (!options.junit_path.empty()) write_junit(options.junit_path, probe_junit(report));
  } catch (const std::exception& e) {
    err << "fencecheck probe: cannot write the report: " << e.what() << "\n";
    result = kExitInternal;
  }
  if (options.json_path == "-")
    out << probe_to_json(report).dump(2) << "\n";
  else
    out << format_probe_table(report);
  out.flush();
  return result;
}

}  // namespace fencecheck::harness
