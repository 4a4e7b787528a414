#include "rpc/grpc_util.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "rpc/lakecache.grpc.pb.h"
#include "support/test_servers.h"

namespace lakecache::rpc {
namespace {

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

TEST(StartUnixServerTest, SocketIsOwnerOnlyWhateverTheUmaskAndTheUmaskStays) {
  testing::TempDir dir;
  std::string path = dir.path() + "/run/ctl.sock";  // the folder does not exist yet
  ScopedUmask umask(0);  // a socket made with the process umask would be 0777
  MasterService::Service service;
  auto server = StartUnixServer(path, {&service});
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_EQ(umask.current(), 0u) << "the process umask is left alone";
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto channel = OpenChannel("unix:" + path);
  EXPECT_TRUE(channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(5)))
      << "the socket moved into place still serves";
  for (const auto& entry : std::filesystem::directory_iterator(dir.path() + "/run")) {
    EXPECT_EQ(entry.path().filename(), "ctl.sock") << "nothing else is left next to the socket";
  }
  (*server)->Shutdown();
}

TEST(StartUnixServerTest, FolderThatCannotBeCreatedIsNamed) {
  testing::TempDir dir;
  ASSERT_TRUE(testing::WriteFile(dir.path() + "/file", "").ok());
  MasterService::Service service;
  auto server = StartUnixServer(dir.path() + "/file/run/ctl.sock", {&service});
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), StatusCode::kIoError);
  EXPECT_NE(server.status().message().find(dir.path() + "/file/run"), std::string::npos)
      << server.status().message();
}

}  // namespace
}  // namespace lakecache::rpc
