// Fuzz target: the scenario loader (parse_scenario, harness/scenario), which reads every
// scenario file a user writes, and (through the same validation) scenario.json when
// `fencecheck report` reads a run back.
//
// Input: YAML text. Oracle (scenario.h's contract):
//   - bad input is a ScenarioError and nothing else: any other exception escaping (yaml-cpp's own,
//     std::out_of_range, ...) is a crash here, as it would end `fencecheck run` without a location;
//   - a ScenarioError's line and column are not negative;
//   - a scenario that loads survives its own JSON: scenario_from_json(to_json(s)) == s (the
//     property scenario.h promises for every loadable s, on which `fencecheck report` relies).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fencecheck/harness/scenario.h"
#include "fuzz_support.h"

using fencecheck::fuzz::fuzz_fail;
namespace fh = fencecheck::harness;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view yaml(reinterpret_cast<const char*>(data), size);
  std::optional<fh::Scenario> s;
  try {
    s.emplace(fh::parse_scenario(yaml, "fuzz.yaml"));
  } catch (const fh::ScenarioError& e) {
    if (e.line() < 0 || e.column() < 0) fuzz_fail(std::string("a ScenarioError with a negative location: ") + e.what());
    if (e.message().empty()) fuzz_fail("a ScenarioError with no message");
    return 0;
  }
  const nlohmann::json j = fh::to_json(*s);
  std::optional<fh::Scenario> back;
  try {
    back.emplace(fh::scenario_from_json(j, "fuzz.json"));
  } catch (const fh::ScenarioError& e) {
    fuzz_fail(std::string("a loaded scenario is refused when read back from its own JSON: ") + e.what() + "\n" +
              j.dump(2));
  }
  if (!(*back == *s))
    fuzz_fail("scenario_from_json(to_json(s)) != s for\n" + j.dump(2) + "\nread back as\n" + fh::to_json(*back).dump(2));
  return 0;
}
