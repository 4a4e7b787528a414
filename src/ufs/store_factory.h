// Opens the ObjectStore behind a namespace: S3 or OSS (S3-compatible API) or a local directory,
// wrapped in a RetryingStore (and a MeteredStore below it when metrics are on).
//
// The store addresses the namespace's bucket (or root folder); mapping keys under the namespace
// prefix is the caller's job. Thread-safe; the returned store is shared.
#pragma once

#include <functional>
#include <memory>

#include "common/config.h"
#include "common/credentials.h"
#include "common/metrics.h"
#include "ufs/http_client.h"
#include "ufs/object_store.h"
#include "ufs/retrying_store.h"

namespace lakecache {

struct StoreOptions {
  HttpClientOptions http;
  RetryPolicy retry;
  bool retries = true;  // false: no RetryingStore (tests that count raw requests)
  // A seam for tests: wraps each store opened, below the retries (e.g. in a FaultInjectingStore).
  std::function<std::shared_ptr<ObjectStore>(std::shared_ptr<ObjectStore>)> wrap;
  // Non-null: every request is timed and counted there (a MeteredStore, below the retries).
  metrics::Registry* metrics = nullptr;
};

Result<std::shared_ptr<ObjectStore>> OpenObjectStore(const NamespaceConfig& ns,
                                                     const Credentials& credentials,
                                                     const StoreOptions& options);

}  // namespace lakecache
