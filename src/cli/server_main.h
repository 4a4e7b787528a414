// What the long-running server commands (master, worker) share: termination signals handled by
// waiting for them instead of by a handler, and the address file a launcher reads.
//
// Call BlockTerminationSignals on the main thread before any thread starts, so every thread
// inherits the mask and the signals stay pending until WaitForTerminationSignal takes them.
#pragma once

#include <spdlog/spdlog.h>

#include <string>
#include <vector>

#include "common/result.h"

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

// ReportError for a server that could not start: with --log-file (`log_file`) the reason goes to
// the log as well, where an operator who reads the log finds why the server is not there.
int ReportStartError(const Status& status, bool log_file);

// True for 127.0.0.0/8, ::1 and localhost; `host_port` is HOST:PORT (IPv6 in brackets).
bool IsLoopbackListen(const std::string& host_port);

// An address a server listens on, and the flag that gave it ("--listen", "--data-listen").
struct ListenFlag {
  std::string flag;
  std::string address;
};

// Whether `command` ("lakecache worker") may serve on `listens` without credentials, where anyone
// who reaches it can do `exposes` ("read every cached byte"). Loopback always may; beyond it only
// with --insecure (`insecure`), and then it is announced at warn. Returns whether it serves plain
// text beyond loopback (the server reports itself insecure); without --insecure an
// InvalidArgument (exit 2) that says how to fix it. With credentials: false.
Result<bool> CheckPlainTextExposure(const std::string& command,
                                    const std::vector<ListenFlag>& listens, bool credentials,
                                    bool insecure, const std::string& exposes, bool log_file);

// The address a server announces: --advertise (`flag_value`, HOST:PORT), else $POD_IP with the
// bound port ("HOST:0"), else "" (the bound address). A malformed one is an InvalidArgument
// naming --advertise or POD_IP.
Result<std::string> ResolveAdvertise(const std::string& flag_value);

// Writes `address` (no newline) to `path` atomically (security::WriteFileAtomically), so a reader
// sees the whole address or no file at all.
Status WriteAddressFile(const std::string& path, const std::string& address);

}  // namespace lakecache::cli
