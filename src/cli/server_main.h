// What the long-running server commands (master, worker) share: termination signals handled by
// waiting for them instead of by a handler, and the address file a launcher reads.
//
// Call BlockTerminationSignals on the main thread before any thread starts, so every thread
// inherits the mask and the signals stay pending until WaitForTerminationSignal takes them.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

#include "common/status.h"

namespace lakecache::cli {

// Blocks SIGINT and SIGTERM in the calling thread (and the threads it creates from now on) and
// starts the one thread that takes them. Until WaitForTerminationSignal is called, a signal ends
// the process at once (exit 128 + signal): a server still starting has nothing to save.
void BlockTerminationSignals();

// The server serves: waits until SIGINT or SIGTERM arrives and returns it.
// REQUIRES: BlockTerminationSignals.
int WaitForTerminationSignal();

// Logs `line` at `level`, and prints it on stderr too unless the log already shows it there
// (`log_file`: --log-file was given), so an operator sees it whatever --log-file and --log-level
// say.
void Announce(spdlog::level::level_enum level, const std::string& line, bool log_file);

// True for 127.0.0.0/8, ::1 and localhost; `host_port` is HOST:PORT (IPv6 in brackets).
bool IsLoopbackListen(const std::string& host_port);

// Until the protocol has authentication, a server listening beyond loopback serves every cached
// byte to whoever reaches it: says so at start-up (Announce at warn).
void WarnIfBeyondLoopback(const std::string& listen, bool log_file);

// Writes `address` (no newline) to `path` atomically (rpc::WriteFileAtomically), so a reader sees
// the whole address or no file at all.
Status WriteAddressFile(const std::string& path, const std::string& address);

}  // namespace lakecache::cli
