// ObjectUri: a parsed object-store location, "s3://bucket/prefix", "oss://bucket/prefix" or
// "file:///dir", or "synthetic://SPEC/prefix" (generated objects for tests and benchmarks:
// ufs/synthetic_store.h).
//
// For s3 and oss, `bucket` is the bucket and `key` the object key or prefix within it (no leading
// '/'). An OSS URI written as "oss://bucket.endpoint/dir" (JindoFS style) yields bucket "bucket"
// and endpoint_host "endpoint". For file, `key` is the absolute local path. For synthetic,
// `bucket` is the SPEC. Value type; pure
// functions.
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"

namespace lakecache {

enum class UriScheme { kS3, kOss, kFile, kSynthetic };

struct ObjectUri {
  UriScheme scheme = UriScheme::kS3;
  std::string bucket;         // empty for file://
  std::string key;            // object key or prefix, never starting with '/' (for file: the path)
  std::string endpoint_host;  // only from "oss://bucket.endpoint/..."

  // "s3://bucket/key" (the canonical form, without endpoint host).
  std::string ToString() const;
};

std::string_view UriSchemeName(UriScheme scheme);

Result<ObjectUri> ParseObjectUri(std::string_view text);

}  // namespace lakecache
