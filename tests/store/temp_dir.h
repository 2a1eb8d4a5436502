// tests/store: a temporary directory removed at scope exit (the shared one, tests/support).
#pragma once

#include "../support/temp_dir.h"
