#include "meta/namespace_table.h"

#include "common/credentials.h"

namespace lakecache {
namespace {

Status Probe(Namespace& ns) {
  ListRequest req;
  req.prefix = ns.prefix;
  req.delimiter = "/";
  req.max_keys = 1;
  auto page = ns.store->List(req, IoOptions::WithTimeout(std::chrono::seconds(60)));
  if (!page.ok()) return page.status().WithContext("namespace '" + ns.name + "'");
  return Status::Ok();
}

}  // namespace

std::string NormalizePrefix(const std::string& key) {
  std::string prefix = key;
  while (prefix.starts_with('/')) prefix.erase(0, 1);
  if (!prefix.empty() && !prefix.ends_with('/')) prefix.push_back('/');
  return prefix;
}

Result<std::unique_ptr<NamespaceTable>> NamespaceTable::Open(const Config& config,
                                                             const StoreOptions& options,
                                                             bool probe) {
  auto table = std::make_unique<NamespaceTable>();
  for (const auto& [name, nsc] : config.namespaces) {
    auto ns = std::make_unique<Namespace>();
    ns->name = name;
    ns->config = nsc;
    // A local store is rooted at the namespace's folder; an object store at the bucket.
    ns->prefix = nsc.location.scheme == UriScheme::kFile ? "" : NormalizePrefix(nsc.location.key);
    auto creds = ResolveCredentials(nsc);
    if (!creds.ok()) return creds.status().WithContext("namespace '" + name + "'");
    auto store = OpenObjectStore(nsc, *creds, options);
    if (!store.ok()) return store.status().WithContext("namespace '" + name + "'");
    ns->store = *store;
    MetadataCacheOptions meta_options;
    meta_options.ttl = nsc.metadata_ttl;
    meta_options.immutable = nsc.immutable;
    ns->meta = std::make_unique<MetadataCache>(ns->store, ns->prefix, meta_options);
    if (probe) LC_RETURN_IF_ERROR(Probe(*ns));
    table->names_.push_back(name);
    table->namespaces_[name] = std::move(ns);
  }
  return table;
}

Namespace* NamespaceTable::Find(const std::string& name) const {
  auto it = namespaces_.find(name);
  return it == namespaces_.end() ? nullptr : it->second.get();
}

}  // namespace lakecache
