// fencecheck bench — one embedded etcd (fencecheck::EmbeddedEtcd: loopback, fresh data dir in a
// TempDir) shared by every benchmark of a program, started on first use and stopped at exit.
// Start it from the main thread (Google Benchmark runs benchmarks there), so PR_SET_PDEATHSIG
// ties etcd to the process. Throws std::runtime_error as EmbeddedEtcd::start() does.
#pragma once

#include "bench_util.h"
#include "fencecheck/locks/etcd/embedded_etcd.h"

namespace fencecheck::bench {

struct SharedEtcd {
  TempDir dir{"bench-etcd"};
  EmbeddedEtcd etcd;
  SharedEtcd() { etcd.start(dir.path() / "data", dir.path() / "etcd.log"); }
  /// The program's etcd; its client URL is etcd.client_url().
  static SharedEtcd& get() {
    static SharedEtcd instance;
    return instance;
  }
};

}  // namespace fencecheck::bench
