// A real etcd cluster for tests: Debian's etcd-server, N members on free 127.0.0.1 ports, each
// member's data on tmpfs (/dev/shm when there is one: etcd preallocates its WAL), started and
// stopped by the test. Its timeouts are raised (heartbeat 200 ms, election 2 s, etcd's defaults are
// 100 ms and 1 s), so two busy cores do not make the members elect a new leader when nothing
// failed; the shortest lease etcd grants is then 3 s (1.5 election timeouts). Not thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "support/process.h"
#include "support/test_servers.h"

namespace lakecache::testing {

class EtcdCluster {
 public:
  // Starts `members` members and waits until the cluster has a leader and serves. With `tls`
  // (a certificate for IP 127.0.0.1 that is also its own CA, e.g. MakeSelfSignedCert's), clients
  // speak TLS to the members and must present a certificate that CA signed
  // (--client-cert-auth); the members' endpoints are then https://. `extra_args` go to every
  // member's command line (e.g. {"--auth-token-ttl", "1"}).
  static Result<std::unique_ptr<EtcdCluster>> Start(int members = 3, const TlsFiles* tls = nullptr,
                                                    std::vector<std::string> extra_args = {});
  ~EtcdCluster();
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  // "127.0.0.1:P1,127.0.0.1:P2,..." (every member), and one member's.
  std::string endpoints() const;
  std::string endpoint(int member) const;
  int size() const { return static_cast<int>(members_.size()); }

  // SIGKILL (a crash) or SIGSTOP / SIGCONT (a member that stops answering) one member.
  void Kill(int member);
  void Pause(int member);
  void Resume(int member);
  // Starts a killed member again on its data and ports, and waits until it serves.
  Status Restart(int member);
  // Starts every member that is not running, then waits until they serve (a quorum needs them
  // together).
  Status RestartStopped();
  bool running(int member) const;
  // The member that leads the etcd cluster's raft now (-1: none answers).
  int RaftLeader() const;

  // etcdctl against the cluster (or one member): its stdout, or an error with its stderr.
  Result<std::string> Ctl(const std::vector<std::string>& args, int member = -1) const;
  // Waits until the members that run answer `endpoint health`.
  Status WaitHealthy(std::chrono::seconds timeout = std::chrono::seconds(30)) const;

 private:
  struct Member {
    std::string name;
    int client_port = 0;
    int peer_port = 0;
    std::string data_dir;
    std::unique_ptr<ChildProcess> process;
  };
  EtcdCluster() = default;
  Status StartMember(Member& m);

  std::string dir_;  // removed with everything in it by the destructor
  std::vector<Member> members_;
  std::string initial_cluster_;
  TlsFiles tls_;  // empty paths: plain
  std::vector<std::string> extra_args_;
};

}  // namespace lakecache::testing
