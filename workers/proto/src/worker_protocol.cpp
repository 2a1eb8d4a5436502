#include "fencecheck/proto/worker_protocol.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace fencecheck {

bool worker_may_send(EventKind kind) {
  switch (kind) {
    case EventKind::kWorkerExit:
    case EventKind::kFaultInject:
    case EventKind::kFaultHeal:
    case EventKind::kLockGrant:
    case EventKind::kLockDelete:
    case EventKind::kRunStart:
    case EventKind::kRunEnd:
    case EventKind::kProtocolError:
      return false;
    default:
      return true;
  }
}

std::vector<std::string_view> required_fields(EventKind kind) {
  switch (kind) {
    case EventKind::kHello:
      return {"protocol"};
    case EventKind::kAcquireOk:
      return {"token", "lock_key"};
    case EventKind::kWriteInvoke:
    case EventKind::kWriteOk:
    case EventKind::kWriteFail:
    case EventKind::kWriteInfo:
      return {"key", "token"};
    case EventKind::kReleaseInvoke:
    case EventKind::kReleaseOk:
    case EventKind::kReleaseFail:
      return {"lock_key"};
    case EventKind::kPause:
      return {"duration_ns"};
    case EventKind::kJobGaveUp:
      return {"detail"};  // a give-up says why
    default:
      return {};
  }
}

WorkerLine read_worker_line(std::string_view line, bool first) {
  WorkerLine out;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& err) {
    out.error = std::string("not JSON: ") + err.what();
    return out;
  }
  if (!j.is_object()) {
    out.error = "not a JSON object (each line is one event: {\"kind\": ...})";
    return out;
  }
  auto kind_it = j.find("kind");
  if (kind_it == j.end() || !kind_it->is_string()) {
    out.field = "kind";
    out.error = "has no string field 'kind'";
    return out;
  }
  const std::string name = kind_it->get<std::string>();
  const auto kind = kind_from_name(name);
  out.field = "kind";
  if (!kind) {
    out.error = "unknown kind '" + name + "'";
    return out;
  }
  if (!worker_may_send(*kind)) {
    out.error = "kind '" + name + "' is the harness's own, not one a worker sends";
    return out;
  }
  if (first && *kind != EventKind::kHello) {
    out.error = "the first line must be {\"kind\":\"hello\",\"protocol\":" + std::to_string(kWorkerProtocolVersion) +
                "}, got kind '" + name + "'";
    return out;
  }
  if (!first && *kind == EventKind::kHello) {
    out.error = "a second hello (hello is the first line only)";
    return out;
  }
  out.field.clear();
  for (auto field : required_fields(*kind)) {
    auto it = j.find(std::string(field));
    if (it == j.end() || it->is_null()) {
      out.field = std::string(field);
      out.error = name + " has no field '" + std::string(field) + "'";
      return out;
    }
  }
  Event e;
  try {
    e = event_from_json(j);
  } catch (const std::exception& err) {
    // event_from_json names the field: "field 'token' must be an integer".
    out.error = name + ": " + err.what();
    const std::string what = err.what();
    if (auto a = what.find('\''), b = what.find('\'', a + 1); a != std::string::npos && b != std::string::npos)
      out.field = what.substr(a + 1, b - a - 1);
    return out;
  }
  if (*kind == EventKind::kHello && e.protocol != kWorkerProtocolVersion) {
    out.field = "protocol";
    out.error = "speaks worker protocol version " + std::to_string(*e.protocol) + "; this harness speaks " +
                std::to_string(kWorkerProtocolVersion);
    return out;
  }
  const auto required = required_fields(*kind);
  for (auto field : {"key", "lock_key", "detail"}) {
    auto it = j.find(field);
    if (it != j.end() && it->is_string() && it->get<std::string>().empty() &&
        std::find(required.begin(), required.end(), std::string_view(field)) != required.end()) {
      out.field = field;
      out.error = name + ": field '" + std::string(field) + "' is empty";
      return out;
    }
  }
  out.event = std::move(e);
  return out;
}

}  // namespace fencecheck
