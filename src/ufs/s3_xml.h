// S3's XML documents with pugixml: parsing responses (listings, multipart and copy results, error
// documents) and writing the CompleteMultipartUpload request body.
//
// Pure functions, thread-safe. Malformed XML is kInternal naming what was being parsed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "ufs/object_store.h"

namespace lakecache {

struct S3Error {
  std::string code;     // "NoSuchKey", "SignatureDoesNotMatch"; empty when the body had none
  std::string message;  // the server's human-readable message
};

Result<ListPage> ParseListObjectsV2(std::string_view xml);

// One page of ListMultipartUploads.
struct MultipartUploadsPage {
  std::vector<PendingUpload> uploads;
  bool truncated = false;
  std::string next_key_marker;  // with next_upload_id_marker, where the next page starts
  std::string next_upload_id_marker;
};

Result<MultipartUploadsPage> ParseListMultipartUploads(std::string_view xml);

// The <UploadId> of an InitiateMultipartUploadResult.
Result<std::string> ParseUploadId(std::string_view xml);

// The unquoted <ETag> below the root element `root` (CompleteMultipartUploadResult,
// CopyObjectResult, CopyPartResult). kInternal when the root or its ETag is missing.
Result<std::string> ParseResultEtag(std::string_view xml, const char* root);

// The CompleteMultipartUpload request body; ETags are written quoted and XML-escaped.
std::string CompleteMultipartUploadXml(const std::vector<CompletedPart>& parts);

// Best effort: an unparsable or empty body gives an empty S3Error.
S3Error ParseS3Error(std::string_view xml);

// "2009-10-12T17:50:30.000Z" -> seconds since the epoch; 0 when unparsable.
int64_t ParseIso8601(std::string_view text);

// Strips the quotes S3 puts around ETags.
std::string UnquoteEtag(std::string_view etag);

}  // namespace lakecache
