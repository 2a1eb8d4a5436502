// fencecheck tests — stands in for a harness that gets killed: opens an embedded PostgreSQL through
// the postgres kind in the run directory argv[1], prints "ready <postmaster pid> <data directory>"
// and waits to be killed. postgres_kind_test kills it with SIGKILL and checks what is left.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../support/fake_resource_fields.h"
#include "fencecheck/resources/resource_kind.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: postgres_holder RUN_DIR\n");
    return 2;
  }
  namespace fs = std::filesystem;
  const fs::path dir = argv[1];
  const auto& kind = *fencecheck::resources::find_resource_kind("postgres");
  fencecheck::resources::ResourceRunContext ctx;
  ctx.run_dir = dir;
  ctx.run_id = "holder";
  auto inst = kind.open(kind.parse(fencecheck::testing::FakeFields(nlohmann::json::object())), ctx);
  fs::path data = dir / "postgres-data";
  if (std::ifstream loc(dir / "postgres-data.location"); loc) {
    std::string own;
    std::getline(loc, own);
    data = fs::path(own) / "data";
  }
  long pid = 0;
  std::ifstream(data / "postmaster.pid") >> pid;
  std::printf("ready %ld %s\n", pid, data.c_str());
  std::fflush(stdout);
  for (;;) ::pause();
}
