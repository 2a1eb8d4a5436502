// fencecheck — the resource kinds' registry rows (resource_kind.h and writer.h are the public
// side). Adding a kind is its folder resources/<kind>/ (found by resources/lib.cmake) and one row
// in FC_RESOURCE_KINDS below; the row declares the kind's two functions, each defined in the
// kind's own folder, and puts them in both tables: registry.cpp's kinds (the harness's side) and
// src/writer.cpp's writers (the worker's side, which links no kind).
#pragma once

#include <chrono>
#include <memory>

#include <nlohmann/json_fwd.hpp>

#include "fencecheck/resources/resource_kind.h"
#include "fencecheck/resources/writer.h"

// One row per kind, in table order (resource_kind_names(), the unknown-kind message).
#define FC_RESOURCE_KINDS(ROW) \
  ROW(store)                   \
  ROW(postgres)                \
  ROW(http)

namespace fencecheck::resources::detail {

// const ResourceKind& <kind>_kind(): the harness's side, in <kind>/<kind>_kind.cpp.
#define FC_RESOURCE_KIND_DECLARE(kind) const ResourceKind& kind##_kind();
FC_RESOURCE_KINDS(FC_RESOURCE_KIND_DECLARE)
#undef FC_RESOURCE_KIND_DECLARE

}  // namespace fencecheck::resources::detail

namespace fencecheck::detail {

// The worker-side writer of each kind (make_resource_writer finds it by the endpoint's "kind").
// Each throws std::invalid_argument naming the field an endpoint lacks.
#define FC_RESOURCE_WRITER_DECLARE(kind) \
  std::unique_ptr<ResourceWriter> make_##kind##_writer(const nlohmann::json& endpoint, std::chrono::milliseconds timeout);
FC_RESOURCE_KINDS(FC_RESOURCE_WRITER_DECLARE)
#undef FC_RESOURCE_WRITER_DECLARE

}  // namespace fencecheck::detail
