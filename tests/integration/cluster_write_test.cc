// Writes through a cluster mount (`lakecache mount --master`, no store credentials in its
// environment): every byte goes through a worker, which writes with its own credentials; the
// master's metadata cache shows the new object at once; the master's namespace flags guard
// deletes; a worker killed under a writer costs nothing (its part goes to the next worker).
// Real processes over s3rver; the write contract itself is pinned by write_test.cc.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "rpc/lakecache.grpc.pb.h"
#include "support/cluster_procs.h"
#include "support/store_options.h"
#include "support/test_data.h"
#include "support/test_servers.h"
#include "ufs/s3_store.h"

// Its own namespace: the files of integration_tests are compiled in unity batches.
namespace lakecache::cluster_write_test {
namespace {

using testing::MakeBytes;
using testing::ReadWholeFile;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kMiB = 1 << 20;
constexpr char kBucket[] = "out";

// The errno of the first failed call writing `content` to `path` in 1 MiB writes, or 0.
int WriteFile(const std::string& path, const std::string& content) {
  int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  for (size_t at = 0; at < content.size(); at += kMiB) {
    size_t n = std::min<size_t>(kMiB, content.size() - at);
    if (::write(fd, content.data() + at, n) != static_cast<ssize_t>(n)) {
      int err = errno;
      ::close(fd);
      return err;
    }
  }
  return ::close(fd) == 0 ? 0 : errno;
}

class ClusterWriteTest : public testing::ClusterProcessFixture {
 protected:
  static void SetUpTestSuite() {
    auto started = testing::S3rver::Start({.buckets = {kBucket}});
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    server_ = std::move(started).value().release();
  }

  void SetUp() override {
    SetUpScratch("lakecache-cluster-write");
    if (HasFatalFailure()) return;
    WriteConfig({{kBucket, server_->endpoint(), "4MiB", "10m"}});
    S3StoreOptions options = testing::StoreOptionsFor(*server_, kBucket);
    auto store = S3Store::Create(std::move(options));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
  }

  // The object's bytes in the store, or "<absent>".
  std::string Object(const std::string& key) {
    auto head = store_->Head(key, {});
    if (!head.ok()) return "<absent>";
    std::string buf(head->size + 1, '\0');
    auto n = store_->Read(key, 0, buf, ReadOptions{});
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    buf.resize(n.ok() ? *n : 0);
    return buf;
  }

  // The names the master's metadata cache lists in folder `dir` of the namespace.
  std::vector<std::string> MasterListing(const std::string& dir) {
    auto stub =
        rpc::MasterService::NewStub(security::MasterChannel(master_address_, Admin().get()));
    grpc::ClientContext ctx;
    rpc::SetTimeout(&ctx, std::chrono::seconds(5));
    rpc::ListDirRequest req;
    req.set_ns(kBucket);
    req.set_dir(dir);
    rpc::ListDirResponse resp;
    grpc::Status st = stub->ListDir(&ctx, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    std::vector<std::string> names;
    for (const rpc::ObjectEntry& e : resp.files()) names.push_back(e.key());
    for (const std::string& d : resp.dirs()) names.push_back(d);
    return names;
  }

  static bool Contains(const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  }

  std::string ns_root() const { return mountpoint_ + "/" + kBucket; }

  std::unique_ptr<S3Store> store_;
};

TEST_F(ClusterWriteTest, AMountWithoutCredentialsWritesThroughTheWorkers) {
  ASSERT_TRUE(server_->PutObjects(kBucket, {{"ckpt/old.txt", "old"}}).ok());
  StartCluster({{"256MiB", "1GiB"}, {"256MiB", "1GiB"}});
  ASSERT_FALSE(HasFatalFailure());
  // The master's listing of ckpt/ is cached (10 minutes) before anything is written.
  EXPECT_FALSE(Contains(MasterListing("ckpt"), "ckpt/model.pt"));
  Mount();
  ASSERT_FALSE(HasFatalFailure());
  std::ifstream mounts("/proc/mounts");
  std::string line;
  bool rw = false;
  while (std::getline(mounts, line)) {
    if (line.find(" " + mountpoint_ + " ") != std::string::npos)
      rw = line.find(" rw,") != line.npos;
  }
  EXPECT_TRUE(rw) << "a cluster mount of a writable namespace is mounted rw";
  // 30 MiB: a multipart upload of four parts, each streamed to a worker; and a one-Put file.
  std::string model = MakeBytes(7, 30 * kMiB + 3);
  ASSERT_EQ(WriteFile(ns_root() + "/ckpt/model.pt", model), 0);
  ASSERT_EQ(WriteFile(ns_root() + "/ckpt/step.txt", "1200\n"), 0);
  ASSERT_EQ(::mkdir((ns_root() + "/logs").c_str(), 0755), 0) << std::strerror(errno);
  EXPECT_TRUE(Object("ckpt/model.pt") == model);
  EXPECT_EQ(Object("ckpt/step.txt"), "1200\n");
  EXPECT_EQ(Object("logs/"), "");
  // The master's cached listing shows the new objects at once, its TTL notwithstanding.
  std::vector<std::string> listed = MasterListing("ckpt");
  EXPECT_TRUE(Contains(listed, "ckpt/model.pt"));
  EXPECT_TRUE(Contains(listed, "ckpt/step.txt"));
  EXPECT_TRUE(Contains(MasterListing(""), "logs/"));
  // Read back through the cluster.
  EXPECT_TRUE(ReadWholeFile(ns_root() + "/ckpt/model.pt").bytes == model);
  // The mount's log shows no credentials were needed or used.
  std::ifstream log(dir_->path() + "/mount.log");
  std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.find("S3RVER"), std::string::npos);
}

TEST_F(ClusterWriteTest, DeletesFollowTheMastersFlags) {
  ASSERT_TRUE(server_->PutObjects(kBucket, {{"keep.txt", "keep"}}).ok());
  StartCluster({{"64MiB", "256MiB"}});
  ASSERT_FALSE(HasFatalFailure());
  Mount();
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_EQ(::unlink((ns_root() + "/keep.txt").c_str()) == 0 ? 0 : errno, EPERM);
  EXPECT_EQ(WriteFile(ns_root() + "/keep.txt", "clobbered"), EPERM);
  EXPECT_EQ(Object("keep.txt"), "keep");
  ASSERT_EQ(WriteFile(ns_root() + "/new.txt", "new"), 0);
  EXPECT_EQ(Object("new.txt"), "new");
}

TEST_F(ClusterWriteTest, AWorkerKilledUnderAWriterCostsNothing) {
  StartCluster({{"64MiB", "256MiB"}, {"64MiB", "256MiB"}});
  ASSERT_FALSE(HasFatalFailure());
  Mount();
  ASSERT_FALSE(HasFatalFailure());
  std::string content = MakeBytes(9, 96 * kMiB);
  int fd = ::open((ns_root() + "/survivor.bin").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  int err = 0;
  for (size_t at = 0; at < content.size() && err == 0; at += kMiB) {
    if (at == 40 * kMiB) {
      // Parts are on their way to both workers now: one of them dies.
      ASSERT_EQ(::kill(workers_[0].process->pid(), SIGKILL), 0);
    }
    if (::write(fd, content.data() + at, kMiB) != static_cast<ssize_t>(kMiB)) err = errno;
  }
  if (::close(fd) != 0 && err == 0) err = errno;
  EXPECT_EQ(err, 0) << std::strerror(err);
  EXPECT_TRUE(Object("survivor.bin") == content);
  // Parts spread over both workers: some were on their way to the one killed.
  std::ifstream log(dir_->path() + "/mount.log");
  std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("trying the next worker"), std::string::npos) << text;
}

}  // namespace
}  // namespace lakecache::cluster_write_test
