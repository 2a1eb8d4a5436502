// fencecheck — `fencecheck probe`: does this resource keep the fencing rule? (docs/probe.md)
//
// The probe opens a resource through its kind (resource_kind.h: embedded in a directory of its
// own under --run-root, or the user's), with no lock service and no workers, and runs short
// deterministic sequences of writes through the kind's own writer (writer.h:
// make_resource_writer(instance.endpoint(), timeout)). Each sequence tests one rule of fencing
// (Kleppmann, "How to do distributed locking", 2016: the resource keeps the highest token it
// accepted per key and refuses a lower one, atomically with the write):
//
//   lower-token-rejected       a lower token after a higher one on the same key is rejected, at
//                              each boundary of probe_token_crossings() (9 after 10, ...)
//   equal-token                the same holder's next chunk under the same token is accepted
//   per-key                    a lower token on another, fresh key is accepted (the mark is per key)
//   concurrent                 concurrent writers with interleaved tokens never leave a lower
//                              token accepted after a higher one (replies in real time, reply
//                              seqs, the read-back's accept log)
//   rejection-changes-nothing  a rejected write leaves the key's read-back exactly as it was
//   token-required             a write without a token, or with "abc" or "-1", is refused (raw
//                              HTTP to an endpoint with a url; not applicable otherwise)
//   survives-restart           after a restart of an instance the harness owns, a lower token is
//                              still rejected
//
// Each rule comes out holds / broken / not-applicable / unknown, with a one-line evidence and the
// requests and replies that prove it. Only keys of the probe's own prefix
// ("fencecheck-probe-<random>-...") are ever written; every key is fresh, so tokens need only be
// positive, and each sequence's tokens are above every token the probe used before it. Its
// read-backs are scoped to those keys (ResourceInstance::set_read_scope; rows of other keys are
// dropped, never compared), and a comparison that finds no chunk of its key tested nothing: the
// rule is unknown, never holds. `fencecheck probe` removes the keys' rows at its end unless --keep.
//
// Thread-safety: run_probe() and probe_command() are reentrant (no global state); run_probe uses
// threads of its own for `concurrent` and joins them before returning. The formatting functions
// are pure.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fencecheck/harness/junit.h"
#include "fencecheck/harness/scenario.h"
#include "fencecheck/resources/resource_kind.h"
#include "fencecheck/resources/writer.h"

namespace fencecheck::harness {

/// A rule's verdict.
enum class ProbeVerdict {
  kHolds,          ///< the resource kept the rule in every sequence the probe ran
  kBroken,         ///< a reply (or the read-back) shows the rule broken; the steps prove it
  kNotApplicable,  ///< the rule cannot be tested on this kind or instance (the reason is the evidence)
  kUnknown,        ///< the probe could not decide (an outcome-unknown reply, a failed read-back,
                   ///< a precondition the resource did not meet); never counted as holding
};

/// "holds", "broken", "not-applicable", "unknown".
[[nodiscard]] std::string_view to_string(ProbeVerdict v);

/// The boundaries b whose crossing (b - 1 then b, on a fresh key) lower-token-rejected tests,
/// ascending, each with b - 1 > `base`: the first four powers of ten above the base (a resource
/// that compares tokens as text takes "10" for less than "9"), 2^31 and 2^32 (32-bit integers) and
/// 2^53 (the integers a double holds exactly: JSON numbers in JavaScript). Issue 31, item 2. Pure.
[[nodiscard]] std::vector<std::int64_t> probe_token_crossings(std::int64_t base);

/// The rules' names, in the order the probe runs them.
[[nodiscard]] const std::vector<std::string_view>& probe_rule_names();

/// One request the probe sent and what came back, or one thing it read.
struct ProbeStep {
  /// "write" (through the kind's writer), "raw-write" (a raw HTTP request: token-required),
  /// "readback", "restart", "log" (one entry of the read-back's accept log, cited as evidence).
  std::string op;
  std::string key;             ///< the key written or cited ("" for readback, restart)
  std::int64_t segment = 0;
  std::int64_t chunk = 0;
  std::int64_t token = 0;      ///< the token sent (0 when none or not a number: see `token_text`)
  std::string token_text;      ///< raw-write only: the token header's value as sent; "(none)" when absent
  std::string client;          ///< the writer id sent
  /// write: "accepted" / "rejected" / "unknown" / "invalid"; raw-write: "accepted" (2xx) /
  /// "refused" (4xx) / "unknown" (no reply, 1xx, 3xx, 5xx); readback: "ok" / "failed"; restart:
  /// "ok" / "failed" / "not supported"; log: "accepted".
  std::string outcome;
  std::int64_t high_water = 0;  ///< the key's high-water mark the reply (or read-back) gave; 0 = not said
  std::int64_t seq = 0;         ///< acceptance order the reply (or the log) gave; 0 = not said
  int http_status = 0;          ///< 0 when there was no HTTP reply (or the kind is not HTTP)
  std::string error;            ///< the resource's message, or the transport / read-back error
  std::string note;             ///< what the probe concludes from this step, when anything
  double sent_ms = 0;           ///< when the request was sent, ms since the probe started (monotonic)
  double replied_ms = 0;        ///< when its reply arrived, ms since the probe started

  /// One line: "write k seg 0 chunk 1 token 1001 client probe".
  [[nodiscard]] std::string request_text() const;
  /// One line: "rejected (high-water 1002): token 1001 is below ...".
  [[nodiscard]] std::string reply_text() const;
};

/// One rule's result.
struct ProbeRuleResult {
  std::string rule;                ///< a name of probe_rule_names()
  ProbeVerdict verdict = ProbeVerdict::kUnknown;
  std::string evidence;            ///< one line: what was sent and what came back
  /// The checkers' anomaly (README's table) a broken rule shows: "stale-write-accepted",
  /// "fenced-out", "cross-key-rejection"; "" when none applies or the rule is not broken.
  std::string anomaly;
  std::vector<ProbeStep> steps;    ///< the requests and replies behind the verdict (for concurrent: those that prove it)
  double duration_s = 0;           ///< wall time of the rule's sequence, seconds
};

/// How the probe runs. Defaults: what `fencecheck probe` uses without options.
struct ProbeOptions {
  std::uint64_t seed = 1;          ///< concurrent: which writer gets which token in each round, and start jitter
  int rounds = 50;                 ///< concurrent: rounds, each on a fresh key (1..100000)
  int writers = 4;                 ///< concurrent: writer threads, each with its own writer (2..64)
  int chunks_per_writer = 3;       ///< concurrent: writes per writer per round; a writer stops at its first rejection
  std::chrono::milliseconds timeout{5000};  ///< bound on each request (the writer's timeout; raw HTTP's connect/read/write)
  /// Every key starts with it; "" = "fencecheck-probe-<8 random hex digits>". Must be 1-200
  /// characters of [A-Za-z0-9_.-] (checked by run_probe: std::invalid_argument).
  std::string key_prefix;
  /// Every token the probe sends is above it (0..2^62): lower-token-rejected crosses each boundary
  /// of probe_token_crossings(token_base), and the other rules continue from the last one + 1 (or
  /// from token_base + 1 when there is none). Raise it for a resource that needs larger tokens
  /// (one whose mark is shared by every key and already high: `fencing: global` used before).
  std::int64_t token_base = 0;
};

/// What run_probe() is given: an opened resource and what its kind says about it.
struct ProbeTarget {
  resources::ResourceInstance* instance = nullptr;  ///< not owned; must stay open during run_probe
  std::string kind;                                 ///< the kind's name ("store")
  std::string design;                               ///< ResourceKind::design() ("per-key")
  bool embedded = true;                             ///< ResourceKind::embedded(): the harness owns the instance
  resources::Evidence evidence;                     ///< ResourceKind::evidence()
  std::string source;                               ///< the file the resource came from (for reports)
};

/// Makes a writer from an endpoint (make_resource_writer's signature): a seam for tests. Called
/// only on run_probe's calling thread (one writer per rule, one per concurrent writer thread);
/// each writer is then used by one thread at a time. May throw (the rule is then unknown).
using ProbeWriterFactory =
    std::function<std::unique_ptr<ResourceWriter>(const nlohmann::json& endpoint, std::chrono::milliseconds timeout)>;

/// Everything one probe found. Value type.
struct ProbeReport {
  std::string source;                       ///< the file probed
  std::string kind, design, describe;       ///< the resource (describe: ResourceInstance::describe())
  bool embedded = true;
  resources::Evidence evidence;
  nlohmann::json endpoint;                  ///< ResourceInstance::endpoint() (never holds a password)
  ProbeOptions options;                     ///< as run: key_prefix filled in
  std::vector<std::string> keys;            ///< every key the probe wrote, in the order first written
  std::vector<ProbeRuleResult> rules;       ///< one per rule, in probe_rule_names() order
  double duration_s = 0;                    ///< wall time of all rules (not the resource's start), seconds
  double open_s = 0;                        ///< wall time of opening the resource (starting it, when embedded)
  std::filesystem::path probe_dir;          ///< the probe's directory (embedded data, logs); "" when none
  bool probe_dir_kept = false;              ///< it was kept (a rule did not hold); otherwise removed
  /// What became of the rows the probe wrote (docs/probe.md, "What the probe leaves behind"):
  /// "removed" (the kind's delete ran: ResourceInstance::remove_keys), "kept" (--keep), "left" (the
  /// kind or the resource could not remove them: `cleanup` says why), "embedded" (they go with
  /// the embedded instance's data directory); "" before probe_command decides.
  std::string cleanup_outcome;
  std::string cleanup;                      ///< one sentence: what was removed or left, and where
};

/// Runs every rule against `target` in probe_rule_names() order and returns the results.
/// `make_writer` defaults to make_resource_writer. Writes only keys starting with
/// options.key_prefix (generated when empty). Calls target.instance->restart() once
/// (survives-restart) when target.embedded. Throws std::invalid_argument for options out of range
/// (rounds, writers, chunks_per_writer, timeout, key_prefix, token_base); a resource's failures
/// are verdicts (unknown), never exceptions. Main thread only (restart() may fork).
[[nodiscard]] ProbeReport run_probe(const ProbeTarget& target, const ProbeOptions& options,
                                    const ProbeWriterFactory& make_writer = {});

/// 0 when every rule holds or is not applicable, else 1 (broken or unknown: never counted as safe).
[[nodiscard]] int probe_exit_code(const ProbeReport& report);

/// The table for a terminal (docs/probe.md, "Output"): a header naming the resource and the keys,
/// one row per rule (rule, verdict, evidence), then for each rule that is broken or unknown the
/// requests and replies behind it, then a summary line with the wall time.
[[nodiscard]] std::string format_probe_table(const ProbeReport& report);
/// The whole report as JSON (docs/probe.md, "JSON").
[[nodiscard]] nlohmann::json probe_to_json(const ProbeReport& report);
/// The report as one JUnit suite "probe", one test case per rule: broken = <failure> (type: the
/// anomaly, else the rule), unknown = <error type="unknown">, not-applicable = <skipped>.
[[nodiscard]] JUnitSuite probe_junit(const ProbeReport& report);

/// The resource a probe file names: the `resource:` mapping of a scenario, or of a file holding
/// only `resource:`. Validated by the scenario loader's own resource validation (the kind's
/// parse()), so every error is a ScenarioError "file:line:col: message".
struct ProbeResource {
  ResourceSpec spec;               ///< kind, normalized config and each field's position
  std::string source;              ///< the file as given
  std::optional<std::string> scenario;  ///< the scenario's name when the file is a scenario
};

/// Loads a probe file. Throws ScenarioError (file:line:col) for a file that cannot be read, is not
/// YAML, is neither a scenario nor a mapping holding only `resource:`, or whose resource the
/// kind refuses. Reentrant.
[[nodiscard]] ProbeResource load_probe_resource(const std::filesystem::path& file);

/// `fencecheck probe`'s options.
struct ProbeCommandOptions {
  std::filesystem::path file;                 ///< the probe file (load_probe_resource)
  std::filesystem::path run_root = "runs";    ///< the probe's directory is created below it
  std::filesystem::path bin_dir;              ///< where fencecheck-store is; empty = self_bin_dir()
  ProbeOptions probe;
  std::string json_path;                      ///< "" none; "-" JSON on stdout instead of the table; else a file
  /// --keep: leave the rows the probe wrote in the user's resource (default: removed at the end
  /// through the kind's delete, ResourceInstance::remove_keys).
  bool keep = false;
  std::string junit_path;                     ///< "" none; else the JUnit file
  /// Opens the resource; empty = kind.open(config, ctx). A seam for tests (e.g. one that throws
  /// resources::ResourceUnavailable).
  std::function<std::unique_ptr<resources::ResourceInstance>(const resources::ResourceKind& kind,
                                                             const nlohmann::json& config,
                                                             const resources::ResourceRunContext& ctx)>
      open;
  ProbeWriterFactory make_writer;             ///< empty = make_resource_writer
};

/// Runs `fencecheck probe`: loads the file, creates `<run_root>/probe-<UTC time>-<random>`, opens
/// the resource, runs run_probe(), removes the rows it wrote from a resource of the user's unless
/// options.keep (ProbeReport::cleanup says what was removed or left), prints the table (or JSON)
/// to `out`, writes --json / --junit files, stops the resource and removes the directory unless a
/// rule did not hold. Messages go to
/// `err`. Returns the exit code: 0 every applicable rule holds; 1 a rule is broken or unknown; 2 bad
/// input (the file, a field the resource refuses: file:line:col; an option out of range; an
/// output file that cannot be written); 3 the resource cannot be reached or started
/// (ResourceUnavailable, or it does not answer its health check); 4 internal error. Main thread
/// only.
[[nodiscard]] int probe_command(const ProbeCommandOptions& options, std::ostream& out, std::ostream& err);

}  // namespace fencecheck::harness
