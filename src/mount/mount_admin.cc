#include "mount/mount_admin.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "admin/admin_service.h"
#include "admin/convert.h"
#include "common/mutex.h"
#include "common/rendezvous.h"
#include "common/thread_pool.h"
#include "jobs/store_sink.h"
#include "rpc/unix_server.h"

namespace lakecache {
namespace {

constexpr size_t kLoadThreads = 16;  // object-store fetches of a load at once

}  // namespace

rpc::WorkerStats MountStats(FileSystem& fs, const std::string& mountpoint) {
  rpc::WorkerStats self;
  rpc::WorkerInfo* info = self.mutable_worker();
  info->set_id("mount");
  info->set_address(mountpoint);
  BlockStoreStats stats = fs.blocks().Stats();
  uint64_t capacity = 0, used = 0;
  for (const TierStats& t : stats.tiers) {
    capacity += t.capacity_bytes;
    used += t.used_bytes;
  }
  info->set_capacity_bytes(capacity);
  info->set_used_bytes(used);
  rpc::FillStats(stats, fs.contents().CachedBytes(fs.blocks()), &self);
  return self;
}

class MountAdmin::Backend final : public AdminBackend {
 public:
  Backend(std::shared_ptr<FileSystem> fs, MountAdminOptions options)
      : fs_(std::move(fs)), options_(std::move(options)) {}

  const NamespaceTable& namespaces() const override { return fs_->namespaces(); }

  Result<std::unique_ptr<BlockSink>> MakeSink(uint32_t replicas, uint32_t* aimed) override {
    if (!options_.master.empty()) {
      return Status::PreconditionFailed(
          "this is a cluster mount: admin commands go to its master " + options_.master);
    }
    if (replicas > 1) {
      return Status::InvalidArgument("--replica: a standalone mount keeps one copy of each block");
    }
    *aimed = 1;
    MutexLock lock(&mu_);
    if (pool_ == nullptr) pool_ = std::make_unique<ThreadPool>(kLoadThreads);
    return std::unique_ptr<BlockSink>(
        new StoreSink(&fs_->namespaces(), &fs_->blocks(), &fs_->contents(), pool_.get()));
  }

  Result<rpc::Report> GetReport() override {
    if (!options_.master.empty()) {
      return Status::PreconditionFailed("this is a cluster mount: ask its master " +
                                        options_.master);
    }
    rpc::Report report;
    *report.add_workers() = MountStats(*fs_, options_.mountpoint);
    return report;
  }

  rpc::HelloResponse Hello() override {
    rpc::HelloResponse hello;
    hello.set_master(options_.master);
    hello.set_root_namespace(options_.root_namespace);
    hello.set_mountpoint(options_.mountpoint);
    hello.set_credentials(options_.credentials);
    return hello;
  }

 private:
  std::shared_ptr<FileSystem> fs_;
  const MountAdminOptions options_;
  Mutex mu_;
  std::unique_ptr<ThreadPool> pool_ GUARDED_BY(mu_);  // made on first use
};

Result<std::unique_ptr<MountAdmin>> MountAdmin::Start(std::shared_ptr<FileSystem> fs,
                                                      MountAdminOptions options) {
  std::unique_ptr<MountAdmin> admin(new MountAdmin());
  rpc::UnixServerOptions socket;
  socket.path = options.socket_path;
  socket.allowed_uids = options.allow_uids;
  socket.what = "use the control socket of the mount at " + options.mountpoint;
  socket.how = "lakecache mount --allow-uid";
  std::vector<grpc::Service*> services;
  if (options.health) {
    admin->health_ = rpc::MakeHealthService(options.health);
    services.push_back(admin->health_.get());
  }
  admin->backend_ = std::make_unique<Backend>(std::move(fs), std::move(options));
  auto service = std::make_unique<AdminServiceImpl>(admin->backend_.get());
  admin->load_jobs_ = &service->load_jobs();
  admin->service_ = std::move(service);
  services.push_back(admin->service_.get());
  LC_ASSIGN_OR_RETURN(admin->server_, rpc::StartUnixServer(std::move(socket), services));
  return admin;
}

// The server goes first: no call reaches the backend after it.
MountAdmin::~MountAdmin() { server_.reset(); }

std::string ControlSocketPath(const std::string& mountpoint) {
  std::string dir;
  if (const char* run = std::getenv("LAKECACHE_RUN_DIR"); run != nullptr && *run != '\0') {
    dir = run;
  } else if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg != nullptr && *xdg != '\0') {
    dir = std::string(xdg) + "/lakecache";
  } else if (::geteuid() == 0) {
    dir = "/run/lakecache";
  } else {
    dir = "/tmp/lakecache-" + std::to_string(::geteuid());
  }
  char name[48];
  std::snprintf(name, sizeof(name), "/mount-%016llx.sock",
                static_cast<unsigned long long>(RendezvousSeed(mountpoint)));
  return dir + name;
}

}  // namespace lakecache
