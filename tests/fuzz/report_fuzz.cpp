// Fuzz target: a run directory's history.jsonl and readback.json as `fencecheck report` reads them
// back (load_history_jsonl, readback_from_json: harness/report/src/report.cpp's load_run_directory) and
// judges them again (analyze with the scenario's context, evaluate, verdict_to_json: its
// judge_stored_run and the verdict.json it rewrites).
//
// Input: history.jsonl's text, then a line "--- readback.json ---", then readback.json's text
// (without that line: all history, and an empty read-back). The scenario is fixed: the smoke
// scenario sigstop-past-lease (FENCECHECK_FUZZ_SCENARIO), whose real run the seed corpus holds.
// Oracle:
//   - a bad history is a HistoryError (report turns it into "history.jsonl: line N: ..."); any
//     other exception escaping load_history_jsonl is a crash here;
//   - a bad read-back is a JSON parse error or std::invalid_argument naming the field;
//   - the streamed read (readback_from_json_text, what report.cpp uses) gives exactly the
//     whole document's read-back or error, and write_readback_json is the document's dump;
//   - whatever loads is judged without any exception, and its verdict.json serialises.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fencecheck/harness/analysis.h"
#include "fencecheck/harness/checker.h"
#include "fencecheck/harness/expectation.h"
#include "fencecheck/harness/history.h"
#include "fencecheck/harness/packed_log.h"
#include "fencecheck/harness/scenario.h"
#include "fencecheck/harness/verdict_json.h"
#include "fencecheck/proto/readback.h"
#include "fuzz_support.h"

using fencecheck::fuzz::fuzz_fail;
namespace fh = fencecheck::harness;

namespace {

constexpr std::string_view kSeparator = "\n--- readback.json ---\n";

const fh::Scenario& scenario() {
  static const fh::Scenario s = fh::load_scenario(FENCECHECK_FUZZ_SCENARIO);
  return s;
}

std::string dump_of(const fencecheck::ReadBack& rb) {
  return fencecheck::to_json(rb).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// A read's outcome, comparable across the two paths: "ok <read-back>", or the error's class and text.
template <typename Read>
std::string outcome_of(Read&& read) {
  try {
    return "ok " + dump_of(read());
  } catch (const fencecheck::ReadBackSyntaxError& e) {
    return std::string("syntax: ") + e.what();
  } catch (const nlohmann::json::exception& e) {
    return std::string("json: ") + e.what();
  } catch (const std::invalid_argument& e) {
    return std::string("invalid: ") + e.what();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto cut = input.find(kSeparator);
  const std::string_view history_text = input.substr(0, cut);
  const std::optional<std::string_view> readback_text =
      cut == std::string_view::npos ? std::nullopt : std::optional(input.substr(cut + kSeparator.size()));

  const auto path = fencecheck::fuzz::scratch_dir() / "history.jsonl";
  fencecheck::fuzz::write_file(path, history_text);
  fh::History history;
  try {
    history = fh::load_history_jsonl(path);
  } catch (const fh::HistoryError& e) {
    if (e.message().empty()) fuzz_fail("a HistoryError without a message");
    return 0;
  }

  fencecheck::ReadBack readback;
  if (readback_text) {
    // report.cpp reads readback.json element by element (read_readback_file); it must give what
    // the whole document gives: the same read-back, or the same error (the differential oracle).
    const std::string streamed = outcome_of([&] { return fencecheck::readback_from_json_text(*readback_text); });
    std::string document;
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(*readback_text);
    } catch (const nlohmann::json::exception& e) {
      // "readback.json: not valid JSON: ..." (report.cpp names every json::exception of the
      // parse so: a syntax error, and also a number beyond double such as 1e400, which nlohmann
      // reports as out_of_range 406; found by this target, 2026-12-02).
      document = std::string("syntax: ") + e.what();
    }
    if (document.empty()) {
      document = outcome_of([&] {
        readback = fencecheck::readback_from_json(doc);
        return readback;
      });
      if (document.rfind("invalid: ", 0) == 0 && document.size() == 9)
        fuzz_fail("a read-back refused without a message");  // "readback.json: not a read-back: ..."
    }
    if (streamed != document) fuzz_fail("the streamed read-back differs from the document's");
    if (document.rfind("ok ", 0) != 0) return 0;
    // The element-by-element writer is the document's dump, byte for byte.
    std::ostringstream written;
    fencecheck::write_readback_json(written, readback);
    if (written.str() != fencecheck::to_json(readback).dump(2, ' ', false, nlohmann::json::error_handler_t::replace))
      fuzz_fail("write_readback_json differs from the document's dump");
    // The checkers read the log packed (packed_log.h): every entry must come back exactly, and
    // each write id be found at its first entry.
    const fh::PackedLog packed(readback.log);
    if (packed.size() != readback.log.size()) fuzz_fail("the packed log's size differs");
    for (std::size_t i = 0; i < readback.log.size(); ++i) {
      const fencecheck::AcceptedWrite& w = readback.log[i];
      const fh::LoggedWrite p = packed[i];
      if (p.seq != w.seq || p.key != w.key || p.segment != w.segment || p.chunk != w.chunk || p.token != w.token ||
          p.client != w.client || p.kind != w.kind || p.value != w.value)
        fuzz_fail("a packed log entry reads back differently");
      const auto found = packed.find(w.client, w.token, w.key, w.segment, w.chunk);
      if (!found || found->first > i || found->latest >= readback.log.size())
        fuzz_fail("a logged write is not found at or before its position");
    }
  }

  const fh::Scenario& sc = scenario();
  const fh::Analysis analysis = fh::analyze(history, readback, fh::CheckContext::of(sc));
  const fh::ExpectationResult expectation = fh::evaluate(sc.expect(), analysis, sc);
  const std::string verdict =
      fh::verdict_to_json(analysis, expectation, history).dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  if (verdict.empty()) fuzz_fail("an empty verdict.json");
  return 0;
}
