// S3StoreOptions for a bucket of a test server. Header-only: the S3 store lives in lakecache_ufs,
// which the integration tests link and the shared support library does not.
#pragma once

#include <string>

#include "support/test_servers.h"
#include "ufs/s3_store.h"

namespace lakecache::testing {

// `bucket` of `server`, path-style, with the server's endpoint, region and credentials.
inline S3StoreOptions StoreOptionsFor(const S3Server& server, const std::string& bucket) {
  S3StoreOptions options;
  options.bucket = bucket;
  options.endpoint = server.endpoint();
  options.region = server.region();
  options.path_style = true;
  options.credentials = {server.access_key(), Secret(server.secret_key()), Secret(), "test"};
  return options;
}

}  // namespace lakecache::testing
