#include "ufs/s3_xml.h"

#include <time.h>

#include <charconv>
#include <pugixml.hpp>

namespace lakecache {
namespace {

Result<uint64_t> ParseSize(std::string_view text) {
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    return Status::Internal("ListObjectsV2: invalid <Size> '" + std::string(text) + "'");
  }
  return value;
}

}  // namespace

std::string UnquoteEtag(std::string_view etag) {
  if (etag.starts_with("W/")) etag.remove_prefix(2);
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') {
    etag = etag.substr(1, etag.size() - 2);
  }
  // Some servers send the quotes XML-escaped.
  if (etag.starts_with("&quot;") && etag.ends_with("&quot;") && etag.size() >= 12) {
    etag = etag.substr(6, etag.size() - 12);
  }
  return std::string(etag);
}

int64_t ParseIso8601(std::string_view text) {
  std::tm tm{};
  std::string s(text);
  const char* end = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (end == nullptr) return 0;
  return static_cast<int64_t>(timegm(&tm));
}

Result<ListPage> ParseListObjectsV2(std::string_view xml) {
  pugi::xml_document doc;
  pugi::xml_parse_result parsed = doc.load_buffer(xml.data(), xml.size());
  if (!parsed) {
    return Status::Internal(std::string("ListObjectsV2: malformed XML response: ") +
                            parsed.description());
  }
  pugi::xml_node root = doc.child("ListBucketResult");
  if (!root) return Status::Internal("ListObjectsV2: response has no <ListBucketResult>");
  ListPage page;
  for (pugi::xml_node c : root.children("Contents")) {
    ObjectInfo info;
    info.key = c.child_value("Key");
    LC_ASSIGN_OR_RETURN(info.size, ParseSize(c.child_value("Size")));
    info.etag = UnquoteEtag(c.child_value("ETag"));
    info.mtime = ParseIso8601(c.child_value("LastModified"));
    page.objects.push_back(std::move(info));
  }
  for (pugi::xml_node p : root.children("CommonPrefixes")) {
    page.common_prefixes.emplace_back(p.child_value("Prefix"));
  }
  page.truncated = std::string_view(root.child_value("IsTruncated")) == "true";
  page.next_token = root.child_value("NextContinuationToken");
  return page;
}

S3Error ParseS3Error(std::string_view xml) {
  S3Error error;
  pugi::xml_document doc;
  if (xml.empty() || !doc.load_buffer(xml.data(), xml.size())) return error;
  pugi::xml_node root = doc.child("Error");
  if (!root) return error;
  error.code = root.child_value("Code");
  error.message = root.child_value("Message");
  return error;
}

}  // namespace lakecache
