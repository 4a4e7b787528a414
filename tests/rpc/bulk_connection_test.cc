// BulkConnection and the bulk exchange over a real loopback TCP connection: a reply whose bytes
// lie in a file (a worker's memfd) reaches the client whole, and a peer on this host is known as
// such (its replies are written from memory, not spliced from the file).
#include "rpc/bulk_connection.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "rpc/bulk_protocol.h"

namespace lakecache::rpc {
namespace {

using std::chrono::seconds;
using std::chrono::steady_clock;

TEST(BulkConnectionTest, AReplyFromAFileReachesAClientOnThisHostWhole) {
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(listener, 1), 0);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);

  // The bytes as a worker holds them: in a memfd, and mapped.
  constexpr size_t kBytes = 3 << 20;
  int memfd = ::memfd_create("bulk-test", MFD_CLOEXEC);
  ASSERT_GE(memfd, 0);
  ASSERT_EQ(::ftruncate(memfd, kBytes + 4096), 0);
  char* map = static_cast<char*>(
      ::mmap(nullptr, kBytes + 4096, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0));
  ASSERT_NE(map, MAP_FAILED);
  for (size_t i = 0; i < kBytes + 4096; ++i) map[i] = static_cast<char>(i * 7 + i / 4096);

  auto deadline = steady_clock::now() + seconds(30);
  bool same_host = false;
  std::thread server([&] {
    int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    ASSERT_GE(fd, 0);
    std::unique_ptr<BulkConnection> c = BulkConnection::Adopt(fd, "client");
    same_host = c->same_host();
    bool closed = false;
    Result<BlockReadRequest> request = NextRequest(*c, deadline, &closed);
    ASSERT_TRUE(request.ok()) << request.status().ToString();
    std::span<const char> data(map + 4096 + request->offset, request->length);
    ASSERT_TRUE(SendReply(*c, Status::Ok(), data, deadline, memfd, 4096 + request->offset).ok());
    (void)NextRequest(*c, deadline, &closed);  // the client's hang-up
  });
  char where[INET_ADDRSTRLEN];
  ::inet_ntop(AF_INET, &addr.sin_addr, where, sizeof(where));
  auto client = BulkConnection::Connect(
      std::string(where) + ":" + std::to_string(ntohs(addr.sin_port)), nullptr, "", deadline);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  BlockReadRequest request;
  request.block.set_ns("n");
  request.block.set_key("k");
  request.offset = 1000;
  request.length = kBytes - 1000;
  std::vector<char> got(kBytes);
  Result<BlockReplyHeader> reply = CallRead(**client, request, got, deadline);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  ASSERT_TRUE(reply->status.ok());
  ASSERT_EQ(reply->data_length, kBytes - 1000);
  EXPECT_EQ(std::memcmp(got.data(), map + 4096 + 1000, kBytes - 1000), 0);
  client->reset();
  server.join();
  EXPECT_TRUE(same_host);
  ::munmap(map, kBytes + 4096);
  ::close(memfd);
  ::close(listener);
}

}  // namespace
}  // namespace lakecache::rpc
