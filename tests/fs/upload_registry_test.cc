#include "fs/upload_registry.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "support/test_servers.h"
#include "support/wait_for.h"
#include "ufs/fault_injecting_store.h"
#include "ufs/local_store.h"

namespace lakecache {
namespace {

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The pid of a process that has exited and been reaped.
pid_t DeadPid() {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

using testing::WaitFor;
bool WaitUntil(const std::function<bool()>& done) { return WaitFor(done); }

// A registry file in a temp dir, and a LocalStore in another, behind a FaultInjectingStore.
class UploadRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    local_ = std::make_shared<LocalStore>(data_.path());
    store_ = std::make_shared<FaultInjectingStore>(local_);
  }

  std::string FileOf(pid_t pid) const { return base_ + "." + std::to_string(pid); }

  // A real multipart upload to `key` with one part.
  UploadRecord StartUpload(const std::string& key) {
    auto id = local_->CreateMultipartUpload(key, {});
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    std::string part = "some bytes";
    EXPECT_TRUE(local_->UploadPart(key, *id, 1, part, {}).ok());
    return {"ns", key, id.ok() ? *id : ""};
  }

  size_t PendingUploads() {
    auto pending = local_->ListMultipartUploads("", {});
    EXPECT_TRUE(pending.ok()) << pending.status().ToString();
    return pending.ok() ? pending->size() : 0;
  }

  static std::string Line(const UploadRecord& r) {
    return EscapeField(r.ns) + "\t" + EscapeField(r.key) + "\t" + EscapeField(r.upload_id) + "\n";
  }

  testing::TempDir run_{"lakecache-registry"};
  testing::TempDir data_{"lakecache-registry-data"};
  const std::string base_ = run_.path() + "/uploads";
  std::shared_ptr<LocalStore> local_;
  std::shared_ptr<FaultInjectingStore> store_;
};

TEST_F(UploadRegistryTest, AddAndRemoveRewriteTheFileOfThisProcess) {
  const std::string file = FileOf(::getpid());
  UploadRecord a{"ns", "dir/a.bin", "id1"};
  UploadRecord b{"ns", "odd\tkey\n%", "id2"};
  {
    UploadRegistry registry(base_);
    registry.Add(a);
    EXPECT_EQ(ReadText(file), "ns\tdir/a.bin\tid1\n");
    registry.Add(b);
    EXPECT_EQ(ReadText(file), "ns\tdir/a.bin\tid1\nns\todd%09key%0A%25\tid2\n");
    registry.Remove(a);
    EXPECT_EQ(ReadText(file), "ns\todd%09key%0A%25\tid2\n");
    registry.Remove(a);  // not there any more: nothing changes
    EXPECT_EQ(ReadText(file), "ns\todd%09key%0A%25\tid2\n");
    registry.Remove(b);
    EXPECT_EQ(ReadText(file), "");
  }
  EXPECT_FALSE(std::filesystem::exists(file)) << "a server that ends with nothing open leaves none";
}

TEST_F(UploadRegistryTest, EmptyBaseWritesNothing) {
  UploadRegistry registry("");
  registry.Add({"ns", "k", "id"});
  EXPECT_TRUE(registry.Leftovers().empty());
  EXPECT_TRUE(std::filesystem::is_empty(run_.path()));
  registry.Remove({"ns", "k", "id"});
}

TEST_F(UploadRegistryTest, LeftoverOfADeadServerIsAbortedAndItsFileRemoved) {
  UploadRecord left = StartUpload("data/left.bin");
  UploadRecord live = StartUpload("data/live.bin");
  const std::string dead_file = FileOf(DeadPid());
  const std::string live_file = FileOf(1);  // init never dies
  ASSERT_TRUE(testing::WriteFile(dead_file, Line(left)).ok());
  ASSERT_TRUE(testing::WriteFile(live_file, Line(live)).ok());
  ASSERT_EQ(PendingUploads(), 2u);

  UploadRegistry registry(base_);
  EXPECT_EQ(registry.Leftovers(), (std::vector<UploadRecord>{left}));
  registry.AbortLeftovers([this](const std::string& ns) -> std::shared_ptr<ObjectStore> {
    return ns == "ns" ? store_ : nullptr;
  });
  ASSERT_TRUE(WaitUntil([&] { return !std::filesystem::exists(dead_file); }));
  EXPECT_TRUE(WaitUntil([&] { return registry.pending_aborts() == 0; }));
  EXPECT_EQ(registry.aborted(), 1u);
  auto pending = local_->ListMultipartUploads("", {});
  ASSERT_TRUE(pending.ok());
  ASSERT_EQ(pending->size(), 1u);
  EXPECT_EQ((*pending)[0].upload_id, live.upload_id) << "a live server's upload is its own";
  EXPECT_EQ(ReadText(live_file), Line(live));
}

TEST_F(UploadRegistryTest, LeftoverOfANamespaceNoLongerConfiguredIsKept) {
  UploadRecord left = StartUpload("data/left.bin");
  const std::string dead_file = FileOf(DeadPid());
  ASSERT_TRUE(testing::WriteFile(dead_file, Line(left)).ok());
  UploadRegistry registry(base_);
  registry.AbortLeftovers([](const std::string&) { return nullptr; });
  EXPECT_EQ(registry.pending_aborts(), 0u);
  EXPECT_EQ(store_->Calls(StoreOp::kAbortUpload), 0);
  EXPECT_EQ(ReadText(dead_file), Line(left)) << "kept for a server that knows the namespace";
  EXPECT_EQ(PendingUploads(), 1u);
}

TEST_F(UploadRegistryTest, AbortIsRetriedUntilTheStoreAnswers) {
  UploadRecord upload = StartUpload("data/x.bin");
  store_->FailNext(StoreOp::kAbortUpload, store_->ServerError("data/x.bin"), 2);
  UploadRegistry registry(base_);
  registry.Add(upload);
  registry.AbortLater(store_, upload);
  ASSERT_TRUE(WaitUntil([&] { return registry.pending_aborts() == 0; }));
  EXPECT_EQ(registry.aborted(), 1u);
  EXPECT_EQ(store_->Calls(StoreOp::kAbortUpload), 3);
  EXPECT_EQ(PendingUploads(), 0u);
  EXPECT_EQ(ReadText(FileOf(::getpid())), "") << "the aborted upload is no longer recorded";
}

// pending_aborts() counts an abort until the store has answered it, not only until it is sent.
TEST_F(UploadRegistryTest, AbortInFlightIsStillPending) {
  UploadRecord upload = StartUpload("data/slow.bin");
  FaultRule slow;
  slow.op = StoreOp::kAbortUpload;
  slow.delay = std::chrono::milliseconds(500);
  store_->AddRule(slow);
  UploadRegistry registry(base_);
  registry.AbortLater(store_, upload);
  EXPECT_TRUE(WaitUntil([&] { return store_->Calls(StoreOp::kAbortUpload) == 1; }));
  size_t pending = registry.pending_aborts();
  uint64_t aborted = registry.aborted();
  EXPECT_TRUE(pending == 1 || aborted == 1) << "pending " << pending << ", aborted " << aborted;
  ASSERT_TRUE(WaitUntil([&] { return registry.pending_aborts() == 0; }));
  EXPECT_EQ(registry.aborted(), 1u);
  EXPECT_EQ(PendingUploads(), 0u);
}

TEST(EscapeFieldTest, RoundTripsTabsNewlinesAndPercents) {
  for (std::string field :
       {"", "plain/key.bin", "a\tb", "line\nbreak\r", "100%", "%09", "%", "\t\n%\r%%", "end%2"}) {
    std::string escaped = EscapeField(field);
    EXPECT_EQ(escaped.find_first_of("\t\n\r"), std::string::npos) << escaped;
    EXPECT_EQ(UnescapeField(escaped), field) << escaped;
  }
  EXPECT_EQ(EscapeField("a\tb%"), "a%09b%25");
  EXPECT_EQ(UnescapeField("odd%09key%0a%25%zz%"), "odd\tkey\n%%zz%");  // as older lines read
}

}  // namespace
}  // namespace lakecache
