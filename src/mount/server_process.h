// The servers a supervising mount holder (mount_holder.h) starts: a child process whose signal
// mask is set back and which inherits no descriptor beyond stdio, and how it ended, in words.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/result.h"

namespace lakecache {

// Starts `argv` (argv[0] a path, not looked up) as a child of this process.
Result<pid_t> SpawnServer(const std::vector<std::string>& argv);

// "exited with code 1", "was killed by signal 9 (Killed)": a wait status in words.
std::string ExitText(int status);

}  // namespace lakecache
