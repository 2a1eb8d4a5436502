// fencecheck — a worker's process tree: the worker process (the root) and every process it forked,
// directly or not. Every process fault (sigstop.h, freeze.h, cpu_throttle.h) acts on the whole
// tree, because a worker may fork: a shell script starting Python, etcdctl running a command, a
// JVM. This file is the one place that walks a tree.
//
// Where the tree comes from (proc(5)):
//  - <proc>/<pid>/task/<tid>/children: the PIDs of the children that thread <tid> forked
//    (CONFIG_PROC_CHILDREN, Linux >= 3.5); a process's children are the union over its threads.
//    proc(5) warns the list is "reliable only if all of the child processes are stopped or
//    frozen": one read of a running tree can miss a child, which the converging walk catches.
//  - Without those files (kernel built without CONFIG_PROC_CHILDREN): every <proc>/<pid>/stat is
//    read once per walk, and a process's children are those whose field 4 (ppid) names it.
// A PID found either way is taken for a child only if its stat names the parent's PID as ppid and
// its start time (field 22) is no earlier than the parent's: a PID that was reused between the
// listing and the check is never taken for part of the tree.
//
// What is not in the tree: a process whose parent exited is reparented (to init, or to the
// nearest PR_SET_CHILD_SUBREAPER ancestor, prctl(2)) and leaves the tree; so do the grandchildren
// of a worker that daemonises by double fork. A fault finds only what is in the tree when it walks.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <filesystem>
#include <functional>
#include <vector>

#include "fencecheck/faults/process.h"

namespace fencecheck::faults {

/// One process of a tree as a walk found it.
struct TreeMember {
  ProcessRef ref;
  ProcessRef parent;  ///< {} for the root
  int depth = 0;      ///< 0 for the root, 1 for its children, ...
};

/// The children of parent that are alive now, each checked as described above, oldest first
/// (start time, then PID); empty when parent is gone or its PID was reused. proc: where procfs
/// is (a fake tree in unit tests). Reads only; never throws for a missing or unreadable file.
/// Thread-safe.
[[nodiscard]] std::vector<ProcessRef> children_of(const ProcessRef& parent, const std::filesystem::path& proc = "/proc");

/// A snapshot of root's tree: root first, then every descendant breadth first (a parent always
/// before its children; siblings oldest first). Empty when root is gone or its PID was reused.
/// Not atomic: a process that forks or exits during the walk may or may not be in it
/// (converge_tree() deals with that). Thread-safe.
[[nodiscard]] std::vector<TreeMember> walk_tree(const ProcessRef& root, const std::filesystem::path& proc = "/proc");

/// walk_tree() without the root.
[[nodiscard]] std::vector<ProcessRef> descendants(const ProcessRef& root, const std::filesystem::path& proc = "/proc");

/// What converge_tree() did.
struct ConvergeResult {
  int walks = 0;          ///< walks of the tree made (>= 1; 2 for a tree that did not change)
  std::size_t acted = 0;  ///< calls of act that returned true
};

/// Applies act to every process of root's tree, race-free against a tree that forks meanwhile:
///  1. walk the tree breadth first from root, calling act on each process BEFORE reading its
///     children (a child forked before act took effect is then already listed);
///  2. if act returned true for any process (it acted on one it had not acted on before), call
///     settle() (e.g. wait until every process acted on is stopped or frozen, so that none of them
///     can fork any more and the next walk's children lists are final) and walk again;
///  3. stop after a walk in which act returned true for none.
/// act must return false for a process it already handled (or that needs nothing, e.g. one born
/// inside the fault's cgroup), so that the walks converge: once every process acted on can no
/// longer fork (SIGSTOP, the freezer), a walk finds nothing new. Exceptions from act and settle
/// propagate (the caller undoes what act did). Throws std::runtime_error when the tree still
/// changes after max_walks walks. Same thread-safety as act and settle.
ConvergeResult converge_tree(const ProcessRef& root, const std::function<bool(const TreeMember&)>& act,
                             const std::function<void()>& settle, int max_walks = 100,
                             const std::filesystem::path& proc = "/proc");

}  // namespace fencecheck::faults
