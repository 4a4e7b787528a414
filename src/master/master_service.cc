#include "master/master_service.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "master/client_table.h"
#include "master/worker_registry.h"
#include "membership/etcd_membership.h"
#include "meta/listing_index.h"
#include "rpc/grpc_util.h"
#include "security/x509.h"

namespace lakecache {
namespace {

grpc::Status InvalidArgument(const std::string& message) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message);
}

void FillEntry(const std::string& key, const DirEntry& entry, rpc::ObjectEntry* out) {
  out->set_key(key);
  out->set_size(entry.size);
  out->set_etag(entry.etag);
  out->set_mtime(entry.mtime);
}

}  // namespace

void MasterServiceImpl::Serving(const std::string& address) {
  MutexLock lock(&address_mu_);
  address_ = address;
}

grpc::Status MasterServiceImpl::Register(grpc::ServerContext* ctx, const rpc::RegisterRequest* req,
                                         rpc::RegisterResponse* resp) {
  rpc::WorkerInfo worker = req->worker();
  if (grpc::Status denied = CheckWorker(ctx, "MasterService/Register", &worker); !denied.ok()) {
    return denied;
  }
  if (worker.id().empty() || worker.address().empty()) {
    return InvalidArgument("Register: the worker needs an id and an address");
  }
  if (deps_.membership != nullptr) {
    Result<uint64_t> epoch = deps_.membership->Register(worker);
    if (!epoch.ok()) return rpc::ToGrpcStatus(epoch.status());
    resp->set_epoch(*epoch);
  } else {
    resp->set_epoch(deps_.registry->Register(worker));
  }
  resp->set_heartbeat_interval_ms(
      static_cast<uint32_t>(deps_.registry->heartbeat_interval().count()));
  if (deps_.authorizer != nullptr) deps_.authorizer->FillDigests(resp->mutable_tokens());
  return grpc::Status::OK;
}

grpc::Status MasterServiceImpl::Heartbeat(grpc::ServerContext* ctx,
                                          const rpc::HeartbeatRequest* req,
                                          rpc::HeartbeatResponse* resp) {
  rpc::WorkerInfo worker = req->worker();
  if (grpc::Status denied = CheckWorker(ctx, "MasterService/Heartbeat", &worker); !denied.ok()) {
    return denied;
  }
  std::optional<uint64_t> epoch;
  if (deps_.membership != nullptr) {
    Result<std::optional<uint64_t>> beat = deps_.membership->Heartbeat(worker);
    if (!beat.ok()) return rpc::ToGrpcStatus(beat.status());
    epoch = *beat;
  } else {
    epoch = deps_.registry->Heartbeat(worker);
  }
  resp->set_registered(epoch.has_value());
  resp->set_epoch(epoch ? *epoch : deps_.registry->View().epoch());
  if (deps_.authorizer != nullptr) deps_.authorizer->FillDigests(resp->mutable_tokens());
  return grpc::Status::OK;
}

// A worker's own certificate, for the key whose request it sends: named after that key, so a
// worker can be given no id but its own.
grpc::Status MasterServiceImpl::IssueCertificate(grpc::ServerContext* ctx,
                                                 const rpc::CertificateRequest* req,
                                                 rpc::CertificateResponse* resp) {
  if (grpc::Status denied =
          Allow(ctx, security::Roles(security::Role::kWorker), "MasterService/IssueCertificate");
      !denied.ok()) {
    return denied;
  }
  if (deps_.credentials_dir.empty()) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "IssueCertificate: this master runs without credentials and issues no "
                        "certificates");
  }
  Result<std::string> fingerprint = security::CsrFingerprint(req->csr_pem());
  if (!fingerprint.ok()) return rpc::ToGrpcStatus(fingerprint.status());
  std::string id = security::WorkerIdFromFingerprint(*fingerprint);
  security::CertificateAuthority ca;
  for (auto [name, out] : {std::pair{"ca.crt", &ca.cert_pem}, std::pair{"ca.key", &ca.key_pem}}) {
    std::ifstream in(deps_.credentials_dir + "/" + name);
    std::stringstream text;
    text << in.rdbuf();
    if (!in || text.str().empty()) {
      return grpc::Status(
          grpc::StatusCode::FAILED_PRECONDITION,
          std::string("IssueCertificate: the master's credentials folder has no ") + name);
    }
    *out = text.str();
  }
  auto validity =
      std::chrono::duration_cast<std::chrono::seconds>(deps_.cluster->worker_certificate_validity);
  Result<std::string> cert =
      security::SignCsr(ca, req->csr_pem(), {security::WorkerTlsName(id)}, validity);
  if (!cert.ok()) return rpc::ToGrpcStatus(cert.status());
  resp->set_worker_id(id);
  resp->set_certificate_pem(*cert);
  deps_.authorizer->FillDigests(resp->mutable_tokens());
  resp->set_not_after_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                             (std::chrono::system_clock::now() + validity).time_since_epoch())
                             .count());
  spdlog::info("issued worker {} a certificate for {}, valid {}", id, security::WorkerTlsName(id),
               FormatDuration(deps_.cluster->worker_certificate_validity));
  return grpc::Status::OK;
}

grpc::Status MasterServiceImpl::GetClusterView(grpc::ServerContext* ctx,
                                               const rpc::ClusterViewRequest* req,
                                               rpc::ClusterView* resp) {
  // Workers too: the view names their peers, from whom they get the replicas they keep.
  if (grpc::Status denied = Allow(ctx, kReaders | security::Roles(security::Role::kWorker),
                                  "MasterService/GetClusterView");
      !denied.ok()) {
    return denied;
  }
  if (req->has_client()) deps_.clients->Note(req->client());
  *resp = deps_.registry->View();
  resp->set_insecure(deps_.insecure);
  if (deps_.membership != nullptr) {
    resp->set_etcd(true);
    resp->set_stale(deps_.membership->stale());
    if (deps_.leader) resp->set_leader(deps_.leader());
    resp->set_election_ttl_ms(deps_.election_ttl_ms);
  }
  MutexLock lock(&address_mu_);
  resp->set_address(address_);
  return grpc::Status::OK;
}

grpc::Status MasterServiceImpl::GetNamespaces(grpc::ServerContext* ctx,
                                              const rpc::NamespacesRequest*,
                                              rpc::NamespacesResponse* resp) {
  if (grpc::Status denied = Allow(ctx, kReaders, "MasterService/GetNamespaces"); !denied.ok()) {
    return denied;
  }
  for (const std::string& name : deps_.namespaces->names()) {
    const Namespace& ns = *deps_.namespaces->Find(name);
    rpc::NamespaceInfo* info = resp->add_namespaces();
    info->set_name(name);
    info->set_uri(ns.config.uri);
    info->set_block_size(ns.config.block_size);
    info->set_metadata_ttl_ms(ns.config.metadata_ttl.count());
    info->set_immutable(ns.config.immutable);
    info->set_key_prefix(ns.prefix);
    info->set_read_only(!ns.config.write);
    info->set_allow_overwrite(ns.config.allow_overwrite);
    info->set_allow_delete(ns.config.allow_delete);
  }
  return grpc::Status::OK;
}

// A mount's write through a worker: the folder's cached listing shows it now, so every mount
// that lists the folder next sees it (theirs revalidate with their TTL).
grpc::Status MasterServiceImpl::NoteWrite(grpc::ServerContext* ctx,
                                          const rpc::NoteWriteRequest* req,
                                          rpc::NoteWriteResponse*) {
  if (grpc::Status denied =
          Allow(ctx, security::Roles(security::Role::kClient), "MasterService/NoteWrite");
      !denied.ok()) {
    return denied;
  }
  if (grpc::Status elsewhere = LeaderOnly(ctx); !elsewhere.ok()) return elsewhere;
  std::string path = req->path();
  bool folder = path.ends_with('/');
  if (folder) path.pop_back();
  Result<Namespace*> found = Find(req->ns(), "NoteWrite: path", path);
  if (!found.ok()) return rpc::ToGrpcStatus(found.status());
  if (path.empty()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "an empty path");
  const NamespaceConfig& nsc = (*found)->config;
  if (!nsc.write || (req->removed() && !folder && !nsc.allow_delete)) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "namespace '" + req->ns() + "' does not allow that change");
  }
  auto [dir, name] = SplitParent(path);
  if (req->removed()) {
    (*found)->meta->NoteRemoved(dir, name);
  } else {
    const rpc::ObjectEntry& e = req->entry();
    (*found)->meta->NoteEntry(
        dir, DirEntry{name, folder, folder ? 0 : e.size(), folder ? "" : e.etag(), e.mtime()});
  }
  return grpc::Status::OK;
}

grpc::Status MasterServiceImpl::ListDir(grpc::ServerContext* ctx, const rpc::ListDirRequest* req,
                                        rpc::ListDirResponse* resp) {
  if (grpc::Status denied = Allow(ctx, kReaders, "MasterService/ListDir"); !denied.ok()) {
    return denied;
  }
  if (grpc::Status elsewhere = LeaderOnly(ctx); !elsewhere.ok()) return elsewhere;
  const std::string& dir = req->dir();
  Result<Namespace*> found = Find(req->ns(), "ListDir: dir", dir);
  if (!found.ok()) return rpc::ToGrpcStatus(found.status());
  Namespace* ns = *found;
  if (req->revalidate()) ns->meta->ExpireFolder(dir);
  auto listing = ns->meta->List(dir);
  if (!listing.ok()) return rpc::ToGrpcStatus(listing.status());
  std::string base = dir.empty() ? "" : dir + "/";
  const DirListing& all = **listing;
  size_t begin = req->start_after().empty() ? 0 : all.IndexAfter(req->start_after());
  size_t end = req->max_entries() == 0 ? all.size()
                                       : std::min<size_t>(all.size(), begin + req->max_entries());
  if (end < all.size()) resp->set_next_start_after(std::string(all.name_at(end - 1)));
  if (req->packed()) {
    resp->set_packed(ListingIndex::Encode(IndexedListing{*listing, {}, false, false}, begin, end));
    resp->set_packed_prefix(ns->meta->ObjectKey(base));
  } else {
    for (size_t i = begin; i < end; ++i) {
      const DirEntry entry = all.at(i);
      std::string key = ns->meta->ObjectKey(base + entry.name);
      if (entry.is_dir) {
        resp->add_dirs(key + "/");
      } else {
        FillEntry(key, entry, resp->add_files());
      }
    }
  }
  resp->set_exists((*listing)->exists());
  return grpc::Status::OK;
}

grpc::Status MasterServiceImpl::Stat(grpc::ServerContext* ctx, const rpc::StatRequest* req,
                                     rpc::StatResponse* resp) {
  if (grpc::Status denied = Allow(ctx, kReaders, "MasterService/Stat"); !denied.ok()) {
    return denied;
  }
  if (grpc::Status elsewhere = LeaderOnly(ctx); !elsewhere.ok()) return elsewhere;
  const std::string& path = req->path();
  Result<Namespace*> found = Find(req->ns(), "Stat: path", path);
  if (!found.ok()) return rpc::ToGrpcStatus(found.status());
  if (path.empty()) return InvalidArgument("Stat: empty path (ListDir lists the root)");
  Namespace* ns = *found;
  auto entry = ns->meta->Stat(path);
  if (!entry.ok()) return rpc::ToGrpcStatus(entry.status());
  // A folder's key is its prefix, as in ListDir's `dirs`.
  FillEntry(ns->meta->ObjectKey(path) + (entry->is_dir ? "/" : ""), *entry, resp->mutable_entry());
  resp->set_is_dir(entry->is_dir);
  return grpc::Status::OK;
}

// The namespace a request names, its path (`what`) checked.
Result<Namespace*> MasterServiceImpl::Find(const std::string& name, std::string_view what,
                                           const std::string& path) const {
  LC_ASSIGN_OR_RETURN(Namespace * ns, deps_.namespaces->Get(name));
  LC_RETURN_IF_ERROR(CheckRelativePath(what, path));
  return ns;
}

grpc::Status MasterServiceImpl::LeaderOnly(grpc::ServerContext* ctx) const {
  return deps_.leader_only ? deps_.leader_only(ctx) : grpc::Status::OK;
}

grpc::Status MasterServiceImpl::Allow(const grpc::ServerContext* ctx, security::RoleSet roles,
                                      std::string_view method) const {
  return security::Authorize(deps_.authorizer, ctx, roles, method);
}

// A worker's Register or Heartbeat: the worker role's token, over a connection whose client
// certificate is the one the master issued for this id; a claimed capacity above the bound is
// cut to it.
grpc::Status MasterServiceImpl::CheckWorker(const grpc::ServerContext* ctx, std::string_view method,
                                            rpc::WorkerInfo* worker) const {
  if (grpc::Status denied = Allow(ctx, security::Roles(security::Role::kWorker), method);
      !denied.ok()) {
    return denied;
  }
  if (deps_.authorizer != nullptr &&
      !security::PeerCertificateNames(ctx, security::WorkerTlsName(worker->id()))) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        std::string(method) + ": worker id '" + worker->id() +
                            "' is not the id of the certificate this worker presented (a "
                            "worker registers only under the id of its own key)");
  }
  if (worker->capacity_bytes() > deps_.cluster->max_worker_capacity) {
    if (method.ends_with("Register")) {
      spdlog::warn("worker {} claims {} of cache; counted as {} (cluster.max_worker_capacity)",
                   worker->id(), FormatByteSize(worker->capacity_bytes()),
                   FormatByteSize(deps_.cluster->max_worker_capacity));
    }
    worker->set_capacity_bytes(deps_.cluster->max_worker_capacity);
  }
  return grpc::Status::OK;
}
}  // namespace lakecache
