// synthetic_s3: an S3-compatible HTTP endpoint over SyntheticStore (src/ufs/synthetic_store.h), so
// that s3fs and rclone can mount the tree of synthetic://SPEC that our mount walks in
// bench/meta_scale, at a scale (1M objects and up) that no S3 server here can be loaded with.
//
//   synthetic_s3 --listen 127.0.0.1:PORT --bucket NAME --spec SPEC [--threads T] [--log]
//
// SPEC: what follows synthetic:// (1M, 10k, 1M,size=4KiB). PORT 0 picks a free port. Once
// listening, prints "synthetic_s3: serving http://127.0.0.1:PORT/NAME (N objects)" to stderr;
// stops on SIGTERM or SIGINT. --log prints every request and its status to stderr.
//
// A benchmark endpoint, not a test server: it listens on 127.0.0.1 only, ignores authentication
// (any Authorization header or presigned query is accepted; no signature is checked), and answers
// what a read-only mount asks, path-style only (/NAME/KEY): ListObjectsV2 and V1 (prefix,
// delimiter, max-keys up to 1,000, continuation-token / start-after / marker, encoding-type=url),
// HEAD and GET of objects (one byte range, If-Match), HEAD of the bucket, ?location, and the bucket
// list at /. Writes (PUT, POST, DELETE, PATCH) get 403 AccessDenied. A "folder" key (d000/) is no
// object: 404, folders being implied by prefixes. ETags are the store's: 32 hex digits but no MD5
// of the bytes, so rclone, which checks the MD5 of a file read whole, needs --no-checksum.
#include <httplib.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <variant>
#include <vector>

#include "ufs/sigv4.h"
#include "ufs/synthetic_store.h"

namespace {

using lakecache::ListPage;
using lakecache::ListRequest;
using lakecache::ObjectInfo;
using lakecache::Result;
using lakecache::StatusCode;
using lakecache::SyntheticStore;

constexpr int kMaxKeys = 1000;
constexpr size_t kChunk = 256 << 10;  // bytes of a GET body made at a time
constexpr char kXmlHead[] = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
constexpr char kXmlns[] = " xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"";

std::string XmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// `seconds` (since the epoch, UTC) in `format` (strftime's).
std::string TimeText(int64_t seconds, const char* format) {
  std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char out[64];
  return std::string(out, std::strftime(out, sizeof(out), format, &tm));
}

std::string IsoTime(int64_t seconds) { return TimeText(seconds, "%Y-%m-%dT%H:%M:%S.000Z"); }
std::string HttpTime(int64_t seconds) { return TimeText(seconds, "%a, %d %b %Y %H:%M:%S GMT"); }

void Element(std::string* xml, std::string_view name, std::string_view text) {
  *xml += '<';
  *xml += name;
  *xml += '>';
  *xml += XmlEscape(text);
  *xml += "</";
  *xml += name;
  *xml += '>';
}

void SetXml(httplib::Response& res, int status, std::string xml) {
  res.status = status;
  res.set_content(std::move(xml), "application/xml");
}

void SetError(httplib::Response& res, int status, std::string_view code, std::string_view message,
              std::string_view resource) {
  std::string xml = kXmlHead;
  xml += "<Error>";
  Element(&xml, "Code", code);
  Element(&xml, "Message", message);
  Element(&xml, "Resource", resource);
  Element(&xml, "RequestId", "0");
  xml += "</Error>\n";
  SetXml(res, status, std::move(xml));
}

// httplib 0.11 cuts every reply body to the request's Range after the handler ran, error bodies
// too, and trusts the range's end past the object's. Ranges are applied here instead, so the
// parsed ones are dropped; the Request is httplib's own non-const object.
void DropHttplibRanges(const httplib::Request& req) {
  const_cast<httplib::Request&>(req).ranges.clear();
}

// The one range of a "Range: bytes=..." header, as [first, first + length) of an object of `size`
// bytes. None for no header, a malformed one or several ranges (S3 then sends the whole object);
// length 0 when it cannot be satisfied (416).
struct ByteRange {
  uint64_t first = 0;
  uint64_t length = 0;
};
std::optional<ByteRange> RangeOf(const httplib::Request& req, uint64_t size) {
  std::string header = req.get_header_value("Range");
  std::string_view spec = header;
  if (!spec.starts_with("bytes=") || spec.find(',') != std::string_view::npos) return std::nullopt;
  spec.remove_prefix(6);
  size_t dash = spec.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  auto number = [](std::string_view text, uint64_t* out) {
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
    return !text.empty() && ec == std::errc() && end == text.data() + text.size();
  };
  uint64_t a = 0, b = 0;
  bool has_a = number(spec.substr(0, dash), &a);
  bool has_b = number(spec.substr(dash + 1), &b);
  if (!has_a && dash != 0) return std::nullopt;
  if (!has_b && dash + 1 != spec.size()) return std::nullopt;
  if (!has_a) {  // the last b bytes
    if (!has_b) return std::nullopt;
    return ByteRange{size - std::min(b, size), std::min(b, size)};
  }
  if (has_b && b < a) return std::nullopt;
  if (a >= size) return ByteRange{};
  uint64_t last = has_b ? std::min(b, size - 1) : size - 1;
  return ByteRange{a, last - a + 1};
}

// The bucket of SyntheticStore's tree, path-style. Thread-safe: the store has no mutable state.
class Endpoint {
 public:
  Endpoint(SyntheticStore* store, std::string bucket) : store_(store), bucket_(std::move(bucket)) {}

  // GET and HEAD of any path.
  void Get(const httplib::Request& req, httplib::Response& res) const {
    DropHttplibRanges(req);
    std::string_view path = req.path;
    if (path == "/") return Buckets(res);
    path.remove_prefix(1);
    size_t slash = path.find('/');
    std::string_view bucket = path.substr(0, slash);
    std::string_view key = slash == std::string_view::npos ? "" : path.substr(slash + 1);
    if (bucket != bucket_) {
      return SetError(res, 404, "NoSuchBucket", "The specified bucket does not exist.", req.path);
    }
    if (!key.empty()) return Object(req, res, key);
    if (req.method == "HEAD") {
      res.status = 200;
    } else if (req.has_param("location")) {
      SetXml(res, 200, std::string(kXmlHead) + "<LocationConstraint" + kXmlns + "/>\n");
    } else {
      List(req, res);
    }
  }

  void Refuse(const httplib::Request& req, httplib::Response& res) const {
    DropHttplibRanges(req);
    SetError(res, 403, "AccessDenied", "synthetic_s3 is read-only.", req.path);
  }

 private:
  void Buckets(httplib::Response& res) const {
    std::string xml = kXmlHead;
    xml += std::string("<ListAllMyBucketsResult") + kXmlns + ">";
    xml += "<Owner><ID>synthetic</ID><DisplayName>synthetic</DisplayName></Owner><Buckets><Bucket>";
    Element(&xml, "Name", bucket_);
    Element(&xml, "CreationDate", IsoTime(store_->InfoOf(0).mtime));
    xml += "</Bucket></Buckets></ListAllMyBucketsResult>\n";
    SetXml(res, 200, std::move(xml));
  }

  void List(const httplib::Request& req, httplib::Response& res) const {
    bool v2 = req.get_param_value("list-type") == "2";
    bool url = req.get_param_value("encoding-type") == "url";
    auto shown = [url](std::string_view text) {
      return url ? lakecache::UriEncode(text, /*keep_slash=*/true) : std::string(text);
    };
    ListRequest request;
    request.prefix = req.get_param_value("prefix");
    request.delimiter = req.get_param_value("delimiter");
    std::string token = req.get_param_value("continuation-token");
    std::string start_after = req.get_param_value("start-after");
    std::string marker = req.get_param_value("marker");
    request.continuation_token = v2 ? (token.empty() ? start_after : token) : marker;
    int max_keys = kMaxKeys;
    if (req.has_param("max-keys")) {
      std::string text = req.get_param_value("max-keys");
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), max_keys);
      if (ec != std::errc() || end != text.data() + text.size() || max_keys < 0) {
        return SetError(res, 400, "InvalidArgument", "Invalid max-keys.", req.path);
      }
      max_keys = std::min(max_keys, kMaxKeys);
    }
    request.max_keys = max_keys;
    ListPage page;
    if (max_keys > 0) {  // the store reads 0 as its default, S3 as none
      Result<ListPage> listed = store_->List(request, {});
      if (!listed.ok()) {
        return SetError(res, 500, "InternalError", listed.status().message(), req.path);
      }
      page = std::move(*listed);
    }

    std::string xml = kXmlHead;
    xml += std::string("<ListBucketResult") + kXmlns + ">";
    Element(&xml, "Name", bucket_);
    Element(&xml, "Prefix", shown(request.prefix));
    if (!request.delimiter.empty()) Element(&xml, "Delimiter", shown(request.delimiter));
    Element(&xml, "MaxKeys", std::to_string(max_keys));
    if (url) Element(&xml, "EncodingType", "url");
    Element(&xml, "IsTruncated", page.truncated ? "true" : "false");
    if (v2) {
      Element(&xml, "KeyCount", std::to_string(page.objects.size() + page.common_prefixes.size()));
      if (!token.empty()) Element(&xml, "ContinuationToken", token);
      if (page.truncated) Element(&xml, "NextContinuationToken", page.next_token);
      if (!start_after.empty()) Element(&xml, "StartAfter", shown(start_after));
    } else {
      Element(&xml, "Marker", shown(marker));
      // S3 names the next marker only with a delimiter; without, clients take the last key.
      if (page.truncated && !request.delimiter.empty()) {
        Element(&xml, "NextMarker", shown(page.next_token));
      }
    }
    for (const ObjectInfo& o : page.objects) {
      xml += "<Contents>";
      Element(&xml, "Key", shown(o.key));
      Element(&xml, "LastModified", IsoTime(o.mtime));
      Element(&xml, "ETag", '"' + o.etag + '"');
      Element(&xml, "Size", std::to_string(o.size));
      xml += "<StorageClass>STANDARD</StorageClass></Contents>";
    }
    for (const std::string& p : page.common_prefixes) {
      xml += "<CommonPrefixes>";
      Element(&xml, "Prefix", shown(p));
      xml += "</CommonPrefixes>";
    }
    xml += "</ListBucketResult>\n";
    SetXml(res, 200, std::move(xml));
  }

  void Object(const httplib::Request& req, httplib::Response& res, std::string_view key) const {
    Result<ObjectInfo> head = store_->Head(key, {});
    if (!head.ok()) {
      if (head.status().code() == StatusCode::kNotFound) {
        return SetError(res, 404, "NoSuchKey", "The specified key does not exist.", req.path);
      }
      return SetError(res, 500, "InternalError", head.status().message(), req.path);
    }
    const ObjectInfo& info = *head;
    std::string if_match = req.get_header_value("If-Match");
    if (!if_match.empty() && if_match != "*" && if_match != '"' + info.etag + '"' &&
        if_match != info.etag) {
      return SetError(res, 412, "PreconditionFailed", "If-Match does not match the ETag.",
                      req.path);
    }
    res.set_header("ETag", '"' + info.etag + '"');
    res.set_header("Last-Modified", HttpTime(info.mtime));
    res.set_header("Accept-Ranges", "bytes");
    ByteRange range{0, info.size};
    res.status = 200;
    if (std::optional<ByteRange> asked = RangeOf(req, info.size)) {
      if (asked->length == 0) {
        res.set_header("Content-Range", "bytes */" + std::to_string(info.size));
        return SetError(res, 416, "InvalidRange", "The requested range is not satisfiable.",
                        req.path);
      }
      range = *asked;
      res.status = 206;
      res.set_header("Content-Range", "bytes " + std::to_string(range.first) + "-" +
                                          std::to_string(range.first + range.length - 1) + "/" +
                                          std::to_string(info.size));
    }
    if (range.length == 0) {
      res.set_content("", "application/octet-stream");
      return;
    }
    // HEAD sends the headers only: httplib never calls the provider then.
    SyntheticStore* store = store_;
    res.set_content_provider(range.length, "application/octet-stream",
                             [store, key = std::string(key), first = range.first](
                                 size_t offset, size_t length, httplib::DataSink& sink) {
                               std::vector<char> buf(std::min(length, kChunk));
                               Result<size_t> n = store->Read(key, first + offset, buf, {});
                               if (!n.ok() || *n == 0) return false;
                               return sink.write(buf.data(), *n);
                             });
  }

  SyntheticStore* const store_;
  const std::string bucket_;
};

// Says what was wrong (when `error` is given), then how to call.
int Usage(const std::string& error = "") {
  if (!error.empty()) std::fprintf(stderr, "synthetic_s3: %s\n", error.c_str());
  std::fprintf(stderr,
               "usage: synthetic_s3 --listen 127.0.0.1:PORT --bucket NAME --spec SPEC "
               "[--threads T] [--log]\n"
               "Serves the tree of synthetic://SPEC as the S3 bucket NAME, read-only, "
               "until SIGTERM.\n");
  return 2;
}

struct Flags {
  int port = -1;
  std::string bucket;
  std::string spec;
  int threads = 64;
  bool log = false;
};

// The flags, or the exit status of a bad command line.
std::variant<Flags, int> ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    bool valued = a == "--listen" || a == "--bucket" || a == "--spec" || a == "--threads";
    if (valued && i + 1 >= argc) return Usage(a + " needs a value");
    if (a == "--listen") {
      std::string_view v = argv[++i];
      // Loopback only: the endpoint checks no credentials.
      if (!v.starts_with("127.0.0.1:")) return Usage("--listen takes 127.0.0.1:PORT only");
      v.remove_prefix(10);
      auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), f.port);
      if (ec != std::errc() || end != v.data() + v.size() || f.port < 0 || f.port > 65535) {
        return Usage("invalid --listen port '" + std::string(v) + "'");
      }
    } else if (a == "--bucket") {
      f.bucket = argv[++i];
    } else if (a == "--spec") {
      f.spec = argv[++i];
    } else if (a == "--threads") {
      f.threads = std::atoi(argv[++i]);
      if (f.threads <= 0) return Usage("invalid --threads '" + std::string(argv[i]) + "'");
    } else if (a == "--log") {
      f.log = true;
    } else if (a == "-h" || a == "--help") {
      Usage();
      return 0;
    } else {
      return Usage("unexpected argument '" + a + "'");
    }
  }
  if (f.port < 0) return Usage("no --listen");
  if (f.bucket.empty() || f.bucket.find('/') != std::string::npos) return Usage("no --bucket NAME");
  if (f.spec.empty()) return Usage("no --spec");
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  std::variant<Flags, int> parsed = ParseFlags(argc, argv);
  if (const int* status = std::get_if<int>(&parsed)) return *status;
  const Flags& flags = std::get<Flags>(parsed);
  Result<lakecache::SyntheticSpec> spec = lakecache::SyntheticSpec::Parse(flags.spec);
  if (!spec.ok()) return Usage(spec.status().message());
  SyntheticStore store(*spec, flags.spec);
  Endpoint endpoint(&store, flags.bucket);

  // SIGTERM and SIGINT go to one thread, which stops the server (stop() is no signal handler's
  // work); blocked before any thread starts, so every thread inherits the mask. A shell starts a
  // background job with SIGINT ignored, which would discard it before sigwait could take it.
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  sigset_t stops;
  sigemptyset(&stops);
  sigaddset(&stops, SIGTERM);
  sigaddset(&stops, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stops, nullptr);

  httplib::Server server;
  // A keep-alive connection holds its pool thread between requests, so the pool outnumbers the
  // clients' connections (s3fs: 20 HEADs at once; rclone: checkers + transfers).
  int threads = flags.threads;
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server.set_keep_alive_max_count(1 << 20);
  server.set_tcp_nodelay(true);  // replies are small: no Nagle delay between headers and body
  auto get = [&endpoint](const httplib::Request& req, httplib::Response& res) {
    endpoint.Get(req, res);
  };
  auto refuse = [&endpoint](const httplib::Request& req, httplib::Response& res) {
    endpoint.Refuse(req, res);
  };
  server.Get(".*", get);  // and HEAD
  server.Put(".*", refuse);
  server.Post(".*", refuse);
  server.Delete(".*", refuse);
  server.Patch(".*", refuse);
  if (flags.log) {
    server.set_logger([](const httplib::Request& req, const httplib::Response& res) {
      std::fprintf(stderr, "%s %s %d\n", req.method.c_str(), req.target.c_str(), res.status);
    });
  }
  int port = flags.port;
  if (port == 0) {
    port = server.bind_to_any_port("127.0.0.1");
  } else if (!server.bind_to_port("127.0.0.1", port)) {
    port = -1;
  }
  if (port <= 0) {
    std::fprintf(stderr, "synthetic_s3: cannot listen on 127.0.0.1:%d\n", flags.port);
    return 1;
  }

  std::atomic<bool> signalled = false;
  std::atomic<bool> ended = false;
  std::thread stopper([&server, &signalled, &ended, stops] {
    int signal = 0;
    sigwait(&stops, &signal);
    signalled = true;
    // stop() does nothing until listen_after_bind has started: a signal that came sooner waits.
    while (!server.is_running() && !ended) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    server.stop();
  });
  std::fprintf(stderr, "synthetic_s3: serving http://127.0.0.1:%d/%s (%llu objects)\n", port,
               flags.bucket.c_str(), static_cast<unsigned long long>(store.objects()));
  bool served = server.listen_after_bind();
  ended = true;
  if (!signalled) pthread_kill(stopper.native_handle(), SIGTERM);  // the server ended on its own
  stopper.join();
  return served && signalled ? 0 : 1;
}
