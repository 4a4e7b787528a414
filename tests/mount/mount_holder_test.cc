// The holder's protocol without FUSE: a waiting holder (in a thread) mounts a stand-in connection
// on the first hello and hands its descriptors over; a server with other settings is refused; a
// second one takes over once the first, told to stop, has gone; SIGTERM ends it, unmounting.
#include "mount/mount_holder.h"
#include "mount/holder_link.h"
#include "mount/holder_wire.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "support/test_servers.h"
#include "support/wait_for.h"

namespace lakecache {
namespace {

TEST(HolderMessageTest, FieldsRoundTripWithNewlinesAndBackslashes) {
  HolderMessage m{"hello", {{"mountpoint", "/mnt/a\nb\\c"}, {"options", "ro,fsname=x"}}};
  auto back = DecodeHolderMessage(EncodeHolderMessage(m));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->type, "hello");
  EXPECT_EQ(back->Get("mountpoint"), "/mnt/a\nb\\c");
  EXPECT_EQ(back->Get("options"), "ro,fsname=x");
  EXPECT_EQ(back->Get("absent"), "");
  EXPECT_FALSE(DecodeHolderMessage("").ok());
  EXPECT_FALSE(DecodeHolderMessage("hello\nno-equals\n").ok());
}

// The bytes a holder or server of an older release sends: a takeover may pair the two.
TEST(HolderMessageTest, TheWireIsTheOneEarlierReleasesSpeak) {
  HolderMessage m{"hello", {{"mountpoint", "/mnt/a\nb\\c"}, {"options", "ro,fsname=x"}}};
  const std::string wire = "hello\nmountpoint=/mnt/a\\nb\\\\c\noptions=ro,fsname=x\n";
  EXPECT_EQ(EncodeHolderMessage(m), wire);
  auto back = DecodeHolderMessage(wire);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->fields, m.fields);
}

class FakeConnection : public HeldConnection {
 public:
  explicit FakeConnection(std::atomic<int>* unmounts)
      : fd_(::memfd_create("fake-fuse", MFD_CLOEXEC)), unmounts_(unmounts) {}
  ~FakeConnection() override { ::close(fd_); }
  int fd() const override { return fd_; }
  void Unmount() override { ++*unmounts_; }

 private:
  int fd_;
  std::atomic<int>* unmounts_;
};

TEST(MountHolderTest, HandsTheMountToOneServerAtATimeAndRefusesOtherSettings) {
  testing::TempDir dir("lakecache-holder");
  std::atomic<int> mounts{0}, unmounts{0};
  MountHolderOptions options;
  options.socket_path = dir.path() + "/holder.sock";
  options.mount = [&](const std::string& mountpoint, const std::string& fuse_options,
                      int descriptors) -> Result<std::unique_ptr<HeldConnection>> {
    EXPECT_EQ(mountpoint, "/mnt/lake");
    EXPECT_EQ(descriptors, 1) << "what the first server asked for";
    EXPECT_EQ(fuse_options, "ro,fsname=lakecache");
    ++mounts;
    return std::unique_ptr<HeldConnection>(new FakeConnection(&unmounts));
  };
  Status ended;
  std::atomic<pthread_t> holder_thread{};
  std::thread holder([&] {
    holder_thread = pthread_self();
    ended = RunMountHolder(options);
  });
  auto connect = [&](const std::string& fuse_options) {
    testing::WaitFor([&] { return std::filesystem::exists(options.socket_path); });
    return HolderLink::Connect(options.socket_path, "/mnt/lake", fuse_options, 1,
                               std::chrono::seconds(10));
  };

  // The socket file appears when the holder binds it, a moment before it listens: the first
  // server asks until the holder answers.
  Result<std::unique_ptr<HolderLink>> first = Status::Unavailable("not asked");
  testing::WaitFor([&] {
    first = connect("ro,fsname=lakecache");
    return first.ok() || first.status().code() != StatusCode::kUnavailable;
  });
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(mounts, 1);
  EXPECT_TRUE((*first)->init().empty()) << "the first server captures the INIT";
  std::vector<int> fuse_fds = (*first)->TakeFuseFds();
  ASSERT_EQ(fuse_fds.size(), 1u);
  int fuse_fd = fuse_fds[0];
  int journal_fd = (*first)->TakeJournalFd();
  EXPECT_GE(fuse_fd, 0);
  EXPECT_GE(journal_fd, 0);
  ASSERT_EQ(::write(journal_fd, "state", 5), 5);
  (*first)->SendInit(std::string("INIT\0bytes", 10));
  (*first)->SendServing();
  std::atomic<bool> stopped{false};
  (*first)->Watch([&] { stopped = true; }, [] {});

  auto other = connect("ro,fsname=lakecache,allow_other");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("its FUSE settings differ"), std::string::npos)
      << other.status().ToString();
  EXPECT_FALSE(stopped) << "a refused server stops nobody";

  // A second server: the first is told to stop; the second gets the mount once the first goes.
  std::thread going([&] {
    testing::WaitFor([&] { return stopped.load(); });
    first->reset();
  });
  auto second = connect("ro,fsname=lakecache");
  going.join();
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_TRUE(stopped);
  EXPECT_EQ((*second)->init(), std::string("INIT\0bytes", 10));
  int journal2 = (*second)->TakeJournalFd();
  char got[5] = {};
  EXPECT_EQ(::pread(journal2, got, 5, 0), 5);
  EXPECT_EQ(std::string(got, 5), "state") << "the same journal";
  EXPECT_EQ(mounts, 1) << "mounted once";
  ::close(journal2);
  ::close(fuse_fd);
  ::close(journal_fd);

  pthread_kill(holder_thread, SIGTERM);
  holder.join();
  EXPECT_TRUE(ended.ok()) << ended.ToString();
  EXPECT_EQ(unmounts, 1);
  EXPECT_FALSE(std::filesystem::exists(options.socket_path));
}

}  // namespace
}  // namespace lakecache
