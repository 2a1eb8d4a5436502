// fencecheck — the resource kinds' private registry rows (resource_kind.h is the public side).
// One function per kind, each defined in the kind's own file; registry.cpp lists them.
#pragma once

#include <chrono>
#include <memory>

#include <nlohmann/json_fwd.hpp>

#include "fencecheck/resources/resource_kind.h"
#include "fencecheck/resources/writer.h"

namespace fencecheck::resources::detail {

const ResourceKind& store_kind();     // kinds/store_kind.cpp
const ResourceKind& postgres_kind();  // kinds/postgres_kind.cpp
const ResourceKind& http_kind();      // kinds/http_kind.cpp

}  // namespace fencecheck::resources::detail

namespace fencecheck::detail {

// The worker-side writers, one per kind (writer.h's make_resource_writer dispatches on "kind").
// Each throws std::invalid_argument naming the field an endpoint lacks.
std::unique_ptr<ResourceWriter> make_store_writer(const nlohmann::json& endpoint, std::chrono::milliseconds timeout);
std::unique_ptr<ResourceWriter> make_postgres_writer(const nlohmann::json& endpoint, std::chrono::milliseconds timeout);
std::unique_ptr<ResourceWriter> make_http_writer(const nlohmann::json& endpoint, std::chrono::milliseconds timeout);

}  // namespace fencecheck::detail
