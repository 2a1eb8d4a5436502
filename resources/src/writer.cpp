#include "fencecheck/resources/writer.h"

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "../kinds/kinds.h"

namespace fencecheck {

WriteReply ResourceWriter::write_counter(std::string_view, std::int64_t, FencingToken, std::string_view) {
  WriteReply r;
  r.outcome = WriteOutcome::kInvalid;
  r.error = "resource kind " + std::string(kind()) + " has no counters (the counter job needs kind store)";
  return r;
}

CounterReply ResourceWriter::read_counter(std::string_view) {
  CounterReply r;
  r.error = "resource kind " + std::string(kind()) + " has no counters (the counter job needs kind store)";
  return r;
}

EffectReply ResourceWriter::post_effect(std::string_view, std::string_view, FencingToken, std::string_view) {
  EffectReply r;
  r.outcome = EffectOutcome::kInvalid;
  r.error = "resource kind " + std::string(kind()) + " has no side effects (the side-effect job needs kind store)";
  return r;
}

std::unique_ptr<ResourceWriter> make_resource_writer(const nlohmann::json& endpoint, std::chrono::milliseconds timeout) {
  if (!endpoint.is_object()) throw std::invalid_argument("a resource endpoint is a JSON object {\"kind\": ...}");
  auto kind = endpoint.find("kind");
  if (kind == endpoint.end() || !kind->is_string())
    throw std::invalid_argument("a resource endpoint needs \"kind\" (store, postgres or http)");
  const std::string k = kind->get<std::string>();
  if (k == "store") return detail::make_store_writer(endpoint, timeout);
  if (k == "postgres") return detail::make_postgres_writer(endpoint, timeout);
  if (k == "http") return detail::make_http_writer(endpoint, timeout);
  throw std::invalid_argument("unknown resource kind \"" + k + "\" in the endpoint; expected store, postgres or http");
}

}  // namespace fencecheck
