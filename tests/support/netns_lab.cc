#include "support/netns_lab.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>

#include "support/process.h"

namespace lakecache::testing {
namespace {

constexpr char kSwitch[] = "switch";
constexpr char kBridge[] = "br0";
constexpr int kFirstSubnet = 10;  // 10.200.10.0/24 ... 10.200.209.0/24
constexpr int kSubnets = 200;
constexpr size_t kMaxNodes = 250;  // hosts .1 to .250
constexpr auto kIpTimeout = std::chrono::seconds(10);
constexpr char kCannot[] = "this machine cannot create network namespaces for the test: ";

int labs_made = 0;  // by this process: two labs of one test get different names and subnets

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

// Runs `ip args...`; the error names the command and says what ip said.
Status RunIp(const std::vector<std::string>& args, std::string* out = nullptr) {
  std::vector<std::string> argv = {"ip"};
  argv.insert(argv.end(), args.begin(), args.end());
  RunResult r = RunCommand(argv, {}, kIpTimeout);
  if (out != nullptr) *out = r.out;
  if (r.exit_code == 0) return Status::Ok();
  return Status::Internal(JoinArgv(argv) + " failed (exit " + std::to_string(r.exit_code) +
                          "): " + r.err);
}

bool ValidNodeName(const std::string& node) {
  return !node.empty() && node.size() <= 32 && std::all_of(node.begin(), node.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
  });
}

// Why namespaces cannot be made here; OK when they might.
Status CheckPrerequisites() {
  if (::geteuid() != 0) {
    return Status::AccessDenied(std::string(kCannot) + "it must run as root (euid is " +
                                std::to_string(::geteuid()) + ")");
  }
  for (const std::vector<std::string>& probe :
       {std::vector<std::string>{"ip", "-V"}, std::vector<std::string>{"nsenter", "--version"}}) {
    RunResult r = RunCommand(probe, {}, kIpTimeout);
    if (r.exit_code != 0) {
      return Status::NotFound(std::string(kCannot) + "`" + JoinArgv(probe) +
                              "` does not run (install iproute2 and util-linux): " + r.err);
    }
  }
  return Status::Ok();
}

// True when the root namespace routes `address` anywhere but through the default route, or has
// an address in its /24: the subnet is in use (a real network, or another lab).
bool SubnetInUse(const std::string& base) {
  std::string routes, addresses;
  if (!RunIp({"-o", "route", "show", "match", base + "1"}, &routes).ok()) return true;
  for (const std::string& line : Lines(routes)) {
    if (!line.starts_with("default")) return true;
  }
  if (!RunIp({"-o", "addr", "show", "to", base + "0/24"}, &addresses).ok()) return true;
  return !Lines(addresses).empty();
}

}  // namespace

NetnsLab::NetnsLab()
    : seq_(labs_made++),
      prefix_("lcnet-" + std::to_string(::getpid()) + "-" + std::to_string(seq_) + "-") {}

NetnsLab::~NetnsLab() {
  Status s = Destroy();
  if (!s.ok()) std::fprintf(stderr, "NetnsLab teardown: %s\n", s.ToString().c_str());
}

Status NetnsLab::Create(std::vector<std::string> nodes) {
  if (!subnet_.empty()) return Status::InvalidArgument("NetnsLab::Create called twice");
  if (nodes.empty() || nodes.size() > kMaxNodes) {
    return Status::InvalidArgument("a lab has 1 to " + std::to_string(kMaxNodes) + " nodes");
  }
  for (const std::string& node : nodes) {
    if (!ValidNodeName(node) || node == kSwitch ||
        std::count(nodes.begin(), nodes.end(), node) != 1) {
      return Status::InvalidArgument("bad or repeated node name '" + node + "'");
    }
  }
  LC_RETURN_IF_ERROR(CheckPrerequisites());
  Status made = AddBlackhole();  // first: no namespace exists before the route does
  if (made.ok()) made = AddSwitch();
  nodes_ = std::move(nodes);
  for (size_t i = 0; i < nodes_.size() && made.ok(); ++i) {
    made = AddNode(nodes_[i], static_cast<int>(i) + 1);
  }
  if (made.ok()) return made;
  Status undone = Destroy();
  if (!undone.ok()) return made.WithContext("(and cleaning up: " + undone.message() + ")");
  return made;
}

Status NetnsLab::AddBlackhole() {
  int first = static_cast<int>((::getpid() + 37 * seq_) % kSubnets);
  for (int i = 0; i < kSubnets; ++i) {
    std::string base = "10.200." + std::to_string(kFirstSubnet + (first + i) % kSubnets) + ".";
    if (SubnetInUse(base)) continue;
    std::string subnet = base + "0/24";
    // `add`, not `replace`: never take over a route someone else owns (a race with SubnetInUse).
    Status added = RunIp({"route", "add", "blackhole", subnet});
    if (!added.ok() && added.message().find("not permitted") != std::string::npos) {
      return Status::AccessDenied(std::string(kCannot) + added.message());
    }
    if (!added.ok()) continue;
    subnet_ = subnet;
    subnet_base_ = base;
    blackhole_added_ = true;
    return Status::Ok();
  }
  return Status::Unavailable(std::string(kCannot) +
                             "no 10.200.S.0/24 is free for its blackhole route (see `ip route`)");
}

Status NetnsLab::AddSwitch() {
  std::string sw = prefix_ + kSwitch;
  if (Status s = RunIp({"netns", "add", sw}); !s.ok()) {
    return Status::AccessDenied(std::string(kCannot) + s.message());
  }
  namespaces_.push_back(sw);
  LC_RETURN_IF_ERROR(RunIp({"-n", sw, "link", "set", "lo", "up"}));
  LC_RETURN_IF_ERROR(RunIp({"-n", sw, "link", "add", kBridge, "type", "bridge"}));
  return RunIp({"-n", sw, "link", "set", kBridge, "up"});
}

Status NetnsLab::AddNode(const std::string& node, int host) {
  std::string ns = prefix_ + node;
  std::string sw = prefix_ + kSwitch;
  std::string port = "p" + std::to_string(host);  // the veth end on the switch
  LC_RETURN_IF_ERROR(RunIp({"netns", "add", ns}));
  namespaces_.push_back(ns);
  LC_RETURN_IF_ERROR(RunIp({"-n", ns, "link", "set", "lo", "up"}));
  // Both ends are made inside their namespaces: nothing appears in the root namespace.
  LC_RETURN_IF_ERROR(RunIp(
      {"link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", port, "netns", sw}));
  LC_RETURN_IF_ERROR(RunIp({"-n", sw, "link", "set", port, "master", kBridge}));
  LC_RETURN_IF_ERROR(RunIp({"-n", sw, "link", "set", port, "up"}));
  LC_RETURN_IF_ERROR(
      RunIp({"-n", ns, "addr", "add", subnet_base_ + std::to_string(host) + "/24", "dev", "eth0"}));
  return RunIp({"-n", ns, "link", "set", "eth0", "up"});
}

Status NetnsLab::Destroy() {
  std::string errors;
  // A process left in a namespace would keep it, and its veth, alive unnamed after `netns del`.
  // Only this lab's users put processes there.
  for (const std::string& ns : namespaces_) {
    std::string pids;
    if (!RunIp({"netns", "pids", ns}, &pids).ok()) continue;
    for (const std::string& pid : Lines(pids)) {
      std::fprintf(stderr, "NetnsLab: killing pid %s, still running in %s\n", pid.c_str(),
                   ns.c_str());
      ::kill(std::stoi(pid), SIGKILL);
    }
  }
  for (auto it = namespaces_.rbegin(); it != namespaces_.rend(); ++it) {
    if (Status s = RunIp({"netns", "del", *it}); !s.ok()) errors += s.message() + "; ";
  }
  namespaces_.clear();
  if (blackhole_added_) {  // last: no namespace IP is reachable any more
    if (Status s = RunIp({"route", "del", "blackhole", subnet_}); !s.ok()) {
      errors += s.message() + "; ";
    }
    blackhole_added_ = false;
  }
  if (errors.empty()) return Status::Ok();
  return Status::Internal("NetnsLab " + prefix_ + "*: " + errors);
}

std::string NetnsLab::Ip(const std::string& node) const {
  auto it = std::find(nodes_.begin(), nodes_.end(), node);
  if (it == nodes_.end() || subnet_base_.empty()) return "";
  return subnet_base_ + std::to_string(it - nodes_.begin() + 1);
}

std::string NetnsLab::Namespace(const std::string& node) const {
  bool known = std::find(nodes_.begin(), nodes_.end(), node) != nodes_.end();
  return known ? prefix_ + node : "";
}

std::vector<std::string> NetnsLab::In(const std::string& node,
                                      const std::vector<std::string>& argv) const {
  std::vector<std::string> out = {"ip", "netns", "exec", Namespace(node)};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

std::vector<std::string> NetnsLab::Nsenter(const std::string& node,
                                           const std::vector<std::string>& argv) const {
  std::vector<std::string> out = {"nsenter", "--net=/run/netns/" + Namespace(node)};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

}  // namespace lakecache::testing
