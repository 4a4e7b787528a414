// Feeds the bytes to every S3 XML response parser of ufs/s3_xml.h as one server reply body.
// Asserts no crash, that a successful parse honours its contract (an upload id or ETag is never
// empty), and that CompleteMultipartUploadXml writes back the ETags it was given.
#include <pugixml.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ufs/s3_xml.h"

namespace lakecache {
namespace {

// pugixml stores text as C strings and folds "\r\n" on load, so only ETags without control
// characters come back byte for byte; real ones are hex digits.
bool Printable(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20) return false;
  }
  return true;
}

// The request body written from `etags` must name each one, in order, quoted.
void CheckCompleteXml(const std::vector<std::string>& etags) {
  std::vector<CompletedPart> parts;
  for (const std::string& etag : etags) {
    if (Printable(etag)) parts.push_back({static_cast<int>(parts.size()) + 1, etag, 0});
  }
  std::string xml = CompleteMultipartUploadXml(parts);
  pugi::xml_document doc;
  if (!doc.load_string(xml.c_str())) __builtin_trap();
  size_t i = 0;
  for (pugi::xml_node p : doc.child("CompleteMultipartUpload").children("Part")) {
    if (i >= parts.size()) __builtin_trap();
    if (p.child("PartNumber").text().as_int() != parts[i].part_number) __builtin_trap();
    if (p.child_value("ETag") != "\"" + parts[i].etag + "\"") __builtin_trap();
    ++i;
  }
  if (i != parts.size()) __builtin_trap();
}

}  // namespace
}  // namespace lakecache

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lakecache;
  std::string_view xml(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> etags;

  Result<ListPage> page = ParseListObjectsV2(xml);
  if (page.ok()) {
    for (const ObjectInfo& o : page->objects) etags.push_back(o.etag);
  }
  Result<MultipartUploadsPage> uploads = ParseListMultipartUploads(xml);
  if (uploads.ok()) {
    for (const PendingUpload& u : uploads->uploads) etags.push_back(u.upload_id);
  }
  Result<std::string> id = ParseUploadId(xml);
  if (id.ok() && id->empty()) __builtin_trap();
  for (const char* root : {"CompleteMultipartUploadResult", "CopyObjectResult", "CopyPartResult"}) {
    Result<std::string> etag = ParseResultEtag(xml, root);
    if (etag.ok() && etag->empty()) __builtin_trap();
    if (etag.ok()) etags.push_back(*etag);
  }
  S3Error error = ParseS3Error(xml);
  etags.push_back(error.code);

  // Also the helpers on the raw text: an unquoted ETag is never longer than what it came from.
  if (UnquoteEtag(xml).size() > xml.size()) __builtin_trap();
  (void)ParseIso8601(xml);
  CheckCompleteXml(etags);
  return 0;
}
