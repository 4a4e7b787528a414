#include "cluster_client/grpc_master_client.h"

#include <algorithm>

#include "master_client/master_set.h"
#include "meta/listing_index.h"
#include "rpc/lakecache.grpc.pb.h"

namespace lakecache {
namespace {

ObjectInfo ToObjectInfo(const rpc::ObjectEntry& e) {
  ObjectInfo info;
  info.key = e.key();
  info.size = e.size();
  info.etag = e.etag();
  info.mtime = e.mtime();
  return info;
}

// A page the master sent packed (rpc ListDirResponse.packed) as files and folders, their keys
// `prefix` and the entry's name.
Status Unpack(const std::string& packed, const std::string& prefix, ClusterListing* out) {
  std::optional<IndexedListing> page = ListingIndex::Decode(packed);
  if (!page) return Status::Internal("ListDir: the master sent a packed page that does not decode");
  const DirListing& entries = *page->listing;
  for (size_t i = 0; i < entries.size(); ++i) {
    std::string key = prefix;
    key += entries.name_at(i);
    if (entries.is_dir_at(i)) {
      out->dirs.push_back(std::move(key) + "/");
      continue;
    }
    ObjectInfo& info = out->files.emplace_back();
    info.key = std::move(key);
    info.size = entries.size_at(i);
    info.mtime = entries.mtime_at(i);
    const uint8_t* md5;
    std::string_view etag = entries.etag_at(i, &md5);
    info.etag = md5 != nullptr ? UnpackMd5Etag(md5) : std::string(etag);
  }
  return Status::Ok();
}

ClusterNamespace ToNamespace(const rpc::NamespaceInfo& n) {
  ClusterNamespace ns;
  ns.name = n.name();
  ns.uri = n.uri();
  ns.block_size = n.block_size();
  ns.metadata_ttl = std::chrono::milliseconds(n.metadata_ttl_ms());
  ns.immutable = n.immutable();
  ns.key_prefix = n.key_prefix();
  ns.read_only = n.read_only();
  ns.allow_overwrite = n.allow_overwrite();
  ns.allow_delete = n.allow_delete();
  return ns;
}

Status Unreachable(const MasterSet& masters, const ClusterClientOptions& options) {
  return Status::Unavailable(
      "cannot reach the " + masters.Describe() + " within " +
      FormatDuration(options.connect_timeout) +
      (options.credentials == nullptr
           ? " (is `lakecache master` running there? A master with credentials needs "
             "--credentials DIR or LAKECACHE_CREDENTIALS)"
           : " (is `lakecache master` running there, with credentials of the same CA as " +
                 options.credentials->dir() + "?)"));
}

}  // namespace

GrpcMasterClient::GrpcMasterClient(std::unique_ptr<MasterSet> masters,
                                   std::chrono::milliseconds rpc_timeout)
    : masters_(std::move(masters)), rpc_timeout_(rpc_timeout) {}

GrpcMasterClient::~GrpcMasterClient() = default;

Result<std::unique_ptr<GrpcMasterClient>> GrpcMasterClient::Connect(
    const std::string& masters, const ClusterClientOptions& options) {
  LC_ASSIGN_OR_RETURN(std::vector<std::string> addresses, ParseMasterList("--master", masters));
  auto set = std::make_unique<MasterSet>(
      std::move(addresses),
      [credentials = options.credentials](const std::string& address) {
        return security::MasterChannel(address, credentials.get());
      },
      options.credentials != nullptr ? rpc::Transport::kTls : rpc::Transport::kPlainText);
  Status connected = set->WaitForAny(std::chrono::system_clock::now() + options.connect_timeout);
  if (connected.code() == StatusCode::kInvalidArgument) return connected;  // says what to pass
  if (!connected.ok()) return Unreachable(*set, options);
  return std::unique_ptr<GrpcMasterClient>(
      new GrpcMasterClient(std::move(set), options.rpc_timeout));
}

std::chrono::milliseconds GrpcMasterClient::QuickAttempt() const {
  if (masters_->addresses().size() == 1) return rpc_timeout_;
  return std::min<std::chrono::milliseconds>(rpc_timeout_, std::chrono::seconds(3));
}

template <typename Call>
Status GrpcMasterClient::OnLeader(const Call& call, std::chrono::milliseconds attempt,
                                  Clock::time_point deadline) {
  auto now = std::chrono::system_clock::now();
  auto until = now + attempt + 2 * std::chrono::milliseconds(election_ttl_ms_.load());
  if (deadline != Clock::time_point::max()) {
    until = now + std::chrono::duration_cast<std::chrono::system_clock::duration>(
                      std::max<Clock::duration>(deadline - Clock::now(), Clock::duration::zero()));
  }
  return masters_->Call(
      [&](const MasterSet::Master& m, grpc::ClientContext* ctx) {
        return call(*rpc::MasterService::NewStub(m.channel), ctx);
      },
      attempt, until);
}

Result<std::vector<ClusterNamespace>> GrpcMasterClient::Namespaces() {
  rpc::NamespacesResponse namespaces;
  LC_RETURN_IF_ERROR(masters_->Call(
      [&](const MasterSet::Master& m, grpc::ClientContext* ctx) {
        return rpc::MasterService::NewStub(m.channel)->GetNamespaces(ctx, rpc::NamespacesRequest(),
                                                                     &namespaces);
      },
      QuickAttempt(), std::chrono::system_clock::now() + rpc_timeout_));
  std::vector<ClusterNamespace> out;
  for (const rpc::NamespaceInfo& n : namespaces.namespaces()) out.push_back(ToNamespace(n));
  return out;
}

Result<rpc::ClusterView> GrpcMasterClient::View(const rpc::ClusterViewRequest& request) {
  rpc::ClusterView got;
  LC_RETURN_IF_ERROR(masters_->Call(
      [&](const MasterSet::Master& m, grpc::ClientContext* ctx) {
        return rpc::MasterService::NewStub(m.channel)->GetClusterView(ctx, request, &got);
      },
      QuickAttempt(), std::chrono::system_clock::now() + rpc_timeout_));
  if (got.etcd()) {
    masters_->NoteLeader(got.leader());
    election_ttl_ms_ = got.election_ttl_ms();
  }
  return got;
}

Result<ClusterListing> GrpcMasterClient::ListDir(const std::string& ns, const std::string& dir,
                                                 const ListDirPage& page,
                                                 Clock::time_point deadline, bool revalidate) {
  rpc::ListDirRequest req;
  req.set_ns(ns);
  req.set_dir(dir);
  req.set_revalidate(revalidate);
  req.set_start_after(page.start_after);
  req.set_max_entries(page.max_entries);
  req.set_packed(true);
  rpc::ListDirResponse resp;
  LC_RETURN_IF_ERROR(
      OnLeader([&](rpc::MasterService::Stub& stub,
                   grpc::ClientContext* ctx) { return stub.ListDir(ctx, req, &resp); },
               rpc_timeout_, deadline));
  ClusterListing listing;
  if (!resp.packed().empty()) {
    LC_RETURN_IF_ERROR(Unpack(resp.packed(), resp.packed_prefix(), &listing));
  } else {  // a master from before packed pages
    for (const rpc::ObjectEntry& e : resp.files()) listing.files.push_back(ToObjectInfo(e));
    listing.dirs.assign(resp.dirs().begin(), resp.dirs().end());
  }
  listing.exists = resp.exists();
  listing.next_start_after = resp.next_start_after();
  return listing;
}

Result<ClusterStat> GrpcMasterClient::Stat(const std::string& ns, const std::string& path,
                                           Clock::time_point deadline) {
  rpc::StatRequest req;
  req.set_ns(ns);
  req.set_path(path);
  rpc::StatResponse resp;
  LC_RETURN_IF_ERROR(OnLeader([&](rpc::MasterService::Stub& stub,
                                  grpc::ClientContext* ctx) { return stub.Stat(ctx, req, &resp); },
                              rpc_timeout_, deadline));
  return ClusterStat{ToObjectInfo(resp.entry()), resp.is_dir()};
}

Status GrpcMasterClient::NoteWrite(const rpc::NoteWriteRequest& request,
                                   Clock::time_point deadline) {
  rpc::NoteWriteResponse response;
  return OnLeader([&](rpc::MasterService::Stub& stub,
                      grpc::ClientContext* ctx) { return stub.NoteWrite(ctx, request, &response); },
                  QuickAttempt(), deadline);
}

}  // namespace lakecache
