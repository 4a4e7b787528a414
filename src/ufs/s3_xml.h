// Parsing of S3 XML responses (ListObjectsV2 results and error documents) with pugixml.
//
// Pure functions, thread-safe. Malformed XML is kInternal naming what was being parsed.
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"
#include "ufs/object_store.h"

namespace lakecache {

struct S3Error {
  std::string code;     // "NoSuchKey", "SignatureDoesNotMatch"; empty when the body had none
  std::string message;  // the server's human-readable message
};

Result<ListPage> ParseListObjectsV2(std::string_view xml);

// Best effort: an unparsable or empty body gives an empty S3Error.
S3Error ParseS3Error(std::string_view xml);

// "2009-10-12T17:50:30.000Z" -> seconds since the epoch; 0 when unparsable.
int64_t ParseIso8601(std::string_view text);

// Strips the quotes S3 puts around ETags.
std::string UnquoteEtag(std::string_view etag);

}  // namespace lakecache
