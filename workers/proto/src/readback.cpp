#include "fencecheck/proto/readback.h"

#include <cstdint>
#include <stdexcept>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "fencecheck/proto/base64.h"

namespace fencecheck {
namespace {

template <typename T>
T field(const nlohmann::json& j, const char* name, const char* where) {
  auto it = j.find(name);
  if (it == j.end()) throw std::invalid_argument(std::string(where) + ": missing field '" + name + "'");
  // An integer field takes JSON integers in its range only: nlohmann's get<int64_t>() converts a
  // float (1e20) or an unsigned above 2^63-1 with undefined behaviour (found by
  // tests/fuzz/report_fuzz.cpp: tests/fuzz/regressions/report/readback-token-beyond-int64).
  if constexpr (std::is_same_v<T, std::int64_t>) {
    if (!it->is_number_integer() || (it->is_number_unsigned() && it->get<std::uint64_t>() > INT64_MAX))
      throw std::invalid_argument(std::string(where) + ": field '" + name + "' must be an integer in -2^63..2^63-1");
  }
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    throw std::invalid_argument(std::string(where) + ": field '" + name + "' has the wrong type");
  }
}

const nlohmann::json& array_field(const nlohmann::json& j, const char* name) {
  static const nlohmann::json empty = nlohmann::json::array();
  auto it = j.find(name);
  if (it == j.end()) return empty;
  if (!it->is_array()) throw std::invalid_argument(std::string("read-back: '") + name + "' must be an array");
  return *it;
}

// A log entry's or a rejection's slot: "segment" and "chunk" for a chunk write, "kind":"counter"
// and "value" for a counter write.
template <typename W>
void put_target(nlohmann::json& j, const W& w) {
  if (w.kind == WriteKind::kCounter) {
    j["kind"] = "counter";
    j["value"] = w.value;
  } else {
    j["segment"] = w.segment;
    j["chunk"] = w.chunk;
  }
}

// The inverse of put_target, also reading the form of read-backs written before counter writes
// had fields of their own: no "kind", "chunk" -1 and the value in "segment".
template <typename W>
void get_target(const nlohmann::json& j, W& w, const char* where) {
  const std::string kind = j.contains("kind") ? field<std::string>(j, "kind", where) : "chunk";
  if (kind == "counter") {
    w.kind = WriteKind::kCounter;
    w.value = field<std::int64_t>(j, "value", where);
    w.segment = w.chunk = kNoSlot;
    return;
  }
  if (kind != "chunk")
    throw std::invalid_argument(std::string(where) + ": field 'kind' is \"" + kind + "\"; expected \"chunk\" or \"counter\"");
  w.segment = field<std::int64_t>(j, "segment", where);
  w.chunk = field<std::int64_t>(j, "chunk", where);
  if (!j.contains("kind") && w.chunk == kNoSlot) {  // an older read-back's counter write
    w.kind = WriteKind::kCounter;
    w.value = w.segment;
    w.segment = kNoSlot;
  }
}

}  // namespace

nlohmann::json to_json(const ReadBack& rb) {
  nlohmann::json j;
  j["resource"] = rb.resource;
  j["fencing"] = rb.fencing;
  auto& chunks = j["chunks"] = nlohmann::json::array();
  for (const auto& c : rb.chunks)
    chunks.push_back({{"key", c.key}, {"segment", c.segment}, {"chunk", c.chunk}, {"token", c.token},
                      {"client", c.client}, {"seq", c.seq}, {"data_b64", base64_encode(c.data)}});
  auto& log = j["log"] = nlohmann::json::array();
  for (const auto& w : rb.log) {
    nlohmann::json e{{"seq", w.seq}, {"key", w.key}};
    put_target(e, w);
    e["token"] = w.token;
    e["client"] = w.client;
    log.push_back(std::move(e));
  }
  auto& rej = j["rejections"] = nlohmann::json::array();
  for (const auto& r : rb.rejections) {
    nlohmann::json e{{"key", r.key}};
    put_target(e, r);
    e["token"] = r.token;
    e["client"] = r.client;
    e["high_water"] = r.high_water;
    rej.push_back(std::move(e));
  }
  j["high_water"] = rb.high_water;
  // Optional additions: omitted when empty so older consumers see the shape they know.
  if (!rb.effects.empty()) {
    auto& effects = j["effects"] = nlohmann::json::array();
    for (const auto& e : rb.effects) {
      nlohmann::json ej{{"key", e.key},       {"id", e.id},   {"token", e.token},
                        {"client", e.client}, {"seq", e.seq}, {"applied", e.applied}};
      if (!e.mode.empty()) ej["mode"] = e.mode;
      effects.push_back(std::move(ej));
    }
  }
  if (!rb.counters.empty()) j["counters"] = rb.counters;
  return j;
}

ReadBack readback_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw std::invalid_argument("read-back is not a JSON object");
  ReadBack rb;
  rb.resource = j.value("resource", "");
  rb.fencing = j.value("fencing", "");
  for (const auto& c : array_field(j, "chunks"))
    rb.chunks.push_back({field<std::string>(c, "key", "chunk"), field<std::int64_t>(c, "segment", "chunk"),
                         field<std::int64_t>(c, "chunk", "chunk"), field<std::int64_t>(c, "token", "chunk"),
                         field<std::string>(c, "client", "chunk"), field<std::int64_t>(c, "seq", "chunk"),
                         base64_decode(field<std::string>(c, "data_b64", "chunk"))});
  for (const auto& w : array_field(j, "log")) {
    AcceptedWrite a;
    a.seq = field<std::int64_t>(w, "seq", "log entry");
    a.key = field<std::string>(w, "key", "log entry");
    get_target(w, a, "log entry");
    a.token = field<std::int64_t>(w, "token", "log entry");
    a.client = field<std::string>(w, "client", "log entry");
    rb.log.push_back(std::move(a));
  }
  for (const auto& r : array_field(j, "rejections")) {
    RejectedWrite x;
    x.key = field<std::string>(r, "key", "rejection");
    get_target(r, x, "rejection");
    x.token = field<std::int64_t>(r, "token", "rejection");
    x.client = field<std::string>(r, "client", "rejection");
    x.high_water = field<std::int64_t>(r, "high_water", "rejection");
    rb.rejections.push_back(std::move(x));
  }
  if (auto it = j.find("high_water"); it != j.end()) {
    if (!it->is_object()) throw std::invalid_argument("read-back: 'high_water' must be an object of key -> token");
    for (auto& [k, v] : it->items()) {
      if (!v.is_number_integer()) throw std::invalid_argument("read-back: high_water['" + k + "'] must be an integer");
      rb.high_water[k] = v.get<std::int64_t>();
    }
  }
  for (const auto& e : array_field(j, "effects")) {
    EffectRecord r{field<std::string>(e, "key", "effect"),    field<std::string>(e, "id", "effect"),
                   field<std::int64_t>(e, "token", "effect"), field<std::string>(e, "client", "effect"),
                   field<std::int64_t>(e, "seq", "effect"),   field<bool>(e, "applied", "effect"),
                   {}};
    if (e.contains("mode")) r.mode = field<std::string>(e, "mode", "effect");
    rb.effects.push_back(std::move(r));
  }
  if (auto it = j.find("counters"); it != j.end()) {
    if (!it->is_object()) throw std::invalid_argument("read-back: 'counters' must be an object of key -> value");
    for (auto& [k, v] : it->items()) {
      if (!v.is_number_integer()) throw std::invalid_argument("read-back: counters['" + k + "'] must be an integer");
      rb.counters[k] = v.get<std::int64_t>();
    }
  }
  return rb;
}

}  // namespace fencecheck
