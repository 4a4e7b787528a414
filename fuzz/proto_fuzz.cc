// Feeds the bytes as one request message the master, a worker or the admin service takes (the
// first byte picks which), parsed with ParseFromArray and run through the checks the handlers make
// before they act: BlockReader::Resolve, ObjectWrites, WorkerRegistry, ClientTable, path checks.
// Asserts no crash, a resolved block lies inside its object, and nothing refused reaches the store.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "admin/convert.h"
#include "jobs/store_sink.h"
#include "master/client_table.h"
#include "master/worker_registry.h"
#include "meta/namespace_table.h"
#include "rpc/lakecache.pb.h"
#include "ufs/fault_injecting_store.h"
#include "ufs/local_store.h"
#include "worker/block_reader.h"
#include "worker/object_writes.h"

namespace lakecache {
namespace {

constexpr uint64_t kWriteBudget = 1 << 20;

// A worker's namespaces and cache, without its server: "lake" (prefix "data/", writable) and
// "ro" (read-only), over a store that refuses every call, so a call that gets past the checks is
// counted and goes no further. The block reader (whose content index the requests fill) is made
// anew for each input, so that every input is a reproducer on its own.
struct Worker {
  std::filesystem::path dir;
  std::shared_ptr<FaultInjectingStore> store;
  std::unique_ptr<NamespaceTable> namespaces;
  std::shared_ptr<BlockStore> blocks;
  std::unique_ptr<ObjectWrites> writes;

  Worker() {
    dir = std::filesystem::temp_directory_path() /
          ("lakecache-proto-fuzz-" + std::to_string(::getpid()));
    store = std::make_shared<FaultInjectingStore>(std::make_shared<LocalStore>(dir.string()));
    store->FailAlways(StoreOp::kAny, Status::Unavailable("fuzz: the store is away"));
    std::vector<NamespaceTable::Source> sources(2);
    sources[0].config.name = "lake";
    sources[0].prefix = "data/";
    sources[1].config.name = "ro";
    sources[1].config.write = false;
    for (NamespaceTable::Source& s : sources) s.store = store;
    namespaces = NamespaceTable::FromStores(std::move(sources));
    CacheConfig cache;
    cache.memory_capacity = 16 << 20;
    blocks = std::move(BlockStore::Open(cache).value());
    writes = std::make_unique<ObjectWrites>(namespaces.get(), kWriteBudget);
  }
  ~Worker() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

// What Resolve accepts is a block inside its object: the handlers read and cache it by that.
void Resolve(BlockReader& reader, const rpc::BlockId& id) {
  Namespace* ns = nullptr;
  BlockRequest req;
  if (!reader.Resolve(id, &ns, &req).ok()) return;
  if (!id.key().starts_with(ns->prefix) || req.key.index != id.index()) __builtin_trap();
  if (req.length > id.block_size()) __builtin_trap();
  if (id.object_size() > 0 &&
      (req.offset / id.block_size() != id.index() || req.offset >= id.object_size() ||
       req.length == 0 || req.length > id.object_size() - req.offset)) {
    __builtin_trap();
  }
}

// A write call reaches the store only for a key inside a writable namespace.
void WriteCall(Worker& w, const rpc::WriteCallRequest& request) {
  int64_t before = w.store->Calls(StoreOp::kAny);
  Result<rpc::WriteCallResponse> done = w.writes->Call(request);
  if (done.ok()) __builtin_trap();  // every store call fails
  if (w.store->Calls(StoreOp::kAny) == before) return;
  bool inside = request.ns() == "lake" && request.key().starts_with("data/");
  bool to_inside = request.op() != rpc::WriteCallRequest::COPY ||
                   (request.to_key().starts_with("data/") && request.to_key().size() > 5);
  if (!inside || !to_inside) __builtin_trap();
}

void WriteBody(Worker& w, const rpc::WriteBodyChunk& first) {
  int64_t before = w.store->Calls(StoreOp::kAny);
  // One more chunk, the same bytes again: the body must still fit its announced size.
  int more = 1;
  Result<rpc::WrittenObject> done = w.writes->Body(first, [&](rpc::WriteBodyChunk* next) {
    next->set_data(first.data());
    return more-- > 0;
  });
  if (done.ok() || w.writes->budget().used() != 0) __builtin_trap();
  if (w.store->Calls(StoreOp::kAny) == before) return;
  if (first.ns() != "lake" || !first.key().starts_with("data/") || first.size() > kWriteBudget ||
      first.size() != 2 * first.data().size()) {
    __builtin_trap();
  }
}

// The master's Register and Heartbeat after CheckWorker: a registered worker is in the view.
void Membership(const rpc::WorkerInfo& worker, bool heartbeat) {
  WorkerRegistry registry(std::chrono::seconds(1), std::chrono::seconds(5),
                          [] { return WorkerRegistry::Clock::time_point(std::chrono::hours(1)); });
  if (worker.id().empty() || worker.address().empty()) return;  // Register refuses these
  registry.Register(worker);
  if (heartbeat && !registry.Heartbeat(worker)) __builtin_trap();
  rpc::ClusterView view = registry.View();
  if (view.workers_size() != 1 || view.workers(0).id() != worker.id() ||
      view.workers(0).address() != worker.address()) {
    __builtin_trap();
  }
}

// The master's ListDir and Stat, and the admin service's jobs: a namespace and a relative path.
void PathRequest(const Worker& w, const std::string& ns, const std::string& path) {
  if (!w.namespaces->Get(ns).ok() || !CheckRelativePath("path", path).ok()) return;
  if (path.starts_with('/') || path.ends_with('/') || path.find("//") != std::string::npos ||
      path == "." || path == ".." || path.starts_with("../") || path.ends_with("/..") ||
      path.find("/../") != std::string::npos) {
    __builtin_trap();
  }
}

template <typename Message>
bool Parse(const uint8_t* data, size_t size, Message* m) {
  return m->ParseFromArray(data, static_cast<int>(size));
}

}  // namespace
}  // namespace lakecache

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lakecache;
  static Worker worker;
  if (size == 0) return 0;
  BlockReader reader(worker.namespaces.get(), worker.blocks);
  uint8_t kind = data[0];
  ++data, --size;
  switch (kind % 14) {
    case 0: {  // WorkerService/ReadBlock, and the bulk path's request
      rpc::ReadBlockRequest m;
      if (Parse(data, size, &m)) Resolve(reader, m.block());
      break;
    }
    case 1: {  // WorkerService/LocateBlock
      rpc::LocateBlockRequest m;
      if (Parse(data, size, &m) && m.has_block()) Resolve(reader, m.block());
      break;
    }
    case 2: {  // WorkerService/Prefetch
      rpc::PrefetchRequest m;
      if (Parse(data, size, &m)) {
        for (const rpc::BlockId& id : m.blocks()) Resolve(reader, id);
      }
      break;
    }
    case 3: {  // WorkerService/LoadBlocks: each block resolved, then its spec built
      rpc::LoadBlocksRequest m;
      if (!Parse(data, size, &m)) break;
      for (const rpc::BlockId& id : m.blocks()) Resolve(reader, id);
      break;
    }
    case 4: {  // WorkerService/Free: the object resolved as a block id, then freed
      rpc::FreeRequest m;
      if (!Parse(data, size, &m)) break;
      for (const rpc::ObjectVersion& v : m.objects()) {
        rpc::BlockId id = rpc::ToBlockId(v);
        Namespace* ns = nullptr;
        BlockRequest req;
        if (!reader.Resolve(id, &ns, &req).ok()) continue;
        ObjectSpec object = rpc::FromObjectVersion(v);
        // Free walks every block of the object: only the master may call it, with the sizes of
        // its listings, so it is fed objects of realistic block counts.
        if (object.blocks() > (1 << 16)) continue;
        StoreSink sink(worker.namespaces.get(), worker.blocks.get(), &reader.index(), nullptr);
        (void)sink.Free(v.ns(), std::span<const ObjectSpec>(&object, 1));
      }
      break;
    }
    case 5: {  // WorkerService/WriteCall
      rpc::WriteCallRequest m;
      if (Parse(data, size, &m)) WriteCall(worker, m);
      break;
    }
    case 6: {  // WorkerService/WriteBody's first message
      rpc::WriteBodyChunk m;
      if (Parse(data, size, &m)) WriteBody(worker, m);
      break;
    }
    case 7:
    case 8: {  // MasterService/Register and Heartbeat
      rpc::RegisterRequest m;
      if (Parse(data, size, &m)) Membership(m.worker(), kind % 14 == 8);
      break;
    }
    case 9: {  // MasterService/GetClusterView's report
      rpc::ClusterViewRequest m;
      if (!Parse(data, size, &m)) break;
      ClientTable clients(std::chrono::seconds(30));
      clients.Note(m.client());
      // Kept when its id and names are within ClientTable's bounds (an id of 1 to 64 bytes, names
      // of at most 4 KiB), dropped otherwise.
      const rpc::ClientReport& c = m.client();
      bool kept = !c.id().empty() && c.id().size() <= 64 && c.host().size() <= 4096 &&
                  c.mountpoint().size() <= 4096;
      if (clients.Live().size() != (kept ? 1u : 0u)) __builtin_trap();
      break;
    }
    case 10: {  // MasterService/ListDir
      rpc::ListDirRequest m;
      if (Parse(data, size, &m)) PathRequest(worker, m.ns(), m.dir());
      break;
    }
    case 11: {  // MasterService/Stat
      rpc::StatRequest m;
      if (Parse(data, size, &m)) PathRequest(worker, m.ns(), m.path());
      break;
    }
    case 12: {  // AdminService/Load (FreePath and StatPath take the same fields)
      rpc::LoadRequest m;
      if (Parse(data, size, &m)) PathRequest(worker, m.ns(), m.path());
      break;
    }
    case 13: {  // a LoadBlocks result as the master reads it back
      rpc::BlockResult m;
      if (!Parse(data, size, &m)) break;
      BlockOutcome outcome = rpc::FromProto(m);
      if (rpc::FromProto(rpc::ToProto(outcome)).state != outcome.state) __builtin_trap();
      break;
    }
  }
  // WorkerService/Stats after these requests: the cache use of every version they named.
  (void)reader.index().CachedBytes(*worker.blocks);
  return 0;
}
