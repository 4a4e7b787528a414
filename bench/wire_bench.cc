// wire_bench: candidate transports for remote block reads, measured on loopback.
//
// A server process (this program, re-run with --serve) holds one block in memory and sends it
// whole on every request; this process reads blocks back to back for --seconds on C connections
// (one thread each), copying each block into a buffer of its own that is reused, the way a mount
// fills a block. Candidates:
//   grpc-product  the product's gRPC ReadBlock path (raw ByteBuffer stream, rpc/block_chunk.h) with
//                 the product's channel settings;
//   grpc-tuned    the same with a 64 MiB stream window, 16 MiB HTTP/2 frames, 4 MiB TCP reads and
//                 a large write buffer, BDP probing off (grpc-tuned-bdp: on);
//   framed        length-prefixed frames over TCP (rpc/bulk_protocol.h, the bulk path): the
//                 sender writes the header and the block with one sendmsg, the receiver reads
//                 straight into its buffer;
// each plain and with TLS 1.3 (gRPC: SslCredentials; framed: OpenSSL, rpc/tls.h), mutual, with a
// CA and certificate made in a temp dir by security::MakeCredentials (as `lakecache cert` makes
// them). Prints MB/s (10^6 B/s), and CPU-s per GB (10^9 B) of the receiver (this process:
// getrusage) and of the sender (the server: /proc/PID/stat).
#include <fcntl.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/support/sync_stream.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cache/block.h"
#include "rpc/block_chunk.h"
#include "rpc/bulk_protocol.h"
#include "rpc/lakecache.grpc.pb.h"
#include "rpc/tls.h"
#include "security/credentials_dir.h"

namespace lakecache {
namespace {

using SteadyClock = std::chrono::steady_clock;
constexpr int kMaxMessageBytes = 64 << 20;

std::string ReadFileText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// ---- gRPC --------------------------------------------------------------------------------------

bool Tuned(const std::string& kind) { return kind.starts_with("grpc-tuned"); }

template <typename Args>
void ApplyTuning(const std::string& kind, Args set) {
  if (!Tuned(kind)) return;
  set(GRPC_ARG_HTTP2_BDP_PROBE, kind == "grpc-tuned-bdp" ? 1 : 0);
  set(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 64 << 20);
  set(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, (16 << 20) - 1);
  set(GRPC_ARG_HTTP2_WRITE_BUFFER_SIZE, 16 << 20);
  set(GRPC_ARG_TCP_READ_CHUNK_SIZE, 4 << 20);
  set(GRPC_ARG_TCP_MIN_READ_CHUNK_SIZE, 256 << 10);
  set(GRPC_ARG_TCP_MAX_READ_CHUNK_SIZE, 8 << 20);
}

class BlockService final
    : public rpc::WorkerService::WithRawCallbackMethod_ReadBlock<rpc::WorkerService::Service> {
 public:
  explicit BlockService(BlockRef block) : block_(std::move(block)) {}
  grpc::ServerWriteReactor<grpc::ByteBuffer>* ReadBlock(grpc::CallbackServerContext*,
                                                        const grpc::ByteBuffer*) override {
    return new Writer(rpc::ChunkMessage(block_, block_->data(), block_->size()));
  }

 private:
  class Writer final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
   public:
    explicit Writer(grpc::ByteBuffer message) : message_(std::move(message)) {
      StartWriteAndFinish(&message_, grpc::WriteOptions(), grpc::Status::OK);
    }
    void OnDone() override { delete this; }

   private:
    grpc::ByteBuffer message_;
  };
  BlockRef block_;
};

int ServeGrpc(const std::string& kind, const std::string& tls_dir, BlockRef block) {
  BlockService service(std::move(block));
  grpc::ServerBuilder builder;
  std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
  if (!tls_dir.empty()) {
    grpc::SslServerCredentialsOptions opts(
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    opts.pem_root_certs = ReadFileText(tls_dir + "/ca.crt");
    opts.pem_key_cert_pairs.push_back(
        {ReadFileText(tls_dir + "/tls.key"), ReadFileText(tls_dir + "/tls.crt")});
    creds = grpc::SslServerCredentials(opts);
  }
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", creds, &port);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  ApplyTuning(kind, [&](const char* name, int v) { builder.AddChannelArgument(name, v); });
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) return 1;
  std::printf("%d\n", port);
  std::fflush(stdout);
  char c;
  while (::read(0, &c, 1) > 0) continue;  // until the parent closes our stdin
  server->Shutdown(std::chrono::system_clock::now());
  return 0;
}

std::shared_ptr<grpc::Channel> GrpcChannel(const std::string& kind, const std::string& tls_dir,
                                           int port, int index) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("lakecache.bench_channel", index);  // distinct args: a connection each
  ApplyTuning(kind, [&](const char* name, int v) { args.SetInt(name, v); });
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (!tls_dir.empty()) {
    grpc::SslCredentialsOptions opts;
    opts.pem_root_certs = ReadFileText(tls_dir + "/ca.crt");
    opts.pem_private_key = ReadFileText(tls_dir + "/tls.key");
    opts.pem_cert_chain = ReadFileText(tls_dir + "/tls.crt");
    creds = grpc::SslCredentials(opts);
    args.SetSslTargetNameOverride("localhost");
  }
  return grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port), creds, args);
}

const grpc::internal::RpcMethod& ReadBlockMethod() {
  static const grpc::internal::RpcMethod method("/lakecache.rpc.WorkerService/ReadBlock",
                                                grpc::internal::RpcMethod::SERVER_STREAMING);
  return method;
}

// Blocks read over one channel until `stop`; false on any failure.
bool GrpcReader(grpc::Channel* channel, std::span<char> buffer, SteadyClock::time_point stop,
                uint64_t* bytes) {
  rpc::ReadBlockRequest req;
  req.set_length(buffer.size());
  while (SteadyClock::now() < stop) {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader(
        grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(channel, ReadBlockMethod(),
                                                                      &ctx, req));
    grpc::ByteBuffer chunk;
    size_t got = 0;
    while (reader->Read(&chunk)) {
      if (!rpc::CopyChunk(chunk, buffer, &got).ok()) return false;
    }
    grpc::Status st = reader->Finish();
    if (!st.ok() || got != buffer.size()) {
      std::fprintf(stderr, "wire_bench: gRPC read failed: %s\n", st.error_message().c_str());
      return false;
    }
    *bytes += got;
  }
  return true;
}

// ---- framed TCP --------------------------------------------------------------------------------

int ServeFramed(const std::string& tls_dir, BlockRef block) {
  std::shared_ptr<const rpc::TlsContext> tls;
  if (!tls_dir.empty()) {
    auto loaded = rpc::TlsContext::Load(tls_dir, rpc::TlsContext::Side::kServer);
    if (!loaded.ok()) return std::fprintf(stderr, "%s\n", loaded.status().ToString().c_str()), 1;
    tls = *loaded;
  }
  Result<rpc::TcpListener> listener = rpc::ListenTcp("127.0.0.1:0");
  if (!listener.ok()) return 1;
  int fd = listener->fd;
  std::printf("%s\n", listener->address.substr(listener->address.rfind(':') + 1).c_str());
  std::fflush(stdout);
  std::thread([] {
    char c;
    while (::read(0, &c, 1) > 0) continue;
    ::_exit(0);
  }).detach();
  auto forever = SteadyClock::now() + std::chrono::hours(24);
  for (;;) {
    int client = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    std::thread([client, tls, block, forever] {
      auto conn = rpc::BulkConnection::Accept(client, "client", tls.get(), forever);
      if (!conn.ok()) return;
      for (bool closed = false; !closed;) {
        auto request = rpc::NextRequest(**conn, forever, &closed);
        if (!request.ok()) return;
        uint64_t n = std::min<uint64_t>(request->length, block->size());
        if (!rpc::SendReply(**conn, Status::Ok(), std::span<const char>(block->data(), n), forever)
                 .ok()) {
          return;
        }
      }
    }).detach();
  }
}

bool FramedReader(int port, const rpc::TlsContext* tls, std::span<char> buffer,
                  SteadyClock::time_point stop, uint64_t* bytes) {
  auto deadline = stop + std::chrono::seconds(30);
  auto conn = rpc::BulkConnection::Connect("127.0.0.1:" + std::to_string(port), tls, "", deadline);
  if (!conn.ok()) {
    std::fprintf(stderr, "wire_bench: %s\n", conn.status().ToString().c_str());
    return false;
  }
  rpc::BlockReadRequest req;
  req.length = buffer.size();
  while (SteadyClock::now() < stop) {
    auto reply = rpc::CallRead(**conn, req, buffer, deadline);
    if (!reply.ok() || !reply->status.ok() || reply->data_length != buffer.size()) {
      std::fprintf(stderr, "wire_bench: framed read failed: %s\n",
                   (reply.ok() ? reply->status : reply.status()).ToString().c_str());
      return false;
    }
    *bytes += reply->data_length;
  }
  return true;
}

// ---- the runs ----------------------------------------------------------------------------------

struct Server {
  pid_t pid = -1;
  int stdin_fd = -1;
  int port = 0;
};

Server Spawn(const std::string& kind, const std::string& tls_dir, size_t block_bytes) {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) return {};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::string block = std::to_string(block_bytes);
  std::vector<std::string> argv = {self, "--serve", kind, "--block-bytes", block};
  if (!tls_dir.empty()) argv.insert(argv.end(), {"--tls", tls_dir});
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  Server s;
  if (posix_spawn(&s.pid, self.c_str(), &actions, nullptr, cargv.data(), environ) != 0) return {};
  posix_spawn_file_actions_destroy(&actions);
  ::close(in[0]);
  ::close(out[1]);
  s.stdin_fd = in[1];
  char buf[32] = {0};
  ssize_t n = ::read(out[0], buf, sizeof(buf) - 1);
  ::close(out[0]);
  s.port = n > 0 ? std::atoi(buf) : 0;
  return s;
}

double ProcessCpuSeconds(pid_t pid) {
  std::string stat = ReadFileText("/proc/" + std::to_string(pid) + "/stat");
  std::istringstream in(stat.substr(stat.rfind(')') + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(field);  // utime, stime
  }
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

double SelfCpuSeconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) / 1e6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

struct Row {
  std::string kind;
  int connections;
  bool tls;
};

bool Measure(const Row& row, const std::string& tls_dir, size_t block_bytes, double seconds) {
  std::string dir = row.tls ? tls_dir : "";
  Server server = Spawn(row.kind, dir, block_bytes);
  if (server.port == 0) {
    std::fprintf(stderr, "wire_bench: the %s server did not start\n", row.kind.c_str());
    return false;
  }
  std::shared_ptr<const rpc::TlsContext> tls;
  if (row.tls && row.kind == "framed") {
    tls = *rpc::TlsContext::Load(tls_dir, rpc::TlsContext::Side::kClient);
  }
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < row.connections && row.kind != "framed"; ++i) {
    channels.push_back(GrpcChannel(row.kind, dir, server.port, i));
    channels.back()->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10));
  }
  std::vector<std::vector<char>> buffers(row.connections, std::vector<char>(block_bytes));
  for (auto& b : buffers) std::memset(b.data(), 0, b.size());  // faulted in before timing
  std::vector<uint64_t> bytes(row.connections, 0);
  std::atomic<bool> ok{true};
  double cpu0 = SelfCpuSeconds(), sender0 = ProcessCpuSeconds(server.pid);
  auto t0 = SteadyClock::now();
  auto stop = t0 + std::chrono::duration_cast<SteadyClock::duration>(
                       std::chrono::duration<double>(seconds));
  std::vector<std::thread> threads;
  for (int i = 0; i < row.connections; ++i) {
    threads.emplace_back([&, i] {
      std::span<char> buf(buffers[i]);
      bool good = row.kind == "framed" ? FramedReader(server.port, tls.get(), buf, stop, &bytes[i])
                                       : GrpcReader(channels[i].get(), buf, stop, &bytes[i]);
      if (!good) ok = false;
    });
  }
  for (auto& t : threads) t.join();
  double elapsed = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  double cpu = SelfCpuSeconds() - cpu0, sender = ProcessCpuSeconds(server.pid) - sender0;
  channels.clear();
  ::close(server.stdin_fd);
  ::kill(server.pid, SIGTERM);
  ::waitpid(server.pid, nullptr, 0);
  uint64_t total = 0;
  for (uint64_t b : bytes) total += b;
  double gb = double(total) / 1e9;
  std::printf("%-15s %5d  %-4s %8.0f %12.2f %12.2f\n", row.kind.c_str(), row.connections,
              row.tls ? "on" : "off", double(total) / 1e6 / elapsed, gb > 0 ? cpu / gb : 0.0,
              gb > 0 ? sender / gb : 0.0);
  std::fflush(stdout);
  return ok;
}

int Main(int argc, char** argv) {
  std::string serve, tls_dir, only;
  size_t block_bytes = 4 << 20;
  double seconds = 3;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--serve")
      serve = next();
    else if (a == "--tls")
      tls_dir = next();
    else if (a == "--block-bytes")
      block_bytes = std::stoull(next());
    else if (a == "--seconds")
      seconds = std::stod(next());
    else if (a == "--only")
      only = next();
    else {
      std::fprintf(stderr,
                   "usage: wire_bench [--seconds S (3)] [--block-bytes N (4 MiB)] "
                   "[--only grpc-product|grpc-tuned|grpc-tuned-bdp|framed]\n");
      return 2;
    }
  }
  std::shared_ptr<Block> block = Block::Allocate(block_bytes);
  for (size_t i = 0; i < block_bytes; ++i) block->mutable_data()[i] = static_cast<char>(i * 31);
  if (serve == "framed") return ServeFramed(tls_dir, block);
  if (!serve.empty()) return ServeGrpc(serve, tls_dir, block);

  char tmpl[] = "/tmp/wire-bench-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) return 1;
  std::string tmp = tmpl;
  if (Status made = security::MakeCredentials(tmp); !made.ok()) {
    std::fprintf(stderr, "wire_bench: %s\n", made.ToString().c_str());
    return 1;
  }
  std::printf(
      "%zu-byte blocks from memory on loopback, %.0f s a row; MB/s = 10^6 B/s; CPU-s per "
      "GB (10^9 B) of the receiver (this process) and the sender (server process)\n",
      block_bytes, seconds);
  std::printf("%-15s %5s  %-4s %8s %12s %12s\n", "transport", "conns", "TLS", "MB/s", "recv CPU/GB",
              "send CPU/GB");
  bool ok = true;
  for (const char* kind : {"grpc-product", "grpc-tuned", "grpc-tuned-bdp", "framed"}) {
    if (!only.empty() && only != kind) continue;
    for (bool tls : {false, true}) {
      for (int c : {1, 4}) ok = Measure({kind, c, tls}, tmp, block_bytes, seconds) && ok;
    }
  }
  std::filesystem::remove_all(tmp);
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace lakecache

int main(int argc, char** argv) { return lakecache::Main(argc, argv); }
