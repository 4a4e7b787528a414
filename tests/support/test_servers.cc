#include "support/test_servers.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <thread>

namespace lakecache::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kStartAttempts = 3;  // a free port can be taken between FreeLoopbackPort and bind
constexpr const char* kS3rverScript = LAKECACHE_SOURCE_DIR "/node_modules/s3rver/bin/s3rver.js";

bool AcceptsConnections(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

// Quotes a value for a curl config file (-K).
std::string CurlQuote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

int FreeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

Result<std::unique_ptr<SilentListener>> SilentListener::Start() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::IoError("socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 64) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return Status::IoError("cannot listen on 127.0.0.1");
  }
  return std::unique_ptr<SilentListener>(new SilentListener(fd, ntohs(addr.sin_port)));
}

SilentListener::~SilentListener() { close(fd_); }

TempDir::TempDir(const std::string& prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string base = (tmp != nullptr && *tmp != '\0') ? tmp : "/tmp";
  std::string pattern = base + "/" + prefix + ".XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    perror(("mkdtemp " + pattern).c_str());
    std::abort();  // nothing sensible a test can do without scratch space
  }
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

NamespaceConfig LocalNamespace(const std::string& name, const std::string& dir,
                               uint64_t block_size) {
  NamespaceConfig ns;
  ns.name = name;
  ns.uri = "file://" + dir;
  Result<ObjectUri> location = ParseObjectUri(ns.uri);
  EXPECT_TRUE(location.ok()) << location.status().ToString();
  if (location.ok()) ns.location = *location;
  ns.block_size = block_size;
  return ns;
}

Status WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  out.close();
  if (!out) return Status::IoError("cannot write " + path);
  return Status::Ok();
}

Result<TlsFiles> MakeSelfSignedCert(const std::string& dir) {
  TlsFiles files{dir + "/tls.key", dir + "/tls.crt"};
  RunResult r =
      RunCommand({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30",
                  "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout",
                  files.key_path, "-out", files.cert_path});
  if (r.exit_code != 0) return Status::Internal("openssl req failed: " + r.err);
  return files;
}

std::string PercentEncodeKey(const std::string& key) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : key) {
    bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_' || c == '.' || c == '~';
    if (unreserved || c == '/') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// S3Server

S3Server::S3Server(std::string access_key, std::string secret_key, const std::string& dir_prefix)
    : dir_(dir_prefix), access_key_(std::move(access_key)), secret_key_(std::move(secret_key)) {}

std::string S3Server::BucketUrl(const std::string& bucket) const {
  return endpoint_ + "/" + PercentEncodeKey(bucket);
}

std::string S3Server::ObjectUrl(const std::string& bucket, const std::string& key) const {
  return BucketUrl(bucket) + "/" + PercentEncodeKey(key);
}

// curl --user splits at the first ':', and Swift's access key is "test:tester": a netrc file
// passes the login whole.
std::string S3Server::NetrcFile(const std::string& access_key,
                                const std::string& secret_key) const {
  std::string path =
      dir() + "/netrc-" + std::to_string(std::hash<std::string>{}(access_key + '\n' + secret_key));
  if (!fs::exists(path)) {
    Status st =
        WriteFile(path, "machine 127.0.0.1 login " + access_key + " password " + secret_key + "\n");
    if (!st.ok()) fprintf(stderr, "%s\n", st.ToString().c_str());
    fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write);
  }
  return path;
}

std::vector<std::string> S3Server::SignedCurl(const std::string& access_key,
                                              const std::string& secret_key) const {
  // curl 7.88 does not send x-amz-content-sha256, which Swift's s3api requires.
  std::vector<std::string> argv = {"curl",
                                   "-sS",
                                   "--noproxy",
                                   "*",
                                   "--path-as-is",
                                   "--aws-sigv4",
                                   "aws:amz:" + region_ + ":s3",
                                   "--netrc-file",
                                   NetrcFile(access_key, secret_key),
                                   "-H",
                                   "x-amz-content-sha256: UNSIGNED-PAYLOAD"};
  if (!ca_file_.empty()) argv.insert(argv.end(), {"--cacert", ca_file_});
  return argv;
}

Status S3Server::CreateBucket(const std::string& bucket) const {
  std::vector<std::string> argv = SignedCurl();
  argv.insert(argv.end(), {"-X", "PUT", "-w", "\n%{http_code}", BucketUrl(bucket)});
  RunResult r = RunCommand(argv, {}, std::chrono::seconds(60));
  if (r.exit_code == 0 && r.out.ends_with("\n200")) return Status::Ok();
  return Status::Internal("CreateBucket " + bucket + " at " + endpoint_ + " failed: " + r.out +
                          r.err);
}

namespace {

// One transfer of a parallel curl run; `next` separates transfers so each has its own options.
std::string PutTransferConfig(const std::string& url, const std::string& file, size_t index,
                              const std::string& common) {
  std::string entry = index == 0 ? "" : "next\n";
  entry += "url = " + CurlQuote(url) + "\n";
  // A file of its own for the answer's body: a retry (a server busy on a loaded machine answers
  // 503) truncates what the failed try wrote, which /dev/null refuses (curl exit 23).
  entry += "output = " + CurlQuote(file + ".answer") + "\n";
  if (url.ends_with('/')) {
    // With upload-file, curl appends the file name to a URL ending in '/' (a "directory" key).
    // The content type must be a real value: curl 7.88 signs an emptied header it does not send.
    entry += "request = \"PUT\"\ndata-binary = " + CurlQuote("@" + file) +
             "\nheader = \"Content-Type: application/octet-stream\"\n";
  } else {
    entry += "upload-file = " + CurlQuote(file) + "\n";
  }
  entry += "write-out = \"%{http_code} " + std::to_string(index) + "\\n\"\n";
  return entry + common;
}

// Checks that the write-out lines ("CODE INDEX") say 200 for every object.
Status CheckPutResults(const RunResult& r, const std::string& bucket,
                       const std::vector<std::pair<std::string, std::string>>& objects) {
  std::vector<std::string> codes(objects.size(), "none");
  std::istringstream lines(r.out);
  std::string code;
  size_t index = 0;
  while (lines >> code >> index) {
    if (index < codes.size()) codes[index] = code;
  }
  std::string failures;
  size_t failed = 0;
  for (size_t i = 0; i < codes.size(); ++i) {
    if (codes[i] == "200") continue;
    if (++failed <= 5) failures += " '" + objects[i].first + "' (HTTP " + codes[i] + ")";
  }
  if (failed == 0) return Status::Ok();
  return Status::Internal("PutObjects to " + bucket + ": " + std::to_string(failed) + " of " +
                          std::to_string(objects.size()) + " uploads failed:" + failures +
                          "; curl exit " + std::to_string(r.exit_code) + ": " +
                          r.err.substr(0, 2000));
}

}  // namespace

Status S3Server::PutObjects(
    const std::string& bucket,
    const std::vector<std::pair<std::string, std::string>>& key_and_content) const {
  if (key_and_content.empty()) return Status::Ok();
  TempDir staging("lakecache-put");
  std::string common = "aws-sigv4 = " + CurlQuote("aws:amz:" + region_ + ":s3") +
                       "\nnetrc-file = " + CurlQuote(NetrcFile(access_key_, secret_key_)) +
                       "\nheader = \"x-amz-content-sha256: UNSIGNED-PAYLOAD\"\n"
                       "noproxy = \"*\"\npath-as-is\nretry = 2\n";
  if (!ca_file_.empty()) common += "cacert = " + CurlQuote(ca_file_) + "\n";
  std::string config;
  for (size_t i = 0; i < key_and_content.size(); ++i) {
    const auto& [key, content] = key_and_content[i];
    std::string file = staging.path() + "/" + std::to_string(i);
    LC_RETURN_IF_ERROR(WriteFile(file, content));
    config += PutTransferConfig(ObjectUrl(bucket, key), file, i, common);
  }
  std::string config_path = staging.path() + "/curl.config";
  LC_RETURN_IF_ERROR(WriteFile(config_path, config));
  RunResult r = RunCommand(
      {"curl", "--no-progress-meter", "--parallel", "--parallel-max", "16", "-K", config_path}, {},
      std::chrono::seconds(600));
  return CheckPutResults(r, bucket, key_and_content);
}

Status S3Server::WaitUntilServing(const std::vector<ChildProcess*>& processes,
                                  const std::vector<int>& ports,
                                  std::chrono::seconds timeout) const {
  auto deadline = Clock::now() + timeout;
  std::vector<std::string> list_buckets = SignedCurl();
  list_buckets.insert(list_buckets.end(), {"-o", "/dev/null", "-w", "%{http_code}", "--max-time",
                                           "5", endpoint_ + "/"});
  size_t listening = 0;
  std::string last_answer = "(no connection)";
  while (Clock::now() < deadline) {
    for (ChildProcess* p : processes) {
      if (!p->Running()) {
        return Status::Unavailable("server exited during start-up; " + p->log_path() + ":\n" +
                                   p->LogTail());
      }
    }
    while (listening < ports.size() && AcceptsConnections(ports[listening])) ++listening;
    if (listening == ports.size()) {
      RunResult r = RunCommand(list_buckets, {}, std::chrono::seconds(10));
      if (r.exit_code == 0 && r.out == "200") return Status::Ok();
      last_answer = "HTTP " + r.out + " " + r.err;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::string logs;
  for (ChildProcess* p : processes) logs += "\n" + p->log_path() + ":\n" + p->LogTail(1500);
  return Status::DeadlineExceeded(endpoint_ + " not serving after " +
                                  std::to_string(timeout.count()) +
                                  " s; last answer: " + last_answer + logs);
}

Result<std::unique_ptr<S3Server>> S3Server::StartWithRetries(
    const std::function<std::unique_ptr<S3Server>()>& make) {
  auto start = Clock::now();
  Status last;
  for (int attempt = 0; attempt < kStartAttempts; ++attempt) {
    std::unique_ptr<S3Server> server = make();
    last = server->Launch();
    if (!last.ok() && last.code() == StatusCode::kUnavailable) continue;  // e.g. port taken
    if (!last.ok()) break;
    server->startup_time_ =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    return server;
  }
  return last;
}

// ---------------------------------------------------------------------------------------------
// S3rver

Result<std::unique_ptr<S3rver>> S3rver::Start(const Options& options) {
  if (!fs::exists(kS3rverScript)) {
    return Status::NotFound(std::string(kS3rverScript) +
                            " is missing: run scripts/install-deps.sh (npm ci in the source tree)");
  }
  if (options.tls_key_path.empty() != options.tls_cert_path.empty()) {
    return Status::InvalidArgument("S3rver TLS needs both tls_key_path and tls_cert_path");
  }
  LC_ASSIGN_OR_RETURN(std::unique_ptr<S3Server> server, StartWithRetries([&] {
                        return std::unique_ptr<S3Server>(new S3rver(options));
                      }));
  return std::unique_ptr<S3rver>(static_cast<S3rver*>(server.release()));
}

Status S3rver::Launch() {
  int port = FreeLoopbackPort();
  if (port < 0) return Status::IoError("no free loopback port");
  bool tls = !options_.tls_cert_path.empty();
  endpoint_ = std::string(tls ? "https" : "http") + "://127.0.0.1:" + std::to_string(port);
  ca_file_ = options_.tls_cert_path;
  std::vector<std::string> argv = {
      "node", "--openssl-legacy-provider", kS3rverScript, "-d", dir() + "/data", "-a", "127.0.0.1",
      "-p",   std::to_string(port)};
  if (tls) {
    argv.insert(argv.end(), {"--key", options_.tls_key_path, "--cert", options_.tls_cert_path});
  }
  // Last: s3rver takes the arguments after a bucket name, up to the next option, as config files.
  for (const std::string& bucket : options_.buckets) {
    argv.insert(argv.end(), {"--configure-bucket", bucket});
  }
  LC_ASSIGN_OR_RETURN(process_, ChildProcess::Start(argv, dir() + "/s3rver.log"));
  return WaitUntilServing({process_.get()}, {port}, std::chrono::seconds(20));
}

// ---------------------------------------------------------------------------------------------
// SwiftS3

namespace {

constexpr const char* kPython = "/usr/bin/python3";  // Debian's swift modules live here

// Runs a one-node Swift cluster (argv: SWIFT_DIR ACCOUNT_PORT CONTAINER_PORT OBJECT_PORT); written
// to the server's directory as run_swift.py.
// - It builds the three rings, imports Swift and monkey-patches eventlet once, then forks the four
//   servers: separate processes would repeat that work four times (~3x slower start-up).
// - When any server exits it stops the others and exits, so the C++ side watches one process.
// - set_swift_dir: the servers read /etc/swift/swift.conf unless told otherwise.
// - Cache stands in for memcached (not installed): without it the proxy asks the account and
//   container servers on every request, which made bulk PUTs ~2x slower.
// - Test data needs no durability, so fsync is a no-op.
constexpr const char* kSwiftRunner =
    R"PY(import ctypes, json, os, runpy, signal, sys, time, traceback

SERVERS = ('account', 'container', 'object', 'proxy')
os.fsync = os.fdatasync = lambda fd: None


class Cache(object):
    """The subset of swift.common.memcached.MemcacheRing the proxy uses, in process."""

    def __init__(self):
        self.entries = {}

    def get(self, key, raise_on_error=False):
        expires, value = self.entries.get(key, (0, None))
        if value is None or (expires and expires < time.time()):
            return None
        return json.loads(value)

    def set(self, key, value, serialize=True, time=0, min_compress_len=0,
            raise_on_error=False):
        self.entries[key] = (_expiry(time), json.dumps(value))

    def incr(self, key, delta=1, time=0):
        value = max((self.get(key) or 0) + delta, 0)
        self.set(key, value, time=time)
        return value

    def decr(self, key, delta=1, time=0):
        return self.incr(key, -delta, time)

    def delete(self, key, server_key=None):
        self.entries.pop(key, None)

    def set_multi(self, mapping, server_key, serialize=True, time=0,
                  min_compress_len=0):
        for key, value in mapping.items():
            self.set(key, value, time=time)

    def get_multi(self, keys, server_key):
        return [self.get(key) for key in keys]


def _expiry(ttl):
    return time.time() + ttl if ttl else 0


CACHE = Cache()


def filter_factory(global_conf, **local_conf):
    def middleware(app):
        def call(env, start_response):
            env['swift.cache'] = CACHE
            return app(env, start_response)
        return call
    return middleware


def build_rings(swift_dir, ports):
    from swift.common.ring import RingBuilder
    for name, port in zip(('account', 'container', 'object'), ports):
        builder = RingBuilder(8, 1, 1)
        builder.add_dev({'region': 1, 'zone': 1, 'ip': '127.0.0.1',
                         'port': int(port), 'device': 'd1', 'weight': 100})
        builder.rebalance()
        builder.save('%s/%s.builder' % (swift_dir, name))
        builder.get_ring().save('%s/%s.ring.gz' % (swift_dir, name))


def run_server(swift_dir, name, runner):
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the runner
    if os.getppid() != runner:
        os._exit(1)
    os.setsid = lambda: None  # stay in the runner's process group: the test stops it as a whole
    log = os.open('%s/%s.log' % (swift_dir, name), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    script = '/usr/bin/swift-%s-server' % name
    sys.argv = [script, '%s/%s-server.conf' % (swift_dir, name), '-v']  # -v: log to stderr too
    try:
        runpy.run_path(script, run_name='__main__')
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stderr.flush()
        os._exit(1)


def main():
    swift_dir = sys.argv[1]
    build_rings(swift_dir, sys.argv[2:5])
    sys.modules['lakecache_swift_cache'] = sys.modules[__name__]
    from swift.common import utils
    utils.set_swift_dir(swift_dir)
    import swift.account.server, swift.container.server, swift.obj.server, swift.proxy.server
    import swift.common.middleware.s3api.s3api, swift.common.wsgi
    utils.eventlet_monkey_patch()  # each server would repeat this (~0.7 s of gc.collect) itself
    sys.stdout.flush()
    sys.stderr.flush()
    children = {}
    runner = os.getpid()
    for name in SERVERS:
        pid = os.fork()
        if pid == 0:
            run_server(swift_dir, name, runner)
        children[pid] = name
    pid, status = os.wait()
    sys.stderr.write('swift-%s-server exited (wait status %d); stopping the others\n'
                     % (children[pid], status))
    sys.stderr.flush()
    os.killpg(0, signal.SIGKILL)


main()
)PY";

constexpr const char* kSwiftConf = R"([swift-hash]
swift_hash_path_suffix = lakecache-test
swift_hash_path_prefix = lakecache-test

[storage-policy:0]
name = Policy-0
default = yes
)";

// Shared by all four servers. bind_timeout: give up quickly when the port was taken meanwhile.
constexpr const char* kDefaultSection = R"([DEFAULT]
bind_ip = 127.0.0.1
bind_port = {port}
bind_timeout = 2
workers = 0
user = {user}
swift_dir = {dir}
devices = {dir}/devices
mount_check = false
disable_fallocate = true
)";

constexpr const char* kBackendConf = R"(
[pipeline:main]
pipeline = {name}-server

[app:{name}-server]
use = egg:swift#{name}
)";

constexpr const char* kProxyConf = R"(
[pipeline:main]
pipeline = catch_errors gatekeeper healthcheck proxy-logging cache listing_formats s3api tempauth copy slo dlo proxy-logging proxy-server

[app:proxy-server]
use = egg:swift#proxy
account_autocreate = true

[filter:s3api]
use = egg:swift#s3api
location = us-east-1

[filter:tempauth]
use = egg:swift#tempauth
user_test_tester = lcsecret-swift-5f0c2a .admin

[filter:catch_errors]
use = egg:swift#catch_errors
[filter:gatekeeper]
use = egg:swift#gatekeeper
[filter:healthcheck]
use = egg:swift#healthcheck
[filter:proxy-logging]
use = egg:swift#proxy_logging
[filter:cache]
use = call:lakecache_swift_cache:filter_factory
[filter:listing_formats]
use = egg:swift#listing_formats
[filter:copy]
use = egg:swift#copy
[filter:slo]
use = egg:swift#slo
[filter:dlo]
use = egg:swift#dlo
)";

const char* const kSwiftServers[] = {"proxy", "account", "container", "object"};

std::string CurrentUser() {
  const passwd* pw = getpwuid(geteuid());
  return pw != nullptr ? pw->pw_name : "root";
}

}  // namespace

Result<std::unique_ptr<SwiftS3>> SwiftS3::Start(const Options& options) {
  for (const char* name : kSwiftServers) {
    std::string binary = std::string("/usr/bin/swift-") + name + "-server";
    if (!fs::exists(binary)) {
      return Status::NotFound(binary + " is missing: run scripts/install-deps.sh (Debian swift " +
                              "swift-proxy swift-account swift-container swift-object)");
    }
  }
  LC_ASSIGN_OR_RETURN(std::unique_ptr<S3Server> server,
                      StartWithRetries([&] { return std::unique_ptr<S3Server>(new SwiftS3()); }));
  std::unique_ptr<SwiftS3> swift(static_cast<SwiftS3*>(server.release()));
  for (const std::string& bucket : options.buckets) LC_RETURN_IF_ERROR(swift->CreateBucket(bucket));
  return swift;
}

Status SwiftS3::WriteConfigs(const std::vector<int>& ports) const {
  std::error_code ec;
  fs::create_directories(dir() + "/devices/d1", ec);
  if (ec) return Status::IoError("mkdir " + dir() + "/devices/d1: " + ec.message());
  LC_RETURN_IF_ERROR(WriteFile(dir() + "/swift.conf", kSwiftConf));
  for (size_t i = 0; i < 4; ++i) {
    std::string name = kSwiftServers[i];
    std::string conf = fmt::format(fmt::runtime(kDefaultSection), fmt::arg("port", ports[i]),
                                   fmt::arg("user", CurrentUser()), fmt::arg("dir", dir()));
    conf += i == 0 ? std::string(kProxyConf)
                   : fmt::format(fmt::runtime(kBackendConf), fmt::arg("name", name));
    LC_RETURN_IF_ERROR(WriteFile(dir() + "/" + name + "-server.conf", conf));
  }
  return WriteFile(dir() + "/run_swift.py", kSwiftRunner);
}

Status SwiftS3::Launch() {
  std::vector<int> ports;
  for (int i = 0; i < 4; ++i) {
    ports.push_back(FreeLoopbackPort());
    if (ports.back() < 0) return Status::IoError("no free loopback port");
  }
  endpoint_ = "http://127.0.0.1:" + std::to_string(ports[0]);
  LC_RETURN_IF_ERROR(WriteConfigs(ports));
  LC_ASSIGN_OR_RETURN(
      process_,
      ChildProcess::Start({kPython, dir() + "/run_swift.py", dir(), std::to_string(ports[1]),
                           std::to_string(ports[2]), std::to_string(ports[3])},
                          dir() + "/swift.log"));
  Status serving = WaitUntilServing({process_.get()}, ports, std::chrono::seconds(30));
  if (serving.ok()) return serving;
  std::string logs;
  for (const char* name : kSwiftServers) {
    std::string log = dir() + "/" + name + ".log";
    logs += "\n" + log + ":\n" + ReadFileTail(log, 1500);
  }
  return Status(serving.code(), serving.message() + logs);
}

Result<std::unique_ptr<S3Server>> StartS3Server(const std::string& kind,
                                                const std::vector<std::string>& buckets) {
  if (kind == "swift") {
    LC_ASSIGN_OR_RETURN(std::unique_ptr<SwiftS3> swift, SwiftS3::Start({buckets}));
    return std::unique_ptr<S3Server>(std::move(swift));
  }
  if (kind == "s3rver") {
    LC_ASSIGN_OR_RETURN(std::unique_ptr<S3rver> s3rver, S3rver::Start({buckets}));
    return std::unique_ptr<S3Server>(std::move(s3rver));
  }
  return Status::InvalidArgument("no S3 test server of kind '" + kind + "'");
}

S3Server& SharedS3Server(const std::string& kind, const std::vector<std::string>& buckets) {
  static std::map<std::string, std::unique_ptr<S3Server>> servers;
  auto& slot = servers[kind];
  if (!slot) {
    auto started = StartS3Server(kind, buckets);
    if (!started.ok()) {
      std::fprintf(stderr, "%s did not start: %s\n", kind.c_str(),
                   started.status().ToString().c_str());
      std::abort();
    }
    slot = std::move(started).value();
  }
  return *slot;
}

}  // namespace lakecache::testing
