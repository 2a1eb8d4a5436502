#!/bin/sh
# The scenario's command for this worker: the Go binary CMake built into fencecheck's bin/
# (workers/examples/CMakeLists.txt), which the harness names in FENCECHECK_BIN_DIR.
bin="${FENCECHECK_BIN_DIR:?run me under fencecheck (FENCECHECK_BIN_DIR is not set)}/fc-example-go-etcd-mutex"
if [ ! -x "$bin" ]; then
  echo "run.sh: $bin is not built (CMake builds it only when 'go' and Debian's Go sources are installed:" \
       "scripts/install-deps.sh)" >&2
  exit 2
fi
exec "$bin" "$@"
