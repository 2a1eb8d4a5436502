#include "fencecheck/resources/writer.h"

#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "../kinds.h"

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

namespace {

// The writer registry: the built-in table (one row per kind in kinds.h), then the writers
// registered at run time, guarded by their mutex.
struct BuiltinWriter {
  std::string_view name;
  std::unique_ptr<ResourceWriter> (*make)(const nlohmann::json&, std::chrono::milliseconds);
};
#define FC_RESOURCE_WRITER_ROW(kind) BuiltinWriter{#kind, &detail::make_##kind##_writer},
constexpr BuiltinWriter kBuiltinWriters[] = {FC_RESOURCE_KINDS(FC_RESOURCE_WRITER_ROW)};
#undef FC_RESOURCE_WRITER_ROW

struct Registered {
  std::mutex mutex;
  std::vector<std::pair<std::string, ResourceWriterFactory>> writers;
};
Registered& registered() {
  static Registered r;
  return r;
}

std::string names_text() {
  std::string out;
  for (const auto& n : resource_writer_names()) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

std::unique_ptr<ResourceWriter> make_resource_writer(const nlohmann::json& endpoint, std::chrono::milliseconds timeout) {
  if (!endpoint.is_object()) throw std::invalid_argument("a resource endpoint is a JSON object {\"kind\": ...}");
  auto kind = endpoint.find("kind");
  if (kind == endpoint.end() || !kind->is_string())
    throw std::invalid_argument("a resource endpoint needs \"kind\" (one of: " + names_text() + ")");
  const std::string k = kind->get<std::string>();
  for (const BuiltinWriter& w : kBuiltinWriters)
    if (w.name == k) return w.make(endpoint, timeout);
  ResourceWriterFactory factory;
  {
    auto& r = registered();
    std::lock_guard lock(r.mutex);
    for (const auto& [name, f] : r.writers)
      if (name == k) factory = f;
  }
  if (factory) return factory(endpoint, timeout);  // outside the lock: a factory may take its time
  throw std::invalid_argument("unknown resource kind \"" + k + "\" in the endpoint; expected one of: " + names_text());
}

void register_resource_writer(std::string_view name, ResourceWriterFactory factory) {
  if (!factory) throw std::invalid_argument("register_resource_writer: no factory for \"" + std::string(name) + "\"");
  for (const BuiltinWriter& w : kBuiltinWriters)
    if (w.name == name)
      throw std::invalid_argument("resource kind \"" + std::string(name) + "\" already has a writer (built in)");
  auto& r = registered();
  std::lock_guard lock(r.mutex);
  for (const auto& [n, f] : r.writers)
    if (n == name) throw std::invalid_argument("resource kind \"" + std::string(name) + "\" already has a writer");
  r.writers.emplace_back(std::string(name), std::move(factory));
}

std::vector<std::string> resource_writer_names() {
  std::vector<std::string> out;
  for (const BuiltinWriter& w : kBuiltinWriters) out.emplace_back(w.name);
  auto& r = registered();
  std::lock_guard lock(r.mutex);
  for (const auto& [name, f] : r.writers) out.push_back(name);
  return out;
}

}  // namespace fencecheck
