#include "ufs/store_factory.h"

#include "ufs/local_store.h"
#include "ufs/metered_store.h"
#include "ufs/s3_store.h"
#include "ufs/synthetic_store.h"

namespace lakecache {

Result<std::shared_ptr<ObjectStore>> OpenObjectStore(const NamespaceConfig& ns,
                                                     const Credentials& credentials,
                                                     const StoreOptions& options) {
  std::shared_ptr<ObjectStore> store;
  const ObjectUri& loc = ns.location;
  if (loc.scheme == UriScheme::kFile) {
    store = std::make_shared<LocalStore>(loc.key);
  } else if (loc.scheme == UriScheme::kSynthetic) {
    LC_ASSIGN_OR_RETURN(SyntheticSpec spec, SyntheticSpec::Parse(loc.bucket));
    store = std::make_shared<SyntheticStore>(spec, loc.bucket);
  } else {
    S3StoreOptions s3;
    s3.scheme = loc.scheme;
    s3.bucket = loc.bucket;
    s3.endpoint = ns.endpoint;
    if (s3.endpoint.empty() && !loc.endpoint_host.empty())
      s3.endpoint = "https://" + loc.endpoint_host;
    if (s3.endpoint.empty() && loc.scheme == UriScheme::kOss) {
      return Status::InvalidArgument("namespace '" + ns.name + "': oss:// needs an endpoint (set " +
                                     "`endpoint` or write the URI as oss://bucket.endpoint/dir)");
    }
    s3.region = ns.region;
    s3.path_style = ns.path_style;
    s3.credentials = credentials;
    s3.http = options.http;
    LC_ASSIGN_OR_RETURN(auto s3_store, S3Store::Create(std::move(s3)));
    store = std::move(s3_store);
  }
  if (options.wrap) store = options.wrap(std::move(store));
  if (options.metrics != nullptr) {
    store = std::make_shared<MeteredStore>(std::move(store), options.metrics);
  }
  if (options.retries) store = std::make_shared<RetryingStore>(std::move(store), options.retry);
  return store;
}

}  // namespace lakecache
