#include "cli/server_main.h"

#include <arpa/inet.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "cli/cli_context.h"
#include "common/mutex.h"
#include "rpc/advertise.h"
#include "security/x509.h"

namespace lakecache::cli {
namespace {

sigset_t TerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

// One thread takes the signals. Until the server serves (a start-up that probes object stores can
// take up to a minute), a signal ends the process at once: there is nothing to shut down cleanly
// yet. Afterwards it hands the signal to WaitForTerminationSignal.
struct SignalState {
  Mutex mu;
  CondVar cv;
  bool serving GUARDED_BY(mu) = false;
  int signal GUARDED_BY(mu) = 0;
};

SignalState& State() {
  static auto* state = new SignalState();  // used by a detached thread: never destroyed
  return *state;
}

}  // namespace

void BlockTerminationSignals() {
  sigset_t set = TerminationSignals();
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([] {
    sigset_t signals = TerminationSignals();
    int signal = 0;
    ::sigwait(&signals, &signal);  // fails only for an invalid set
    SignalState& state = State();
    MutexLock lock(&state.mu);
    if (!state.serving) {
      std::fprintf(stderr, "lakecache: %s during start-up: stopping\n", ::strsignal(signal));
      std::_Exit(128 + signal);
    }
    state.signal = signal;
    state.cv.SignalAll();
  }).detach();
}

int WaitForTerminationSignal() {
  SignalState& state = State();
  MutexLock lock(&state.mu);
  state.serving = true;
  while (state.signal == 0) state.cv.Wait(&state.mu);
  return state.signal;
}

void Announce(spdlog::level::level_enum level, const std::string& line, bool log_file) {
  spdlog::log(level, "{}", line);
  spdlog::default_logger()->flush();
  if (log_file || !spdlog::should_log(level)) std::fprintf(stderr, "lakecache: %s\n", line.c_str());
}

int ReportStartError(const Status& status, bool log_file) {
  if (log_file) {
    spdlog::error("not started: {}", status.message());
    spdlog::default_logger()->flush();
  }
  return ReportError(status);
}

bool IsLoopbackListen(const std::string& host_port) {
  std::string host = host_port.substr(0, host_port.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host == "localhost" || host == "::1") return true;
  in_addr v4;
  return ::inet_pton(AF_INET, host.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
}

Result<bool> CheckPlainTextExposure(const std::string& command,
                                    const std::vector<ListenFlag>& listens, bool credentials,
                                    bool insecure, const std::string& exposes, bool log_file) {
  if (credentials) return false;
  bool exposed = false;
  for (const ListenFlag& l : listens) {
    if (IsLoopbackListen(l.address)) continue;
    std::string where = command + ": " + l.flag + " " + l.address + " is not a loopback address";
    if (!insecure) {
      return Status::InvalidArgument(
          where + ", and without --credentials DIR anyone who reaches it can " + exposes +
          "; give --credentials DIR (the cluster's CA, certificate and key; see "
          "docs/configuration.md), or --insecure to serve in plain text anyway");
    }
    Announce(spdlog::level::warn,
             "INSECURE: " + where +
                 " and serves in plain text without authentication "
                 "(--insecure): anyone who reaches it can " +
                 exposes + "; give --credentials DIR instead",
             log_file);
    exposed = true;
  }
  return exposed;
}

Result<std::string> ResolveAdvertise(const std::string& flag_value) {
  if (!flag_value.empty()) {
    LC_RETURN_IF_ERROR(rpc::CheckAdvertiseAddress("--advertise", flag_value, false));
    return flag_value;
  }
  const char* pod_ip = std::getenv("POD_IP");
  if (pod_ip == nullptr || *pod_ip == '\0') return std::string();
  std::string host = pod_ip;
  if (host.find(':') != std::string::npos && host.front() != '[') host = "[" + host + "]";
  std::string advertise = host + ":0";
  LC_RETURN_IF_ERROR(
      rpc::CheckAdvertiseAddress("POD_IP (the default of --advertise)", advertise, true));
  return advertise;
}

Status WriteAddressFile(const std::string& path, const std::string& address) {
  return security::WriteFileAtomically(path, address, 0644).WithContext("--address-file");
}

}  // namespace lakecache::cli
