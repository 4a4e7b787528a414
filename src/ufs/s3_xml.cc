#include "ufs/s3_xml.h"

#include <time.h>

#include <charconv>
#include <pugixml.hpp>
#include <sstream>

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

// Loads `xml` and returns its root element `root`, or kInternal naming `what`.
Result<pugi::xml_node> LoadRoot(pugi::xml_document& doc, std::string_view xml, const char* root,
                                std::string_view what) {
  pugi::xml_parse_result parsed = doc.load_buffer(xml.data(), xml.size());
  if (!parsed) {
    return Status::Internal(std::string(what) +
                            ": malformed XML response: " + parsed.description());
  }
  pugi::xml_node node = doc.child(root);
  if (!node) return Status::Internal(std::string(what) + ": response has no <" + root + ">");
  return node;
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
  LC_ASSIGN_OR_RETURN(pugi::xml_node root, LoadRoot(doc, xml, "ListBucketResult", "ListObjectsV2"));
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

Result<MultipartUploadsPage> ParseListMultipartUploads(std::string_view xml) {
  pugi::xml_document doc;
  LC_ASSIGN_OR_RETURN(pugi::xml_node root,
                      LoadRoot(doc, xml, "ListMultipartUploadsResult", "ListMultipartUploads"));
  MultipartUploadsPage page;
  for (pugi::xml_node u : root.children("Upload")) {
    page.uploads.push_back({u.child_value("Key"), u.child_value("UploadId"),
                            ParseIso8601(u.child_value("Initiated"))});
  }
  page.truncated = std::string_view(root.child_value("IsTruncated")) == "true";
  page.next_key_marker = root.child_value("NextKeyMarker");
  page.next_upload_id_marker = root.child_value("NextUploadIdMarker");
  return page;
}

Result<std::string> ParseUploadId(std::string_view xml) {
  pugi::xml_document doc;
  LC_ASSIGN_OR_RETURN(pugi::xml_node root,
                      LoadRoot(doc, xml, "InitiateMultipartUploadResult", "CreateMultipartUpload"));
  std::string id = root.child_value("UploadId");
  if (id.empty()) return Status::Internal("CreateMultipartUpload: response has no <UploadId>");
  return id;
}

Result<std::string> ParseResultEtag(std::string_view xml, const char* root_name) {
  pugi::xml_document doc;
  LC_ASSIGN_OR_RETURN(pugi::xml_node root, LoadRoot(doc, xml, root_name, root_name));
  std::string etag = UnquoteEtag(root.child_value("ETag"));
  if (etag.empty()) return Status::Internal(std::string(root_name) + ": response has no <ETag>");
  return etag;
}

std::string CompleteMultipartUploadXml(const std::vector<CompletedPart>& parts) {
  pugi::xml_document doc;
  pugi::xml_node root = doc.append_child("CompleteMultipartUpload");
  root.append_attribute("xmlns") = "http://s3.amazonaws.com/doc/2006-03-01/";
  for (const CompletedPart& part : parts) {
    pugi::xml_node p = root.append_child("Part");
    p.append_child("PartNumber").text().set(part.part_number);
    p.append_child("ETag").text().set(("\"" + part.etag + "\"").c_str());
  }
  std::ostringstream out;
  doc.save(out, "", pugi::format_raw);
  return out.str();
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
