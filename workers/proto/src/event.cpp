#include "fencecheck/proto/event.h"

#include <time.h>

#include <array>
#include <stdexcept>
#include <utility>

#include <nlohmann/json.hpp>

namespace fencecheck {
namespace {

constexpr std::array<std::pair<EventKind, std::string_view>, 25> kNames{{
    {EventKind::kAcquireInvoke, "acquire.invoke"}, {EventKind::kAcquireOk, "acquire.ok"},
    {EventKind::kAcquireFail, "acquire.fail"},     {EventKind::kKeepaliveFail, "keepalive.fail"},
    {EventKind::kLeaseLost, "lease.lost"},         {EventKind::kWriteInvoke, "write.invoke"},
    {EventKind::kWriteOk, "write.ok"},             {EventKind::kWriteFail, "write.fail"},
    {EventKind::kWriteInfo, "write.info"},         {EventKind::kPause, "pause"},
    {EventKind::kReleaseInvoke, "release.invoke"}, {EventKind::kReleaseOk, "release.ok"},
    {EventKind::kReleaseFail, "release.fail"},     {EventKind::kJobDone, "job.done"},
    {EventKind::kJobGaveUp, "job.gave_up"},
    {EventKind::kWorkerExit, "worker.exit"},       {EventKind::kFaultInject, "fault.inject"},
    {EventKind::kFaultHeal, "fault.heal"},         {EventKind::kLockGrant, "lock.grant"},
    {EventKind::kLockDelete, "lock.delete"},       {EventKind::kRunStart, "run.start"},
    {EventKind::kRunEnd, "run.end"},               {EventKind::kLog, "log"},
    {EventKind::kHello, "hello"},                  {EventKind::kProtocolError, "protocol.error"},
}};
// kNames is in enumerator order, so kind_name() is one index (it runs for every event a checker reads).
constexpr bool kNamesInOrder = [] {
  for (std::size_t i = 0; i < kNames.size(); ++i)
    if (static_cast<std::size_t>(kNames[i].first) != i) return false;
  return true;
}();
static_assert(kNamesInOrder && kNames.size() == static_cast<std::size_t>(EventKind::kProtocolError) + 1);

void put_opt(nlohmann::json& j, const char* name, const std::optional<std::int64_t>& v) {
  if (v) j[name] = *v;
}
void put_str(nlohmann::json& j, const char* name, const std::string& v) {
  if (!v.empty()) j[name] = v;
}
void get_opt(const nlohmann::json& j, const char* name, std::optional<std::int64_t>& out) {
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return;
  if (!it->is_number_integer()) throw std::invalid_argument(std::string("field '") + name + "' must be an integer");
  out = it->get<std::int64_t>();
}
void get_str(const nlohmann::json& j, const char* name, std::string& out) {
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return;
  if (!it->is_string()) throw std::invalid_argument(std::string("field '") + name + "' must be a string");
  out = it->get<std::string>();
}

}  // namespace

std::string_view kind_name(EventKind kind) {
  const auto i = static_cast<std::size_t>(kind);
  return i < kNames.size() ? kNames[i].second : "log";
}

std::optional<EventKind> kind_from_name(std::string_view name) {
  for (const auto& [k, n] : kNames)
    if (n == name) return k;
  return std::nullopt;
}

nlohmann::json to_json(const Event& e) {
  nlohmann::json j;
  j["t_ns"] = e.t_ns;
  j["src_ns"] = e.src_ns;
  j["source"] = e.source;
  j["kind"] = std::string(kind_name(e.kind));
  put_opt(j, "token", e.token);
  put_opt(j, "high_water", e.high_water);
  put_opt(j, "lease_id", e.lease_id);
  put_opt(j, "revision", e.revision);
  put_opt(j, "segment", e.segment);
  put_opt(j, "chunk", e.chunk);
  put_opt(j, "duration_ns", e.duration_ns);
  put_opt(j, "ttl_ms", e.ttl_ms);
  put_opt(j, "protocol", e.protocol);
  put_opt(j, "line_no", e.line_no);
  put_str(j, "lock", e.lock);
  put_str(j, "lock_key", e.lock_key);
  put_str(j, "key", e.key);
  put_str(j, "fault", e.fault);
  put_str(j, "target", e.target);
  put_str(j, "detail", e.detail);
  put_str(j, "line", e.line);
  return j;
}

std::string to_json_line(const Event& e) { return to_json(e).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

Event event_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw std::invalid_argument("event is not a JSON object");
  auto kind_it = j.find("kind");
  if (kind_it == j.end() || !kind_it->is_string()) throw std::invalid_argument("event has no string field 'kind'");
  auto kind = kind_from_name(kind_it->get<std::string>());
  if (!kind) throw std::invalid_argument("unknown event kind '" + kind_it->get<std::string>() + "'");
  Event e;
  e.kind = *kind;
  std::optional<std::int64_t> t;
  get_opt(j, "t_ns", t);
  e.t_ns = t.value_or(0);
  t.reset();
  get_opt(j, "src_ns", t);
  e.src_ns = t.value_or(0);
  get_str(j, "source", e.source);
  get_opt(j, "token", e.token);
  get_opt(j, "high_water", e.high_water);
  get_opt(j, "lease_id", e.lease_id);
  get_opt(j, "revision", e.revision);
  get_opt(j, "segment", e.segment);
  get_opt(j, "chunk", e.chunk);
  get_opt(j, "duration_ns", e.duration_ns);
  get_opt(j, "ttl_ms", e.ttl_ms);
  get_opt(j, "protocol", e.protocol);
  get_opt(j, "line_no", e.line_no);
  get_str(j, "lock", e.lock);
  get_str(j, "lock_key", e.lock_key);
  get_str(j, "key", e.key);
  get_str(j, "fault", e.fault);
  get_str(j, "target", e.target);
  get_str(j, "detail", e.detail);
  get_str(j, "line", e.line);
  return e;
}

// event_from_json_line itself, simdjson's, is in event_simdjson.cpp.
Event detail::event_from_json_line_nlohmann(std::string_view line) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& err) {
    // parse_error, and out_of_range 406 for a number beyond a double's range ("1e400").
    throw std::invalid_argument(std::string("not a JSON event: ") + err.what());
  }
  return event_from_json(j);
}

std::int64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace fencecheck
