# fencecheck_workers: the worker loop, talking to "a lock client" (fencecheck_lock_clients,
# workers/locks/) and "a resource writer"; fencecheck-worker: a thin main on top. Included from
# workers/CMakeLists.txt.
add_library(fencecheck_workers
  ${CMAKE_CURRENT_LIST_DIR}/src/worker.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/worker_cli.cpp)
target_include_directories(fencecheck_workers PUBLIC ${CMAKE_CURRENT_LIST_DIR}/include)
# fencecheck_resource_writers (every kind's ResourceWriter) is defined later, in resources/; CMake resolves the name
# at generate time. It is PUBLIC: worker.h uses EffectMode (fencecheck/resources/effect_mode.h).
# Not fencecheck_resources: the worker must not link the store's server side (cpp-httplib, whose
# Debian build maps OpenSSL, zlib and brotli into every process linking it).
target_link_libraries(fencecheck_workers
  PUBLIC fencecheck_proto fencecheck_lock_clients fencecheck_resource_writers nlohmann_json::nlohmann_json Threads::Threads
  PRIVATE fencecheck_http Boost::filesystem spdlog::spdlog nlohmann_json::nlohmann_json)

add_executable(fencecheck-worker ${CMAKE_CURRENT_LIST_DIR}/worker_main.cpp)
target_link_libraries(fencecheck-worker PRIVATE fencecheck_workers spdlog::spdlog)
