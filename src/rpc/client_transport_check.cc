#include "rpc/client_transport_check.h"

#include <arpa/inet.h>
#include <grpc/support/sync.h>
#include <grpcpp/impl/server_builder_option.h>
#include <grpcpp/support/channel_arguments.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <chrono>
#include <map>
#include <memory>

#include "common/mutex.h"

// gRPC's socket mutator, as src/core/lib/iomgr/socket_mutator.h defines it (1.27 and later): the
// public headers declare grpc_socket_mutator but not its members.
typedef enum {
  GRPC_FD_CLIENT_CONNECTION_USAGE,
  GRPC_FD_SERVER_LISTENER_USAGE,
  GRPC_FD_SERVER_CONNECTION_USAGE,
} grpc_fd_usage;

typedef struct {
  int fd;
  grpc_fd_usage usage;
} grpc_mutate_socket_info;

struct grpc_socket_mutator_vtable {
  bool (*mutate_fd)(int fd, grpc_socket_mutator* mutator);
  int (*compare)(grpc_socket_mutator* a, grpc_socket_mutator* b);
  void (*destroy)(grpc_socket_mutator* mutator);
  bool (*mutate_fd_2)(const grpc_mutate_socket_info* info, grpc_socket_mutator* mutator);
};

struct grpc_socket_mutator {
  const grpc_socket_mutator_vtable* vtable;
  gpr_refcount refcount;
};

namespace lakecache::rpc {
namespace {

// How long a listening socket holds a connection back for its first bytes. gRPC clients speak
// first; one that sends nothing is accepted after about this long all the same.
constexpr int kDeferAcceptSeconds = 2;
constexpr auto kQuietFor = std::chrono::minutes(10);  // per client address
constexpr size_t kMaxAddresses = 1024;                // remembered, the oldest forgotten

// The client addresses told about lately, shared by every server of the process.
class Recent {
 public:
  // Whether a line about `address` is due now (and so is the next one in kQuietFor).
  bool Due(const std::string& address) {
    auto now = std::chrono::steady_clock::now();
    MutexLock lock(&mu_);
    auto it = told_.find(address);
    if (it != told_.end() && now - it->second < kQuietFor) return false;
    if (told_.size() >= kMaxAddresses) told_.clear();
    told_[address] = now;
    return true;
  }

 private:
  Mutex mu_;
  std::map<std::string, std::chrono::steady_clock::time_point> told_ GUARDED_BY(mu_);
};

Recent& Told() {
  static Recent* recent = new Recent();  // never destroyed: gRPC threads may outlive main
  return *recent;
}

// "10.0.0.7", "::1": the connection's peer without its port (a client's port changes every time).
std::string PeerAddress(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "";
  char text[INET6_ADDRSTRLEN] = {0};
  if (addr.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&addr)->sin_addr, text, sizeof(text));
  } else if (addr.ss_family == AF_INET6) {
    const in6_addr& ip = reinterpret_cast<sockaddr_in6*>(&addr)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&ip)) {  // an IPv4 client of a dual-stack listener
      ::inet_ntop(AF_INET, &ip.s6_addr[12], text, sizeof(text));
    } else {
      ::inet_ntop(AF_INET6, &ip, text, sizeof(text));
    }
  }
  return text;
}

struct CheckingMutator {
  grpc_socket_mutator base;  // first: gRPC hands back a pointer to it
  Transport server;
};

void Inspect(int fd, Transport server) {
  char first[3];
  ssize_t n = ::recv(fd, first, sizeof(first), MSG_PEEK | MSG_DONTWAIT);
  if (n <= 0) return;  // nothing yet: nothing to say
  std::string peer = PeerAddress(fd);
  std::string line = ClientTransportMismatch(std::string_view(first, n), server, peer);
  if (!line.empty() && Told().Due(peer)) spdlog::warn("{}", line);
}

bool Mutate(const grpc_mutate_socket_info* info, grpc_socket_mutator* mutator) {
  auto* self = reinterpret_cast<CheckingMutator*>(mutator);
  if (info->usage == GRPC_FD_SERVER_LISTENER_USAGE) {
    int seconds = kDeferAcceptSeconds;
    ::setsockopt(info->fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &seconds, sizeof(seconds));
  } else if (info->usage == GRPC_FD_SERVER_CONNECTION_USAGE) {
    Inspect(info->fd, self->server);
  }
  return true;  // never a reason to refuse the socket
}

bool MutateOld(int, grpc_socket_mutator*) { return true; }

int Compare(grpc_socket_mutator* a, grpc_socket_mutator* b) { return a < b ? -1 : (a > b ? 1 : 0); }

void Destroy(grpc_socket_mutator* mutator) { delete reinterpret_cast<CheckingMutator*>(mutator); }

constexpr grpc_socket_mutator_vtable kVtable = {MutateOld, Compare, Destroy, Mutate};

class CheckOption : public grpc::ServerBuilderOption {
 public:
  explicit CheckOption(Transport server) : server_(server) {}
  void UpdateArguments(grpc::ChannelArguments* args) override {
    auto* mutator = new CheckingMutator{{&kVtable, {}}, server_};
    gpr_ref_init(&mutator->base.refcount, 1);
    args->SetSocketMutator(&mutator->base);  // takes the reference
  }
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>*) override {}

 private:
  const Transport server_;
};

}  // namespace

std::string ClientTransportMismatch(std::string_view first, Transport server,
                                    const std::string& peer) {
  std::string at = peer.empty() ? std::string("an unknown address") : peer;
  if (server == Transport::kTls && first.starts_with("PRI")) {
    return "a plain-text client at " + at +
           " called this TLS server: it needs --credentials DIR (or LAKECACHE_CREDENTIALS=DIR), "
           "DIR the cluster's credentials folder";
  }
  if (server == Transport::kPlainText && first.size() >= 2 && first[0] == 0x16 &&
      first[1] == 0x03) {
    return "a TLS client at " + at +
           " called this plain-text server: it was given --credentials (or "
           "LAKECACHE_CREDENTIALS), which this server was not; drop them there, or start this "
           "server with --credentials";
  }
  return "";
}

void AddClientTransportCheck(grpc::ServerBuilder& builder, Transport server) {
  builder.SetOption(std::make_unique<CheckOption>(server));
}

}  // namespace lakecache::rpc
