#include "mount/server_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace lakecache {

std::string ExitText(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           ::strsignal(WTERMSIG(status)) + ")";
  }
  return "ended";
}

// Only async-signal-safe calls between fork and exec.
Result<pid_t> SpawnServer(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return Status::IoError(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::close_range(3, ~0U, 0);
    ::execv(args[0], args.data());
    constexpr char kMessage[] = "lakecache holder: cannot exec the server\n";
    [[maybe_unused]] ssize_t n = ::write(2, kMessage, sizeof(kMessage) - 1);
    ::_exit(127);
  }
  return pid;
}

}  // namespace lakecache
