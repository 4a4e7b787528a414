#include "meta/namespace_table.h"

#include <algorithm>

#include "common/credentials.h"

namespace lakecache {
namespace {

MetadataCacheOptions MetaOptions(const NamespaceConfig& nsc, const MetadataIndexing& indexing,
                                 size_t namespaces) {
  MetadataCacheOptions options;
  options.ttl = nsc.metadata_ttl;
  options.immutable = nsc.immutable;
  if (indexing.index != nullptr) {
    options.index = indexing.index.get();
    // A namespace pointed at another bucket or prefix starts from nothing.
    options.index_scope = nsc.name + "\n" + nsc.uri;
    options.memory_budget =
        std::max<uint64_t>(1, indexing.memory / std::max<size_t>(1, namespaces));
  }
  return options;
}

}  // namespace

Status ProbeNamespace(Namespace& ns, Clock::duration timeout) {
  ListRequest req;
  req.prefix = ns.prefix;
  req.delimiter = "/";
  req.max_keys = 1;
  auto page = ns.store->List(req, IoOptions::WithTimeout(timeout));
  if (!page.ok()) return page.status().WithContext("namespace '" + ns.name + "'");
  ns.probed_empty = page->objects.empty() && page->common_prefixes.empty();
  return Status::Ok();
}

std::string NormalizePrefix(const std::string& key) {
  std::string prefix = key;
  while (prefix.starts_with('/')) prefix.erase(0, 1);
  if (!prefix.empty() && !prefix.ends_with('/')) prefix.push_back('/');
  return prefix;
}

Result<std::unique_ptr<NamespaceTable>> NamespaceTable::Open(const Config& config,
                                                             const StoreOptions& options,
                                                             bool probe,
                                                             Clock::duration probe_timeout,
                                                             MetadataIndexing indexing) {
  auto table = std::make_unique<NamespaceTable>();
  table->index_ = indexing.index;
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
    ns->meta = std::make_unique<MetadataCache>(
        ns->store, ns->prefix, MetaOptions(nsc, indexing, config.namespaces.size()));
    if (probe) LC_RETURN_IF_ERROR(ProbeNamespace(*ns, probe_timeout));
    table->Add(std::move(ns));
  }
  return table;
}

std::unique_ptr<NamespaceTable> NamespaceTable::FromStores(std::vector<Source> sources,
                                                           MetadataIndexing indexing) {
  auto table = std::make_unique<NamespaceTable>();
  table->index_ = indexing.index;
  for (Source& source : sources) {
    auto ns = std::make_unique<Namespace>();
    ns->name = source.config.name;
    ns->prefix = source.prefix;
    ns->store = std::move(source.store);
    ns->meta = std::make_unique<MetadataCache>(
        ns->store, ns->prefix, MetaOptions(source.config, indexing, sources.size()));
    ns->config = std::move(source.config);
    table->Add(std::move(ns));
  }
  return table;
}

void NamespaceTable::Add(std::unique_ptr<Namespace> ns) {
  names_.insert(std::lower_bound(names_.begin(), names_.end(), ns->name), ns->name);
  namespaces_[ns->name] = std::move(ns);
}

Namespace* NamespaceTable::Find(const std::string& name) const {
  auto it = namespaces_.find(name);
  return it == namespaces_.end() ? nullptr : it->second.get();
}

Result<Namespace*> NamespaceTable::Get(const std::string& name) const {
  if (Namespace* ns = Find(name)) return ns;
  std::string known;
  for (const std::string& n : names_) known += (known.empty() ? "" : ", ") + n;
  return Status::NotFound("unknown namespace '" + name + "' (there are: " + known + ")");
}

Status CheckRelativePath(std::string_view what, std::string_view path) {
  bool relative = path.find('\0') == std::string_view::npos;
  for (size_t start = 0; relative && !path.empty();) {
    size_t slash = path.find('/', start);
    std::string_view part =
        path.substr(start, slash == std::string_view::npos ? slash : slash - start);
    relative = !part.empty() && part != "." && part != "..";
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  if (relative) return Status::Ok();
  return Status::InvalidArgument(std::string(what) + " '" + std::string(path) +
                                 "': expected a path relative to the namespace root (no leading "
                                 "or trailing '/', no empty, '.' or '..' parts)");
}

}  // namespace lakecache
