// Fuzz target: the worker protocol's line parser (read_worker_line, workers/proto), which reads
// every line a worker process (ours or a user's program) writes to its event channel.
//
// Input: one line's bytes (any bytes, also newlines and invalid UTF-8); read as the first line and
// as a later line. Oracle (worker_protocol.h's contract):
//   - never throws (an exception escaping is a crash here);
//   - exactly one of event / error is set, and field is set only with an error;
//   - an accepted event is a kind a worker may send, carrying its required fields, and its own
//     serialisation (to_json_line) is read back as an accepted event of the same kind and fields;
//   - the history line parser agrees with its reference on the same bytes: event_from_json_line
//     (simdjson ondemand) gives the Event of detail::event_from_json_line_nlohmann, field for
//     field, or the same std::invalid_argument (tests/support/event_parsers.h).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fencecheck/proto/event.h"
#include "fencecheck/proto/worker_protocol.h"
#include "../support/event_parsers.h"
#include "fuzz_support.h"

namespace {

using fencecheck::fuzz::fuzz_fail;

void check_one(std::string_view line, bool first) {
  const fencecheck::WorkerLine r = fencecheck::read_worker_line(line, first);
  if (r.event.has_value() == !r.error.empty())
    fuzz_fail(std::string("read_worker_line gave ") + (r.event ? "an event and" : "neither an event nor") + " an error");
  if (!r.event) return;
  if (!r.field.empty()) fuzz_fail("an accepted line names a field at fault: " + r.field);
  const fencecheck::Event& e = *r.event;
  if (!fencecheck::worker_may_send(e.kind))
    fuzz_fail("accepted a kind a worker may not send: " + std::string(fencecheck::kind_name(e.kind)));
  const std::string again = fencecheck::to_json_line(e);
  const fencecheck::WorkerLine back = fencecheck::read_worker_line(again, first);
  if (!back.event) fuzz_fail("an accepted event, serialised again, is refused: " + back.error + " in " + again);
  if (back.event->kind != e.kind || back.event->token != e.token || back.event->key != e.key ||
      back.event->lock_key != e.lock_key || back.event->segment != e.segment || back.event->chunk != e.chunk ||
      back.event->duration_ns != e.duration_ns || back.event->detail != e.detail)
    fuzz_fail("an accepted event does not survive its own serialisation: " + again);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  check_one(line, true);
  check_one(line, false);
  const auto parsers = fencecheck::testing::compare_event_parsers(line);
  if (!parsers.difference.empty()) fuzz_fail("the history line parsers disagree: " + parsers.difference);
  return 0;
}
