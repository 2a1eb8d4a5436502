// fencecheck tests — stands in for a harness that gets killed: opens an embedded redis-server
// through the redis lock-service kind in the run directory argv[1], prints "ready <redis pid>
// <port>" and waits to be killed. redis_kind_test kills it with SIGKILL and checks that the server
// went with it (PR_SET_PDEATHSIG).
#include <unistd.h>

#include <cstdio>
#include <string>

#include "redis_test_util.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: redis_holder RUN_DIR\n");
    return 2;
  }
  const auto& kind = fencecheck::testing::redis_kind();
  fencecheck::locks::LockServiceRunContext ctx;
  ctx.run_dir = argv[1];
  ctx.run_id = "holder";
  auto inst = kind.open({}, kind.parse(fencecheck::testing::FakeFields(nlohmann::json::object())), ctx);
  const std::string url = inst->endpoints_text();
  std::printf("ready %d %s\n", inst->pid(), url.substr(url.rfind(':') + 1).c_str());
  std::fflush(stdout);
  for (;;) ::pause();
}
