#include "cluster_client/node_memory.h"

#include <spdlog/spdlog.h>

#include "common/scoped_fd.h"
#include "rpc/node_socket.h"

namespace lakecache {

Result<std::shared_ptr<ShmReader>> OpenWorkerSession(const std::string& path, bool prefault) {
  rpc::NodeHello hello;
  LC_ASSIGN_OR_RETURN(int fd, rpc::ConnectNodeSocket(path, std::chrono::seconds(2), &hello));
  if (!hello.accepted) {
    ScopedFd refused(fd);
    return Status::AccessDenied(hello.reason);
  }
  ShmFds fds;
  fds.index = hello.fds[0];
  fds.anchors = hello.fds[1];
  fds.arenas.assign(hello.fds.begin() + 2, hello.fds.end());
  fds.session = fd;
  return ShmReader::Map(std::move(fds), prefault);
}

std::shared_ptr<ShmReader> MapWorkerMemory(const std::string& id, const std::string& path,
                                           bool prefault) {
  Result<std::shared_ptr<ShmReader>> shm = OpenWorkerSession(path, prefault);
  if (shm.ok()) {
    spdlog::info("mapping the memory cache of worker {} on this host ({} MiB, shared memory)", id,
                 (*shm)->mapped_bytes() >> 20);
    return *shm;
  }
  const Status& failed = shm.status();
  spdlog::warn(
      "cannot map the memory cache of worker {} on this host through {}: {}; reading its "
      "blocks over the network",
      id, path, failed.message());
  return nullptr;
}

BlockRef FindInNodeMemory(const ClientView& view, const BlockKey& key) {
  for (size_t i : view.local) {
    if (BlockRef block = view.workers[i].shm->Find(key)) return block;
  }
  return nullptr;
}

const ViewWorker* LocalWorkerOfArena(const ClientView& view, int arena_fd) {
  for (size_t i : view.local) {
    if (view.workers[i].shm->HoldsArena(arena_fd)) return &view.workers[i];
  }
  return nullptr;
}

bool NodeMemoryContains(const ClientView& view, const BlockKey& key) {
  for (size_t i : view.local) {
    if (view.workers[i].shm->Contains(key)) return true;
  }
  return false;
}

bool OwnerIsMapped(const ClientView& view, const BlockKey& key) {
  if (view.local.empty()) return false;
  std::vector<size_t> order = RendezvousOrder(StableKeyHash(key), view.nodes);
  return !order.empty() && view.workers[order[0]].shm != nullptr;
}

uint64_t NodeMappedBytes(const ClientView& view) {
  uint64_t bytes = 0;
  for (size_t i : view.local) bytes += view.workers[i].shm->mapped_bytes();
  return bytes;
}

bool SomeNodeSessionClosed(const ClientView& view) {
  for (size_t i : view.local) {
    if (rpc::NodeSocketClosed(view.workers[i].shm->session_fd())) return true;
  }
  return false;
}

}  // namespace lakecache
