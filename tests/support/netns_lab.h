// NetnsLab: a small network of Linux network namespaces for one multi-host test, torn down by its
// destructor (also after a failed assertion).
//
// Layout: one namespace per node, each with `lo` up and an `eth0` holding 10.200.S.N/24, whose
// veth peer is a port of bridge `br0` in a dedicated switch namespace (no IP there). S is chosen
// per lab (from the pid) among /24s the host does not route anywhere else. Before any namespace
// exists, `blackhole 10.200.S.0/24` goes into the root namespace's routing table, so a process
// there that addressed a node by mistake gets an error instead of sending the packet out of the
// default gateway; it is removed last at teardown. Rule for users: nothing in the root namespace
// connects to a node's IP; run such processes with In() or Nsenter().
//
// Needs root and iproute2. Not thread-safe; construct, Create and destroy on one thread.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace lakecache::testing {

class NetnsLab {
 public:
  NetnsLab();
  ~NetnsLab();  // Destroy(); failures are printed to stderr
  NetnsLab(const NetnsLab&) = delete;
  NetnsLab& operator=(const NetnsLab&) = delete;

  // Adds the blackhole route, then the switch and one namespace per node ("store", "w1"...; at
  // most 250, names of letters, digits and '-'). When this machine cannot make namespaces (not
  // root, no `ip` or `nsenter`, not allowed) the message starts "this machine cannot create
  // network namespaces" and says why. On any failure what was made is removed again.
  // REQUIRES: Create has not been called on this lab.
  Status Create(std::vector<std::string> nodes);

  // Deletes the namespaces (their veth pairs go with them), then the blackhole route. Stop the
  // processes running in the namespaces (and unmount their FUSE mounts) first: any still inside
  // get SIGKILL here, or they would keep a namespace alive, unnamed, after `ip netns del`.
  // Idempotent.
  Status Destroy();

  // The node's address, e.g. "10.200.37.3"; "" for an unknown node.
  std::string Ip(const std::string& node) const;
  // argv run inside the node's namespace: `ip netns exec NS argv...` (which also gives it a
  // private mount namespace: mounts it makes are not seen by the host).
  std::vector<std::string> In(const std::string& node, const std::vector<std::string>& argv) const;
  // argv with only its network namespace changed: `nsenter --net=/run/netns/NS argv...`; for FUSE
  // mounts that must show in the root mount namespace.
  std::vector<std::string> Nsenter(const std::string& node,
                                   const std::vector<std::string>& argv) const;

  // The name of the node's namespace (unique to this process and lab); "" for an unknown node.
  std::string Namespace(const std::string& node) const;
  // What every namespace name of this lab starts with, switch included.
  const std::string& name_prefix() const { return prefix_; }
  // "10.200.S.0/24"; empty until Create picked it.
  const std::string& subnet() const { return subnet_; }

 private:
  // Picks a free 10.200.S.0/24 and adds its blackhole route.
  Status AddBlackhole();
  Status AddSwitch();
  Status AddNode(const std::string& node, int host);

  int seq_;             // this lab's number among those of this process
  std::string prefix_;  // "lcnet-PID-SEQ-"
  std::string subnet_;
  std::string subnet_base_;              // "10.200.S."
  bool blackhole_added_ = false;         // we own the route, so we remove it
  std::vector<std::string> namespaces_;  // made so far, switch first
  std::vector<std::string> nodes_;       // in Create's order; node i has host i + 1
};

}  // namespace lakecache::testing
