#include "worker/worker_server.h"

#include <grpcpp/server.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/server_callback.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "admin/convert.h"
#include "admin/stats_metrics.h"
#include "cache/block_key.h"
#include "fetch/block_fetch.h"
#include "jobs/store_sink.h"
#include "master_client/master_set.h"
#include "rpc/advertise.h"
#include "rpc/block_chunk.h"
#include "rpc/grpc_util.h"
#include "rpc/lakecache.grpc.pb.h"
#include "security/x509.h"
#include "worker/block_reader.h"
#include "worker/object_writes.h"

namespace lakecache {
namespace {

constexpr uint64_t kChunkBytes = 16 << 20;  // one ReadBlockChunk message at most
constexpr size_t kPrefetchThreads = 8;
// ReadBlock calls served at once; each may wait for an object-store fetch.
constexpr size_t kReadThreads = 32;
// Object-store fetches of LoadBlocks batches at once (the master sends at most a few batches).
constexpr size_t kLoadThreads = 16;
constexpr std::chrono::milliseconds kRpcTimeout{5000};

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A wildcard listen address cannot be dialled: advertise the host name instead.
std::string Advertised(const std::string& bound) {
  size_t colon = bound.rfind(':');
  std::string host = bound.substr(0, colon);
  if (host != "0.0.0.0" && host != "[::]" && host != "::") return bound;
  char name[256] = {0};
  if (::gethostname(name, sizeof(name) - 1) != 0) return bound;
  return std::string(name) + bound.substr(colon);
}

// A call to the master that, while the master is unreachable, waits for it to come back (up to one
// heartbeat interval) instead of failing at once: a restarted master hears from every worker as
// soon as it listens.
void WaitForMaster(grpc::ClientContext* ctx, std::chrono::milliseconds interval) {
  ctx->set_wait_for_ready(true);
  rpc::SetTimeout(ctx, std::clamp<std::chrono::milliseconds>(
                           interval, std::chrono::milliseconds(100), kRpcTimeout));
}

}  // namespace

std::vector<std::string> WorkerServer::MasterList() const {
  Result<std::vector<std::string>> list = ParseMasterList("--master", options_.master);
  return list.ok() ? *list : std::vector<std::string>{options_.master};  // checked by Start
}

Result<WorkerIdentity> LoadOrCreateWorkerIdentity(const std::string& dir, std::string* temp_dir) {
  std::string folder = dir;
  if (folder.empty()) {
    std::string made =
        (std::filesystem::temp_directory_path() / "lakecache-worker-XXXXXX").string();
    if (::mkdtemp(made.data()) == nullptr) {
      return Status::IoError("cannot make a folder for the worker's key: " +
                             std::string(std::strerror(errno)));
    }
    *temp_dir = folder = made;
  }
  WorkerIdentity identity;
  identity.key_path = folder + "/worker.key";
  identity.cert_path = folder + "/worker.crt";
  std::string key;
  {
    std::ifstream in(identity.key_path);
    std::stringstream text;
    text << in.rdbuf();
    key = text.str();
  }
  if (key.empty()) {
    LC_ASSIGN_OR_RETURN(key, security::GenerateKeyPem());
    LC_RETURN_IF_ERROR(security::WriteFileAtomically(identity.key_path, key, 0600));
  }
  Result<std::string> fingerprint = security::KeyFingerprint(key);
  if (!fingerprint.ok()) {
    return fingerprint.status().WithContext("the worker key " + identity.key_path +
                                            " is unusable (remove it to make a new one)");
  }
  identity.id = security::WorkerIdFromFingerprint(*fingerprint);
  return identity;
}

std::string WorkerServer::DigestsPath() const {
  return identity_.key_path.substr(0, identity_.key_path.rfind('/')) + "/worker.digests";
}

void WorkerServer::SaveDigests(const google::protobuf::RepeatedPtrField<rpc::RoleDigest>& tokens) {
  rpc::RoleDigests kept;
  *kept.mutable_tokens() = tokens;
  if (Status s = security::WriteFileAtomically(DigestsPath(), kept.SerializeAsString(), 0600);
      !s.ok()) {
    spdlog::warn("worker {}: {} (a restart asks the master again)", id_, s.message());
  }
}

bool WorkerServer::LoadDigests() {
  std::ifstream in(DigestsPath(), std::ios::binary);
  rpc::RoleDigests kept;
  if (!in || !kept.ParseFromIstream(&in) || kept.tokens().empty()) return false;
  authorizer_->Update(kept.tokens());
  return true;
}

bool WorkerServer::KeptCertificateUsable() {
  std::ifstream in(identity_.cert_path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) return false;
  std::ifstream key_in(identity_.key_path);
  std::stringstream key;
  key << key_in.rdbuf();
  Result<security::CertificateInfo> cert = security::ParseCertificate(text.str());
  Result<std::string> fingerprint = security::KeyFingerprint(key.str());
  if (!cert.ok() || !fingerprint.ok() || cert->key_fingerprint != *fingerprint) return false;
  // Issued by this cluster's CA (the credentials may be another cluster's now).
  std::ifstream ca_in(credentials_->ca_path());
  std::stringstream ca;
  ca << ca_in.rdbuf();
  Result<bool> ours = security::SignedBy(text.str(), ca.str());
  if (!ours.ok() || !*ours) return false;
  if (cert->dns_names.empty() || cert->dns_names[0] != security::WorkerTlsName(id_)) return false;
  auto half = cert->not_before + (cert->not_after - cert->not_before) / 2;
  if (std::chrono::system_clock::now() >= half) return false;
  renew_at_ = half;
  return true;
}

Status WorkerServer::ObtainCertificate(std::chrono::system_clock::time_point deadline) {
  std::ifstream key_in(identity_.key_path);
  std::stringstream key;
  key << key_in.rdbuf();
  LC_ASSIGN_OR_RETURN(std::string csr, security::MakeCsr(key.str(), security::WorkerTlsName(id_)));
  MasterSet masters(MasterList(), [this](const std::string& address) {
    return credentials_->Channel(address, security::kMasterTlsName);
  });
  rpc::CertificateRequest request;
  request.set_csr_pem(csr);
  rpc::CertificateResponse response;
  // Any master issues certificates: each is waited for a while in turn until one answers.
  const auto turn = masters.addresses().size() == 1 ? std::chrono::hours(24) : kRpcTimeout;
  grpc::Status status;
  std::string asked;
  for (;;) {
    MasterSet::Master master = masters.Current();
    asked = master.address;
    grpc::ClientContext ctx;
    ctx.set_wait_for_ready(true);
    ctx.set_deadline(std::min(deadline, std::chrono::system_clock::now() + turn));
    status =
        rpc::MasterService::NewStub(master.channel)->IssueCertificate(&ctx, request, &response);
    if (status.ok() || !masters.Failed(master, status, ctx) ||
        std::chrono::system_clock::now() >= deadline) {
      break;
    }
  }
  if (!status.ok()) {
    Status failed = rpc::FromGrpcStatus(status, "master " + asked)
                        .WithContext("worker " + id_ + ": no certificate from the master");
    if (!failed.peer_failed()) return failed;  // refused: the message says why
    return Status(failed.code(), failed.message() + " (is the master running at " +
                                     options_.master + ", with --credentials of the same CA as " +
                                     credentials_->ca_path() + "?)");
  }
  if (response.worker_id() != id_) {
    return Status::Internal("the master named worker " + id_ + " '" + response.worker_id() + "'");
  }
  authorizer_->Update(response.tokens());
  SaveDigests(response.tokens());
  LC_RETURN_IF_ERROR(
      security::WriteFileAtomically(identity_.cert_path, response.certificate_pem(), 0644));
  auto not_after =
      std::chrono::system_clock::time_point(std::chrono::milliseconds(response.not_after_ms()));
  auto now = std::chrono::system_clock::now();
  renew_at_ = now + (not_after - now) / 2;
  spdlog::info("worker {}: certificate from master {} for {}, renewed in {} s", id_, asked,
               security::WorkerTlsName(id_),
               std::chrono::duration_cast<std::chrono::seconds>(renew_at_ - now).count());
  return Status::Ok();
}

class WorkerServer::Service final
    : public rpc::WorkerService::WithRawCallbackMethod_ReadBlock<rpc::WorkerService::Service> {
 public:
  Service(NamespaceTable* namespaces, std::shared_ptr<BlockStore> blocks, BlockReader* reader,
          ThreadPool* pool, ThreadPool* read_pool, ThreadPool* load_pool,
          std::function<void(rpc::WorkerInfo*)> fill_info,
          std::function<void(rpc::WorkerStats*)> fill_shm, uint64_t write_budget)
      : writes_(namespaces, write_budget),
        blocks_(std::move(blocks)),
        reader_(reader),
        pool_(pool),
        read_pool_(read_pool),
        sink_(namespaces, blocks_.get(), &reader->index(), load_pool),
        fill_info_(std::move(fill_info)),
        fill_shm_(std::move(fill_shm)) {}

  // ReadBlock is served raw and zero-copy: the reply is one message whose bytes are a gRPC slice
  // over the pinned block itself (the slice holds a BlockRef until gRPC has sent it), behind a
  // few bytes of protobuf framing, so the worker copies nothing; the kernel's send is the only
  // copy. The block is looked up (or fetched) on the read pool, never on gRPC's callback threads.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* ReadBlock(grpc::CallbackServerContext* ctx,
                                                        const grpc::ByteBuffer* request) override {
    auto* writer = new BlockWriter();
    if (grpc::Status denied = Allow(ctx, kClient, "WorkerService/ReadBlock"); !denied.ok()) {
      writer->Refuse(denied);
      return writer;
    }
    auto raw = std::make_shared<grpc::ByteBuffer>(*request);  // refcounted slices, no copy
    read_pool_->Post([this, writer, raw] { writer->Finish(Serve(raw.get())); });
    return writer;
  }

  grpc::Status LocateBlock(grpc::ServerContext* ctx, const rpc::LocateBlockRequest* request,
                           rpc::LocateBlockResponse* response) override {
    if (grpc::Status denied = Allow(ctx, kClient, "WorkerService/LocateBlock"); !denied.ok())
      return denied;
    BlockKey key{{request->content_hi(), request->content_lo()}, request->index()};
    if (request->has_block()) {
      Namespace* ns = nullptr;
      BlockRequest req;
      if (Status s = reader_->Resolve(request->block(), &ns, &req); !s.ok()) {
        return rpc::ToGrpcStatus(s);
      }
      key = req.key;
    }
    std::string path = blocks_->FilePath(key);
    if (!path.empty()) {
      blocks_located_.fetch_add(1, std::memory_order_relaxed);
      response->set_path(std::move(path));
    }
    return grpc::Status::OK;
  }

  grpc::Status Prefetch(grpc::ServerContext* ctx, const rpc::PrefetchRequest* request,
                        rpc::PrefetchResponse* response) override {
    if (grpc::Status denied = Allow(ctx, kMasterOrClient, "WorkerService/Prefetch"); !denied.ok())
      return denied;
    uint32_t started = 0, cached = 0;
    for (const rpc::BlockId& id : request->blocks()) {
      Namespace* ns = nullptr;
      BlockRequest req;
      if (Status s = reader_->Resolve(id, &ns, &req); !s.ok()) return rpc::ToGrpcStatus(s);
      if (blocks_->Contains(req.key)) {
        ++cached;
        continue;
      }
      ++started;
      // A preload is a request to cache: Get admits the block to the tiers (unlike read-ahead).
      pool_->Post([blocks = blocks_, store = ns->store, req] {
        Result<BlockRef> got =
            blocks->Get(req, [&store](const BlockRequest& r) { return FetchBlock(*store, r); });
        if (!got.ok()) spdlog::warn("prefetch of {}: {}", req.object_key, got.status().ToString());
      });
    }
    response->set_started(started);
    response->set_cached(cached);
    return grpc::Status::OK;
  }

  grpc::Status Stats(grpc::ServerContext* ctx, const rpc::WorkerStatsRequest*,
                     rpc::WorkerStats* response) override {
    if (grpc::Status denied = Allow(ctx, kMasterOrAdmin, "WorkerService/Stats"); !denied.ok())
      return denied;
    FillStats(response);
    return grpc::Status::OK;
  }

  // What Stats answers, and what the metrics registry reads at a scrape.
  void FillStats(rpc::WorkerStats* response) {
    fill_info_(response->mutable_worker());
    rpc::FillStats(blocks_->Stats(), reader_->index().CachedBytes(*blocks_), response);
    response->set_blocks_served(reader_->blocks_served());
    response->set_bytes_served(reader_->bytes_served());
    response->set_blocks_located(blocks_located_.load(std::memory_order_relaxed));
    fill_shm_(response);
  }

  grpc::Status Free(grpc::ServerContext* ctx, const rpc::FreeRequest* request,
                    rpc::FreeResponse* response) override {
    if (grpc::Status denied = Allow(ctx, kMaster, "WorkerService/Free"); !denied.ok())
      return denied;
    uint64_t freed = 0;
    for (const rpc::ObjectVersion& v : request->objects()) {
      rpc::BlockId id;
      id.set_ns(v.ns());
      id.set_key(v.key());
      id.set_etag(v.etag());
      id.set_object_size(v.object_size());
      id.set_block_size(v.block_size());
      Namespace* ns = nullptr;
      BlockRequest req;
      if (Status s = reader_->Resolve(id, &ns, &req); !s.ok()) return rpc::ToGrpcStatus(s);
      ObjectSpec object = rpc::FromObjectVersion(v);
      auto got = sink_.Free(v.ns(), std::span<const ObjectSpec>(&object, 1));
      if (!got.ok()) return rpc::ToGrpcStatus(got.status());
      freed += *got;
    }
    response->set_blocks_freed(freed);
    return grpc::Status::OK;
  }

  grpc::Status LoadBlocks(grpc::ServerContext* ctx, const rpc::LoadBlocksRequest* request,
                          rpc::LoadBlocksResponse* response) override {
    if (grpc::Status denied = Allow(ctx, kMaster, "WorkerService/LoadBlocks"); !denied.ok())
      return denied;
    // Batches name one namespace in practice; group runs of the same one for the sink.
    std::vector<BlockSpec> run;
    std::string run_ns;
    auto flush = [&] {
      for (const BlockOutcome& o : sink_.Load(run_ns, run, request->check_only())) {
        *response->add_results() = rpc::ToProto(o);
      }
      run.clear();
    };
    for (const rpc::BlockId& id : request->blocks()) {
      Namespace* ns = nullptr;
      BlockRequest req;
      if (Status s = reader_->Resolve(id, &ns, &req); !s.ok()) return rpc::ToGrpcStatus(s);
      if (!run.empty() && id.ns() != run_ns) flush();
      run_ns = id.ns();
      run.push_back(
          {ObjectSpec{id.key(), id.etag(), id.object_size(), id.block_size()}, id.index()});
    }
    if (!run.empty()) flush();
    return grpc::Status::OK;
  }

  // Writes of mounts (ObjectWrites); a refusal reaches the mount with its errno.
  grpc::Status WriteBody(grpc::ServerContext* ctx, grpc::ServerReader<rpc::WriteBodyChunk>* reader,
                         rpc::WrittenObject* response) override {
    if (grpc::Status denied = Allow(ctx, kClient, "WorkerService/WriteBody"); !denied.ok())
      return denied;
    rpc::WriteBodyChunk first;
    if (!reader->Read(&first)) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "a write with no body");
    }
    Result<rpc::WrittenObject> written =
        writes_.Body(first, [reader](rpc::WriteBodyChunk* next) { return reader->Read(next); });
    if (!written.ok()) return rpc::ToGrpcStatus(written.status());
    *response = std::move(*written);
    return grpc::Status::OK;
  }

  grpc::Status WriteCall(grpc::ServerContext* ctx, const rpc::WriteCallRequest* request,
                         rpc::WriteCallResponse* response) override {
    if (grpc::Status denied = Allow(ctx, kClient, "WorkerService/WriteCall"); !denied.ok())
      return denied;
    Result<rpc::WriteCallResponse> done = writes_.Call(*request);
    if (!done.ok()) return rpc::ToGrpcStatus(done.status());
    *response = std::move(*done);
    return grpc::Status::OK;
  }

 private:
  // The reactor of one ReadBlock call: sends its messages in order, then finishes.
  class BlockWriter final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
   public:
    void Finish(Result<std::vector<grpc::ByteBuffer>> reply) {
      if (!reply.ok()) {
        ServerWriteReactor::Finish(rpc::ToGrpcStatus(reply.status()));
        return;
      }
      messages_ = std::move(*reply);
      WriteNext();
    }
    void OnWriteDone(bool ok) override {
      if (!ok) {  // the client went away
        ServerWriteReactor::Finish(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
        return;
      }
      WriteNext();
    }
    void OnDone() override { delete this; }
    void Refuse(const grpc::Status& status) { ServerWriteReactor::Finish(status); }

   private:
    void WriteNext() {
      if (next_ == messages_.size()) {
        ServerWriteReactor::Finish(grpc::Status::OK);  // also an empty range
      } else if (next_ + 1 == messages_.size()) {
        StartWriteAndFinish(&messages_[next_++], grpc::WriteOptions(), grpc::Status::OK);
      } else {
        StartWrite(&messages_[next_++]);
      }
    }

    std::vector<grpc::ByteBuffer> messages_;  // alive until OnDone
    size_t next_ = 0;
  };

  // The serialized ReadBlockChunk messages answering a raw request (none for an empty range).
  Result<std::vector<grpc::ByteBuffer>> Serve(grpc::ByteBuffer* raw) {
    rpc::ReadBlockRequest request;
    if (!grpc::SerializationTraits<rpc::ReadBlockRequest>::Deserialize(raw, &request).ok()) {
      return Status::InvalidArgument("malformed ReadBlock request");
    }
    LC_ASSIGN_OR_RETURN(BlockReader::Range range,
                        reader_->Read(request.block(), request.offset(), request.length()));
    std::vector<grpc::ByteBuffer> messages;
    for (uint64_t done = 0; done < range.length; done += kChunkBytes) {
      messages.push_back(rpc::ChunkMessage(range.owner, range.data + done,
                                           std::min<uint64_t>(kChunkBytes, range.length - done)));
    }
    return messages;
  }

  static constexpr security::RoleSet kClient = security::Roles(security::Role::kClient);
  static constexpr security::RoleSet kMaster = security::Roles(security::Role::kMaster);
  static constexpr security::RoleSet kMasterOrAdmin =
      security::Roles(security::Role::kMaster, security::Role::kAdmin);
  // Prefetch: the master's loads, and a mount's order hint (a mount may read any block anyway).
  static constexpr security::RoleSet kMasterOrClient =
      security::Roles(security::Role::kMaster, security::Role::kClient);

  grpc::Status Allow(const grpc::ServerContextBase* ctx, security::RoleSet roles,
                     std::string_view method) const {
    return security::Authorize(authorizer_.get(), ctx, roles, method);
  }

 public:
  std::shared_ptr<const security::Authorizer> authorizer_;  // null: no checks (set before serving)

 private:
  ObjectWrites writes_;  // first: Service's initializer list builds it first
  std::shared_ptr<BlockStore> blocks_;
  BlockReader* reader_;
  ThreadPool* pool_;
  ThreadPool* read_pool_;
  StoreSink sink_;
  std::function<void(rpc::WorkerInfo*)> fill_info_;
  std::function<void(rpc::WorkerStats*)> fill_shm_;
  std::atomic<uint64_t> blocks_located_{0};
};

Result<std::unique_ptr<WorkerServer>> WorkerServer::Start(const Config& config,
                                                          const WorkerOptions& options) {
  LC_RETURN_IF_ERROR(ParseMasterList("--master", options.master).status());
  if (!options.advertise.empty()) {
    LC_RETURN_IF_ERROR(rpc::CheckAdvertiseAddress("advertise address", options.advertise, true));
  }
  std::unique_ptr<WorkerServer> w(new WorkerServer());
  w->config_ = config;
  w->options_ = options;
  w->start_time_ms_ = NowMs();
  if (options.shared_memory) {
    ShmArenaOptions shm;
    shm.capacity_bytes = config.cache.memory_capacity;
    Result<std::shared_ptr<ShmArena>> arena = ShmArena::Create(shm);
    if (!arena.ok()) return arena.status().WithContext("shared memory for the memory tier");
    w->arena_ = std::move(*arena);
  }
  auto blocks = BlockStore::Open(config.cache, nullptr, w->arena_);
  if (!blocks.ok()) return blocks.status();
  w->blocks_ = std::move(*blocks);
  LC_ASSIGN_OR_RETURN(
      w->identity_,
      LoadOrCreateWorkerIdentity(
          config.cache.disks.empty() ? std::string() : config.cache.disks.front().path,
          &w->temp_dir_));
  w->id_ = w->identity_.id;
  if (!options.credentials.empty()) {
    LC_ASSIGN_OR_RETURN(w->credentials_,
                        security::ClusterCredentials::Open(
                            options.credentials, security::Role::kWorker, "lakecache worker"));
    w->authorizer_ = security::Authorizer::Pushed();
    if (!w->KeptCertificateUsable() || !w->LoadDigests()) {
      // A master that is still starting gets a while; a refusal (a wrong token) fails at once.
      LC_RETURN_IF_ERROR(
          w->ObtainCertificate(std::chrono::system_clock::now() + options.bootstrap_wait));
    }
  }
  LC_ASSIGN_OR_RETURN(w->namespaces_, NamespaceTable::Open(config, options.store, options.probe));
  if (w->arena_ != nullptr) {
    std::string path = options.node_socket.empty() ? "/tmp/lakecache-node-" + w->id_ + ".sock"
                                                   : options.node_socket;
    std::vector<uid_t> uids = options.shm_uids;
    if (uids.empty()) uids.push_back(::getuid());
    LC_ASSIGN_OR_RETURN(std::unique_ptr<NodeServer> node,
                        NodeServer::Start(w->arena_, path, std::move(uids)));
    w->node_path_ = node->path();
    MutexLock lock(&w->node_mu_);
    w->node_ = std::move(node);
  }
  w->prefetch_pool_ = std::make_unique<ThreadPool>(kPrefetchThreads);
  w->read_pool_ = std::make_unique<ThreadPool>(kReadThreads);
  w->load_pool_ = std::make_unique<ThreadPool>(kLoadThreads);
  WorkerServer* self = w.get();
  w->reader_ = std::make_unique<BlockReader>(w->namespaces_.get(), w->blocks_);
  w->service_ = std::make_unique<Service>(
      w->namespaces_.get(), w->blocks_, w->reader_.get(), w->prefetch_pool_.get(),
      w->read_pool_.get(), w->load_pool_.get(),
      [self](rpc::WorkerInfo* info) { self->FillInfo(info); },
      [self](rpc::WorkerStats* stats) {
        if (self->arena_ == nullptr) return;
        ShmArenaStats s = self->arena_->Stats();
        stats->set_shm_sessions(s.sessions);
        stats->set_shm_published_bytes(s.published_bytes);
        stats->set_shm_deferred_bytes(s.deferred_bytes);
        stats->set_shm_publish_failures(s.publish_failures);
        MutexLock lock(&self->node_mu_);
        if (self->node_ != nullptr) stats->set_shm_refused(self->node_->peers_refused());
      },
      config.client.write_budget);
  if (!options.data_listen.empty()) {
    LC_RETURN_IF_ERROR(rpc::CheckListenAddress("--data-listen", options.data_listen));
  }
  BulkServerOptions bulk;
  if (options.metrics != nullptr) {
    bulk.request_duration = options.metrics->GetHistogram(
        "lakecache_worker_rpc_duration_seconds", rpc::kRpcDurationHelp, {{"method", "BulkRead"}});
  }
  bulk.listen = options.data_listen.empty()
                    ? options.listen.substr(0, options.listen.rfind(':')) + ":0"
                    : options.data_listen;
  std::shared_ptr<grpc::ServerCredentials> tls;
  if (w->credentials_ != nullptr) {
    LC_ASSIGN_OR_RETURN(bulk.tls,
                        rpc::TlsContext::Server(w->identity_.key_path, w->identity_.cert_path));
    bulk.authorizer = w->authorizer_;
    w->service_->authorizer_ = w->authorizer_;
    tls = security::ServerTls(w->identity_.key_path, w->identity_.cert_path,
                              w->credentials_->ca_path(),
                              /*verify_clients=*/false);
  }
  LC_ASSIGN_OR_RETURN(w->bulk_, BulkServer::Start(bulk, w->reader_.get()));
  // The bulk path is announced on the advertised host, with its own bound port.
  std::string data_advertise =
      options.advertise.empty() ? "" : rpc::HostOf(options.advertise) + ":0";
  w->data_address_ =
      rpc::AdvertisedAddress(data_advertise, w->bulk_->address(), Advertised(w->bulk_->address()));
  {
    MutexLock lock(&self->address_mu_);
    LC_ASSIGN_OR_RETURN(
        rpc::StartedServer started,
        rpc::StartServer(options.listen, {self->service_.get()}, tls,
                         {options.metrics, "lakecache_worker_rpc_duration_seconds"}));
    self->server_ = std::move(started.server);
    self->address_ =
        rpc::AdvertisedAddress(options.advertise, started.address, Advertised(started.address));
  }
  if (!options.health_socket.empty()) {
    LC_ASSIGN_OR_RETURN(w->health_, rpc::ServeHealth(options.health_socket, "the worker",
                                                     [self] { return self->Health(); }));
  }
  if (options.metrics != nullptr) {
    w->metrics_ = options.metrics->AddCollector([self](metrics::Sink& sink) {
      rpc::WorkerStats stats;
      self->service_->FillStats(&stats);
      rpc::AddStatsMetrics(stats, /*worker=*/true, sink);
    });
  }
  w->heartbeat_ = std::thread([self] { self->HeartbeatLoop(); });
  spdlog::info("worker {} serving on {}, data on {} ({}; {} namespaces), master {}", w->id_,
               w->address(), w->data_address_,
               w->credentials_ != nullptr ? "TLS, role tokens checked" : "plain text",
               w->namespaces_->names().size(), options.master);
  return w;
}

std::string WorkerServer::address() const {
  MutexLock lock(&address_mu_);
  return address_;
}

std::string WorkerServer::data_address() const { return data_address_; }

WorkerServer::~WorkerServer() {
  Shutdown();
  std::error_code ec;
  if (!temp_dir_.empty()) std::filesystem::remove_all(temp_dir_, ec);
}

rpc::HealthState WorkerServer::Health() const {
  std::string worker = "worker " + id_;
  std::string master;
  {
    MutexLock lock(&mu_);
    master = master_;
  }
  if (!registered_) {
    return {false, worker + " is not registered with " +
                       (master.empty() ? "master " + options_.master : "master " + master)};
  }
  int64_t silent = SteadyNowMs() - last_answer_ms_.load();
  int64_t interval = interval_ms_.load();
  if (silent > rpc::kSilentIntervals * interval) {
    return {false, worker + ": master " + master + " has not answered for " +
                       std::to_string(silent / 1000) + " s"};
  }
  return {true, worker + " registered with master " + master};
}

void WorkerServer::Shutdown() {
  metrics_.Reset();  // no scrape reads what is stopped below
  {
    MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  if (health_ != nullptr) health_->Shutdown();  // a probe sees it go at once
  stop_cv_.SignalAll();
  if (heartbeat_.joinable()) heartbeat_.join();
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server_->Wait();  // every handler has returned: none reads what is torn down below
  }
  if (bulk_ != nullptr) bulk_->Shutdown();  // requests in flight fail: clients read elsewhere
  prefetch_pool_.reset();                   // finishes queued prefetches
  read_pool_.reset();  // every ReadBlock has finished with the server (Shutdown waited)
  load_pool_.reset();
  // Last: nothing publishes any more, so no memory a mount still reads is reused. Mounts then let
  // go of the shared memory and read over the network.
  {
    MutexLock lock(&node_mu_);
    node_.reset();
  }
  if (blocks_ != nullptr) blocks_->Flush();
}

void WorkerServer::FillInfo(rpc::WorkerInfo* info) const {
  info->set_id(id_);
  info->set_address(address());
  uint64_t capacity = 0, used = 0;
  for (const TierStats& t : blocks_->Stats().tiers) {
    capacity += t.capacity_bytes;
    used += t.used_bytes;
  }
  info->set_capacity_bytes(capacity);
  info->set_used_bytes(used);
  info->set_start_time_ms(start_time_ms_);
  info->set_host_id(rpc::HostId());
  if (!node_path_.empty()) info->set_node_socket(node_path_);
  info->set_data_address(data_address_);
  info->set_insecure(options_.insecure);
}

void WorkerServer::HeartbeatLoop() {
  // With credentials the worker shows the master its own certificate: the proof of its id. Any
  // master takes registrations and heartbeats (with etcd they all share the membership): the
  // worker keeps to one until it stops answering, then moves to the next.
  MasterSet masters(MasterList(), [this](const std::string& address) {
    return credentials_ == nullptr ? rpc::OpenChannel(address)
                                   : credentials_->Channel(address, security::kMasterTlsName,
                                                           identity_.key_path, identity_.cert_path);
  });
  auto interval =
      std::chrono::duration_cast<std::chrono::milliseconds>(config_.cluster.heartbeat_interval);
  bool warned = false;  // one warning per stretch of failures
  interval_ms_ = interval.count();
  for (;;) {
    grpc::Status status;
    MasterSet::Master master = masters.Current();
    auto stub = rpc::MasterService::NewStub(master.channel);
    grpc::ClientContext ctx;
    if (!registered_) {
      rpc::RegisterRequest req;
      rpc::RegisterResponse resp;
      FillInfo(req.mutable_worker());
      // Longer than a heartbeat: with etcd a registration writes the worker's record under a new
      // lease, several calls to etcd.
      WaitForMaster(&ctx, std::max<std::chrono::milliseconds>(interval, std::chrono::seconds(5)));
      status = stub->Register(&ctx, req, &resp);
      if (status.ok()) {
        if (authorizer_ != nullptr) {
          authorizer_->Update(resp.tokens());
          SaveDigests(resp.tokens());
        }
        last_answer_ms_ = SteadyNowMs();  // before registered_: Health never sees a silent master
        registered_ = true;
        if (resp.heartbeat_interval_ms() > 0) {
          interval = std::chrono::milliseconds(resp.heartbeat_interval_ms());
          interval_ms_ = interval.count();
        }
        spdlog::info("worker {} registered with master {} (epoch {})", id_, master.address,
                     resp.epoch());
      }
    } else {
      rpc::HeartbeatRequest req;
      rpc::HeartbeatResponse resp;
      FillInfo(req.mutable_worker());
      WaitForMaster(&ctx, interval);
      status = stub->Heartbeat(&ctx, req, &resp);
      if (status.ok() && authorizer_ != nullptr) authorizer_->Update(resp.tokens());
      if (status.ok() && !resp.registered()) {
        registered_ = false;  // the master restarted or dropped us: register again at once
        spdlog::info("master {} does not know worker {}: registering again", master.address, id_);
        continue;
      }
    }
    if (status.ok()) {
      last_answer_ms_ = SteadyNowMs();
      MutexLock lock(&mu_);
      master_ = master.address;
    }
    bool other = !status.ok() && masters.Failed(master, status, ctx) &&
                 masters.Current().address != master.address;
    if (!status.ok() && !warned) {
      spdlog::warn("master {} unreachable: {} ({})", master.address, status.error_message(),
                   other ? "trying master " + masters.Current().address
                         : "retrying every " + std::to_string(interval.count()) + " ms");
      warned = true;
    } else if (status.ok() && warned) {
      spdlog::info("master {} reachable again", master.address);
      warned = false;
    }
    if (credentials_ != nullptr && std::chrono::system_clock::now() >= renew_at_) {
      Status renewed = ObtainCertificate(std::chrono::system_clock::now() + interval);
      if (!renewed.ok())
        spdlog::warn("{} (retrying every {} ms)", renewed.message(), interval.count());
    }
    // A call that waited its whole interval for the master has done this round's waiting; another
    // master is asked at once.
    bool waited = status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED || other;
    auto until = std::chrono::steady_clock::now() + (waited ? Duration::zero() : interval);
    MutexLock lock(&mu_);
    while (!stopping_ && stop_cv_.WaitUntil(&mu_, until)) continue;
    if (stopping_) return;
  }
}

}  // namespace lakecache
