// fencecheck — what the harness checks of a command worker's argv before a run starts
// (issue 34 item 6): the script a known interpreter would run.
//
// A command such as [/usr/bin/python3, ../../order_worker.py] whose script is misspelt starts,
// the interpreter exits 2 ("can't open file"), and the run reads as "the system failed". The
// loader's check_worker_commands() (scenario.h) finds the script argument with script_argument()
// and refuses a missing one at validate (exit 2), with the argument's file:line:col.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace fencecheck {

/// The index in argv of the file a known interpreter would run, or nullopt when argv's program
/// is no known interpreter or this command runs no file (python3 -c / -m / -, node -e / -p,
/// sh -c / -s, java without -jar, or no argument left after the options). Pure; never throws.
///
/// Known interpreters (matched on argv[0]'s file name): python, python3, python3.N, pypy3
/// (python(1) "Interface options": -c, -m, -; -W and -X take the next argument unless
/// attached); node, nodejs (node(1): -e/--eval, -p/--print run no file; -r/--require and
/// --import take an argument unless given with '='); bash, sh, dash, zsh, ksh (bash(1): -c and
/// -s run no file; -o/+o/-O/+O take one); java (only `-jar FILE`); and env(1) before any of
/// them (`/usr/bin/env [NAME=value ...] python3 x.py`). Every other option is taken to stand
/// alone; `--` ends the options.
[[nodiscard]] std::optional<std::size_t> script_argument(const std::vector<std::string>& argv);

}  // namespace fencecheck
