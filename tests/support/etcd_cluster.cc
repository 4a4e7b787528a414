#include "support/etcd_cluster.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include <fmt/format.h>

namespace lakecache::testing {

namespace fs = std::filesystem;

Result<std::unique_ptr<EtcdCluster>> EtcdCluster::Start(int members, const TlsFiles* tls,
                                                        std::vector<std::string> extra_args) {
  std::unique_ptr<EtcdCluster> cluster(new EtcdCluster());
  cluster->extra_args_ = std::move(extra_args);
  if (tls != nullptr) cluster->tls_ = *tls;
  std::error_code ec;
  std::string base = fs::is_directory("/dev/shm", ec) ? "/dev/shm" : "/tmp";
  std::string pattern = base + "/lakecache-etcd.XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr)
    return Status::IoError(fmt::format("mkdtemp {} failed", pattern));
  cluster->dir_ = pattern;
  for (int i = 0; i < members; ++i) {
    Member m;
    m.name = fmt::format("m{}", i);
    m.client_port = FreeLoopbackPort();
    m.peer_port = FreeLoopbackPort();
    while (m.peer_port == m.client_port) m.peer_port = FreeLoopbackPort();
    m.data_dir = fmt::format("{}/{}", cluster->dir_, m.name);
    if (!cluster->initial_cluster_.empty()) cluster->initial_cluster_ += ",";
    cluster->initial_cluster_ += fmt::format("{}=http://127.0.0.1:{}", m.name, m.peer_port);
    cluster->members_.push_back(std::move(m));
  }
  for (auto& m : cluster->members_) {
    Status status = cluster->StartMember(m);
    if (!status.ok()) return status;
  }
  Status healthy = cluster->WaitHealthy();
  if (!healthy.ok()) return healthy;
  return cluster;
}

EtcdCluster::~EtcdCluster() {
  for (auto& m : members_)
    if (m.process) {
      ::kill(m.process->pid(), SIGCONT);
      m.process->Stop();
    }
  if (!dir_.empty()) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

Status EtcdCluster::StartMember(Member& m) {
  std::string client_url =
      fmt::format("{}://127.0.0.1:{}", tls_.cert_path.empty() ? "http" : "https", m.client_port);
  std::vector<std::string> argv = {"etcd",
                                   "--name",
                                   m.name,
                                   "--data-dir",
                                   m.data_dir,
                                   "--listen-client-urls",
                                   client_url,
                                   "--advertise-client-urls",
                                   client_url,
                                   "--listen-peer-urls",
                                   fmt::format("http://127.0.0.1:{}", m.peer_port),
                                   "--initial-advertise-peer-urls",
                                   fmt::format("http://127.0.0.1:{}", m.peer_port),
                                   "--initial-cluster",
                                   initial_cluster_,
                                   "--initial-cluster-state",
                                   "new",
                                   "--initial-cluster-token",
                                   fs::path(dir_).filename().string(),
                                   "--heartbeat-interval",
                                   "200",
                                   "--election-timeout",
                                   "2000",
                                   "--logger",
                                   "zap",
                                   "--log-level",
                                   "warn"};
  if (!tls_.cert_path.empty()) {
    argv.insert(argv.end(), {"--cert-file", tls_.cert_path, "--key-file", tls_.key_path,
                             "--trusted-ca-file", tls_.cert_path, "--client-cert-auth"});
  }
  argv.insert(argv.end(), extra_args_.begin(), extra_args_.end());
  auto child = ChildProcess::Start(argv, fmt::format("{}/{}.log", dir_, m.name));
  if (!child.ok()) return child.status();
  m.process = std::move(child).value();
  return Status::Ok();
}

std::string EtcdCluster::endpoint(int member) const {
  return fmt::format("{}127.0.0.1:{}", tls_.cert_path.empty() ? "" : "https://",
                     members_[member].client_port);
}

std::string EtcdCluster::endpoints() const {
  std::string out;
  for (int i = 0; i < size(); ++i) out += (i ? "," : "") + endpoint(i);
  return out;
}

bool EtcdCluster::running(int member) const {
  return members_[member].process && members_[member].process->Running();
}

void EtcdCluster::Kill(int member) {
  auto& m = members_[member];
  if (!m.process) return;
  ::kill(m.process->pid(), SIGKILL);
  while (m.process->Running()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  m.process.reset();
}

namespace {

// True once every thread of `pid` is stopped: SIGSTOP is delivered to each thread on its own, and
// one still running may answer a call after kill() returned.
bool AllThreadsStopped(pid_t pid) {
  std::error_code ec;
  for (const auto& task : fs::directory_iterator(fmt::format("/proc/{}/task", pid), ec)) {
    std::ifstream stat(task.path() / "stat");
    std::string line;
    std::getline(stat, line);
    auto close = line.rfind(')');
    if (close == std::string::npos || close + 2 >= line.size()) return false;
    if (line[close + 2] != 'T' && line[close + 2] != 't') return false;
  }
  return !ec;
}

}  // namespace

void EtcdCluster::Pause(int member) {
  pid_t pid = members_[member].process->pid();
  ::kill(pid, SIGSTOP);
  while (members_[member].process->Running() && !AllThreadsStopped(pid))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
}
void EtcdCluster::Resume(int member) { ::kill(members_[member].process->pid(), SIGCONT); }

Status EtcdCluster::Restart(int member) {
  Kill(member);
  Status status = StartMember(members_[member]);
  if (!status.ok()) return status;
  return WaitHealthy();
}

Status EtcdCluster::RestartStopped() {
  for (auto& m : members_) {
    if (m.process) continue;
    Status status = StartMember(m);
    if (!status.ok()) return status;
  }
  return WaitHealthy();
}

Result<std::string> EtcdCluster::Ctl(const std::vector<std::string>& args, int member) const {
  std::vector<std::string> argv = {"etcdctl",
                                   "--endpoints",
                                   member < 0 ? endpoints() : endpoint(member),
                                   "--dial-timeout",
                                   "3s",
                                   "--command-timeout",
                                   "10s"};
  if (!tls_.cert_path.empty()) {
    argv.insert(argv.end(),
                {"--cacert", tls_.cert_path, "--cert", tls_.cert_path, "--key", tls_.key_path});
  }
  argv.insert(argv.end(), args.begin(), args.end());
  RunResult r = RunCommand(argv, {"ETCDCTL_API=3"}, std::chrono::seconds(30));
  if (r.exit_code != 0)
    return Status::Unavailable(
        fmt::format("{} failed ({}): {}", JoinArgv(argv), r.exit_code, r.err));
  return r.out;
}

int EtcdCluster::RaftLeader() const {
  static const std::regex member_id("\"member_id\":([0-9]+)"), leader("\"leader\":([0-9]+)");
  for (int i = 0; i < size(); ++i) {
    if (!members_[i].process) continue;
    auto out = Ctl({"endpoint", "status", "-w", "json"}, i);
    std::smatch m, l;
    if (out.ok() && std::regex_search(*out, m, member_id) && std::regex_search(*out, l, leader) &&
        m[1] == l[1])
      return i;
  }
  return -1;
}

Status EtcdCluster::WaitHealthy(std::chrono::seconds timeout) const {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last;
  while (std::chrono::steady_clock::now() < deadline) {
    bool all = true;
    for (int i = 0; i < size() && all; ++i) {
      if (!members_[i].process) continue;
      auto out = Ctl({"endpoint", "health"}, i);
      if (!out.ok()) {
        all = false;
        last = out.status().message();
      }
    }
    if (all) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  std::string logs;
  for (const auto& m : members_)
    logs +=
        fmt::format("\n{}: {}", m.name, ReadFileTail(fmt::format("{}/{}.log", dir_, m.name), 800));
  return Status::DeadlineExceeded(
      fmt::format("etcd did not become healthy in {} s: {}{}", timeout.count(), last, logs));
}

}  // namespace lakecache::testing
