#include "rpc/unix_server.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <thread>

#include "rpc/grpc_util.h"
#include "rpc/lakecache.grpc.pb.h"
#include "support/test_servers.h"
#include "support/wait_for.h"

namespace lakecache::rpc {
namespace {

constexpr uid_t kNobody = 65534;

// Sets the process umask for one test and puts the old one back.
class ScopedUmask {
 public:
  explicit ScopedUmask(mode_t mask) : old_(::umask(mask)) {}
  ~ScopedUmask() { ::umask(old_); }
  mode_t current() const {
    mode_t now = ::umask(0);
    ::umask(now);
    return now;
  }

 private:
  const mode_t old_;
};

// Answers GetClusterView with epoch 7, so a call that succeeds was served by this server.
class SevenService final : public MasterService::Service {
  grpc::Status GetClusterView(grpc::ServerContext*, const ClusterViewRequest*,
                              ClusterView* view) override {
    view->set_epoch(7);
    return grpc::Status::OK;
  }
};

UnixServerOptions At(const std::string& path, std::vector<uid_t> allowed = {}) {
  UnixServerOptions options;
  options.path = path;
  options.allowed_uids = std::move(allowed);
  return options;
}

grpc::Status AskEpoch(const std::string& path, uint64_t* epoch) {
  auto stub = MasterService::NewStub(OpenChannel("unix:" + path));
  grpc::ClientContext context;
  SetTimeout(&context, std::chrono::seconds(5));
  ClusterView view;
  grpc::Status s = stub->GetClusterView(&context, ClusterViewRequest(), &view);
  *epoch = view.epoch();
  return s;
}

enum PeerOutcome { kServed = 0, kRefused = 1, kCannotConnect = 2, kCannotSetUid = 3, kDied = 4 };

// In a child running as `uid`: connects to `path`, opens an HTTP/2 connection (the client preface
// and an empty SETTINGS frame) and waits for the server's SETTINGS frame (served) or the end of
// the connection (refused). The child makes no gRPC call: gRPC's threads do not survive fork.
PeerOutcome ConnectAs(uid_t uid, const std::string& path) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgid(uid) != 0 || ::setuid(uid) != 0) ::_exit(kCannotSetUid);
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      ::_exit(kCannotConnect);
    }
    static const char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\4\0\0\0\0\0";
    (void)!::send(fd, kPreface, sizeof(kPreface) - 1, MSG_NOSIGNAL);  // may meet a closed socket
    unsigned char header[9];
    size_t got = 0;
    while (got < sizeof(header)) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 5000) != 1) ::_exit(kRefused);
      ssize_t n = ::read(fd, header + got, sizeof(header) - got);
      if (n <= 0) ::_exit(kRefused);
      got += static_cast<size_t>(n);
    }
    ::_exit(header[3] == 4 ? kServed : kRefused);  // frame type 4: SETTINGS
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? static_cast<PeerOutcome>(WEXITSTATUS(status)) : kDied;
}

// This process's open sockets (what a server and its connections hold); gRPC's own eventfds,
// pipes and epoll descriptors, which it makes and drops as its threads come and go, are not
// counted.
size_t OpenDescriptors() {
  size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    std::string target = std::filesystem::read_symlink(entry.path(), ec).string();
    if (!ec && target.starts_with("socket:")) ++n;
  }
  return n;
}

TEST(UnixServerTest, SocketIsOwnerOnlyWhateverTheUmaskAndTheUmaskStays) {
  testing::TempDir dir;
  std::string path = dir.path() + "/run/ctl.sock";  // the folder does not exist yet
  ScopedUmask umask(0);  // a socket made with the process umask would be 0777
  SevenService service;
  auto server = StartUnixServer(At(path), {&service});
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_EQ(umask.current(), 0u) << "the process umask is left alone";
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  uint64_t epoch = 0;
  grpc::Status s = AskEpoch(path, &epoch);
  EXPECT_TRUE(s.ok()) << "the socket moved into place still serves: " << s.error_message();
  EXPECT_EQ(epoch, 7u);
  for (const auto& entry : std::filesystem::directory_iterator(dir.path() + "/run")) {
    EXPECT_EQ(entry.path().filename(), "ctl.sock") << "nothing else is left next to the socket";
  }
}

TEST(UnixServerTest, SocketIsOpenToAllWhenOtherUidsAreAllowed) {
  testing::TempDir dir;
  std::string path = dir.path() + "/ctl.sock";
  SevenService service;
  auto server = StartUnixServer(At(path, {kNobody}), {&service});
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666u) << "the uid check is the gate";
}

TEST(UnixServerTest, FolderThatCannotBeCreatedIsNamed) {
  testing::TempDir dir;
  ASSERT_TRUE(testing::WriteFile(dir.path() + "/file", "").ok());
  SevenService service;
  auto server = StartUnixServer(At(dir.path() + "/file/run/ctl.sock"), {&service});
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), StatusCode::kIoError);
  EXPECT_NE(server.status().message().find(dir.path() + "/file/run"), std::string::npos)
      << server.status().message();
}

TEST(UnixServerTest, LiveSocketIsNotTakenOverAndAStaleOneIs) {
  testing::TempDir dir;
  std::string path = dir.path() + "/ctl.sock";
  SevenService service;
  auto first = StartUnixServer(At(path), {&service});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = StartUnixServer(At(path), {&service});
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("in use by another process"), std::string::npos)
      << second.status().message();

  // A socket file nobody listens on, as a killed mount leaves it.
  std::string stale = dir.path() + "/stale.sock";
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, stale.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ::close(fd);
  auto replaced = StartUnixServer(At(stale), {&service});
  ASSERT_TRUE(replaced.ok()) << replaced.status().ToString();
  uint64_t epoch = 0;
  EXPECT_TRUE(AskEpoch(stale, &epoch).ok());
}

// The socket is mode 0666 (another uid is allowed), so only the uid check stands between nobody
// and the service.
TEST(UnixServerTest, PeerOfAUidNotAllowedIsRefusedWhileTheOwnersCallsWork) {
  ASSERT_EQ(::geteuid(), 0u) << "needs root, to connect as another uid (the suite runs as root)";
  testing::TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  std::string path = dir.path() + "/ctl.sock";
  SevenService service;
  auto server = StartUnixServer(At(path, {kNobody - 1}), {&service});
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_EQ(ConnectAs(kNobody, path), kRefused);
  EXPECT_EQ(ConnectAs(kNobody, path), kRefused);
  EXPECT_EQ((*server)->peers_refused(), 2u);
  uint64_t epoch = 0;
  grpc::Status s = AskEpoch(path, &epoch);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(epoch, 7u);
}

TEST(UnixServerTest, AllowedUidIsServed) {
  ASSERT_EQ(::geteuid(), 0u) << "needs root, to connect as another uid (the suite runs as root)";
  testing::TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  std::string path = dir.path() + "/ctl.sock";
  SevenService service;
  auto server = StartUnixServer(At(path, {kNobody}), {&service});
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_EQ(ConnectAs(kNobody, path), kServed);
  EXPECT_EQ((*server)->peers_refused(), 0u);
}

TEST(UnixServerTest, ShutdownLeavesNoDescriptorThreadOrSocketFile) {
  testing::TempDir dir;
  std::string path = dir.path() + "/ctl.sock";
  SevenService service;
  uint64_t epoch = 0;
  {  // gRPC's own process-wide descriptors are made on first use
    auto warm = StartUnixServer(At(path), {&service});
    ASSERT_TRUE(warm.ok());
    ASSERT_TRUE(AskEpoch(path, &epoch).ok());
  }
  size_t before = OpenDescriptors();
  auto server = StartUnixServer(At(path), {&service});
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  ASSERT_TRUE(AskEpoch(path, &epoch).ok());
  (*server)->Shutdown();
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(AskEpoch(path, &epoch).ok());
  (*server)->Shutdown();  // idempotent
  server->reset();
  // gRPC closes a connection's descriptor on its own threads, soon after: the warm-up's too, which
  // a slow (sanitized) build may still hold when `before` is counted, hence at most.
  testing::WaitFor([&] { return OpenDescriptors() <= before; });
  EXPECT_LE(OpenDescriptors(), before);
}

}  // namespace
}  // namespace lakecache::rpc
