#include "fs/object_upload.h"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/mutex.h"
#include "common/thread_pool.h"
#include "common/write_budget.h"
#include "fs/upload_registry.h"
#include "support/test_servers.h"
#include "support/wait_for.h"
#include "ufs/fault_injecting_store.h"
#include "ufs/local_store.h"

namespace lakecache {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kKiB = 1ull << 10;

// Bytes no two offsets of which are likely to match, so a part out of place shows.
std::string Bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string out(n, '\0');
  for (char& c : out) c = static_cast<char>(rng());
  return out;
}

// Remembers the size each part number was last uploaded with.
class PartRecorder : public ObjectStoreWrapper {
 public:
  using ObjectStoreWrapper::ObjectStoreWrapper;

  Result<std::string> UploadPart(std::string_view key, std::string_view upload_id, int part_number,
                                 std::span<const char> data, const IoOptions& options) override {
    {
      MutexLock lock(&mu_);
      sizes_[part_number] = data.size();
    }
    return ObjectStoreWrapper::UploadPart(key, upload_id, part_number, data, options);
  }

  // Part sizes by part number, from part 1.
  std::vector<uint64_t> Sizes() const {
    MutexLock lock(&mu_);
    std::vector<uint64_t> out;
    for (const auto& [number, size] : sizes_) out.push_back(size);
    return out;
  }

 private:
  mutable Mutex mu_;
  std::map<int, uint64_t> sizes_ GUARDED_BY(mu_);
};

// Small parts: 5, 5, 10, 10, 10... MiB, two in flight.
UploadOptions SmallParts() {
  UploadOptions o;
  o.first_part_size = kMinPartSize;
  o.max_part_size = 10 * kMiB;
  o.parts_per_step = 2;
  o.parts_in_flight = 2;
  return o;
}

// ObjectUploads to a LocalStore in a temp dir, behind a FaultInjectingStore and a PartRecorder.
class ObjectUploadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    local_ = std::make_shared<LocalStore>(dir_.path());
    faults_ = std::make_shared<FaultInjectingStore>(local_);
    store_ = std::make_shared<PartRecorder>(faults_);
  }

  std::unique_ptr<ObjectUpload> Upload(const std::string& key, UploadOptions options = SmallParts(),
                                       WriteBudget* budget = nullptr) {
    return std::make_unique<ObjectUpload>(store_, "ns", key, options,
                                          budget != nullptr ? budget : &budget_, &pool_, &registry_,
                                          &counters_);
  }

  // Appends `data` in pieces of `chunk` bytes, failing the test on an error.
  static void AppendAll(ObjectUpload& upload, const std::string& data, size_t chunk) {
    for (size_t at = 0; at < data.size(); at += chunk) {
      size_t n = std::min(chunk, data.size() - at);
      Status s = upload.Append(std::span<const char>(data.data() + at, n));
      ASSERT_TRUE(s.ok()) << "at " << at << ": " << s.ToString();
    }
  }

  // The object's bytes, or "<error>" when it cannot be read.
  std::string Object(const std::string& key) {
    auto info = local_->Head(key, {});
    if (!info.ok()) return "<" + info.status().ToString() + ">";
    std::string out(info->size, '\0');
    auto read = local_->Read(key, 0, std::span<char>(out.data(), out.size()), {});
    if (!read.ok()) return "<" + read.status().ToString() + ">";
    out.resize(*read);
    return out;
  }

  size_t PendingUploads() {
    auto pending = local_->ListMultipartUploads("", {});
    EXPECT_TRUE(pending.ok()) << pending.status().ToString();
    return pending.ok() ? pending->size() : 0;
  }

  // Waits until the registry has no abort left.
  bool AbortsSettle() {
    return testing::WaitFor([this] { return registry_.pending_aborts() == 0; });
  }

  testing::TempDir dir_{"lakecache-upload"};
  std::shared_ptr<LocalStore> local_;
  std::shared_ptr<FaultInjectingStore> faults_;
  std::shared_ptr<PartRecorder> store_;
  WriteBudget budget_{64 * kMiB};
  ThreadPool pool_{4};
  UploadRegistry registry_{""};
  UploadCounters counters_;
};

TEST_F(ObjectUploadTest, SmallFileIsOnePut) {
  std::string data = Bytes(100 * kKiB + 3, 1);
  auto upload = Upload("dir/small.bin");
  AppendAll(*upload, data, 7 * kKiB);
  auto info = upload->Commit();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->size, data.size());
  EXPECT_EQ(Object("dir/small.bin"), data);
  EXPECT_EQ(faults_->Calls(StoreOp::kPut), 1);
  EXPECT_EQ(faults_->Calls(StoreOp::kCreateUpload), 0);
  EXPECT_EQ(counters_.puts.load(), 1u);
  EXPECT_EQ(counters_.parts.load(), 0u);
  EXPECT_EQ(PendingUploads(), 0u);
  EXPECT_EQ(budget_.used(), 0u);
}

TEST_F(ObjectUploadTest, EmptyFileIsOneEmptyPut) {
  auto upload = Upload("empty");
  auto info = upload->Commit();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->size, 0u);
  EXPECT_EQ(Object("empty"), "");
  EXPECT_EQ(faults_->Calls(StoreOp::kPut), 1);
}

TEST_F(ObjectUploadTest, LargeFileInOddAppendsIsExactAndItsPartsGrow) {
  std::string data = Bytes(112 * 300 * kKiB, 2);  // 32.8 MiB: parts of 5, 5, 10, 10, 2.8 MiB
  auto upload = Upload("big.bin");
  AppendAll(*upload, data, 300 * kKiB);
  auto info = upload->Commit();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->size, data.size());
  EXPECT_EQ(Object("big.bin"), data);
  EXPECT_EQ(store_->Sizes(), (std::vector<uint64_t>{5 * kMiB, 5 * kMiB, 10 * kMiB, 10 * kMiB,
                                                    data.size() - 30 * kMiB}));
  EXPECT_EQ(counters_.parts.load(), 5u);
  EXPECT_EQ(counters_.part_bytes.load(), data.size());
  EXPECT_EQ(counters_.completed.load(), 1u);
  EXPECT_EQ(counters_.puts.load(), 0u);
  EXPECT_EQ(PendingUploads(), 0u);
  EXPECT_EQ(budget_.used(), 0u);
  EXPECT_LE(budget_.peak(), 3 * 10 * kMiB) << "(parts_in_flight + 1) x max_part_size";
}

TEST_F(ObjectUploadTest, FlushUploadsTheFillingPartAndLaterWritesReplaceIt) {
  std::string data = Bytes(6 * kMiB + 300 * kKiB, 3);
  auto upload = Upload("flushed.bin");
  AppendAll(*upload, data.substr(0, 2 * kMiB), 300 * kKiB);
  Status flushed = upload->Flush();
  ASSERT_TRUE(flushed.ok()) << flushed.ToString();
  EXPECT_EQ(store_->Sizes(), (std::vector<uint64_t>{2 * kMiB}));
  EXPECT_EQ(PendingUploads(), 1u) << "fsynced bytes are in the store";
  EXPECT_EQ(local_->Head("flushed.bin", {}).status().code(), StatusCode::kNotFound)
      << "but not visible before Commit";

  // Part 1 fills up and is sent again whole; part 2 is flushed half full, then grows.
  AppendAll(*upload, data.substr(2 * kMiB, 4 * kMiB), 300 * kKiB);
  flushed = upload->Flush();
  ASSERT_TRUE(flushed.ok()) << flushed.ToString();
  EXPECT_EQ(store_->Sizes(), (std::vector<uint64_t>{5 * kMiB, 1 * kMiB}));
  AppendAll(*upload, data.substr(6 * kMiB), 100 * kKiB);
  auto info = upload->Commit();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(Object("flushed.bin"), data);
  EXPECT_EQ(store_->Sizes(), (std::vector<uint64_t>{5 * kMiB, 1 * kMiB + 300 * kKiB}));
  EXPECT_EQ(PendingUploads(), 0u);
  EXPECT_EQ(budget_.used(), 0u);
}

TEST_F(ObjectUploadTest, FailedPartFailsEveryLaterCallAndAbortsTheUpload) {
  FaultRule rule;
  rule.op = StoreOp::kUploadPart;
  rule.part_number = 2;
  rule.status = faults_->ServerError("failing.bin");
  faults_->AddRule(rule);
  std::string data = Bytes(12 * kMiB, 4);
  auto upload = Upload("failing.bin");
  // Parts 1 and 2 are sent; part 2 may fail before or after these appends return.
  for (size_t at = 0; at < data.size(); at += 300 * kKiB) {
    (void)upload->Append(
        std::span<const char>(data.data() + at, std::min<size_t>(300 * kKiB, data.size() - at)));
  }
  Status flushed = upload->Flush();
  EXPECT_EQ(flushed.code(), StatusCode::kUnavailable) << flushed.ToString();
  EXPECT_NE(flushed.message().find("part 2"), std::string::npos) << flushed.ToString();
  EXPECT_EQ(upload->Append(std::span<const char>("x", 1)).code(), StatusCode::kUnavailable);
  auto info = upload->Commit();
  EXPECT_EQ(info.status().code(), StatusCode::kUnavailable) << info.status().ToString();
  EXPECT_EQ(faults_->Calls(StoreOp::kCompleteUpload), 0);
  ASSERT_TRUE(AbortsSettle());
  EXPECT_EQ(registry_.aborted(), 1u);
  EXPECT_EQ(PendingUploads(), 0u);
  EXPECT_EQ(local_->Head("failing.bin", {}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(counters_.failed.load(), 1u);
  EXPECT_EQ(counters_.completed.load(), 0u);
  EXPECT_EQ(budget_.used(), 0u);
}

TEST_F(ObjectUploadTest, FailedCompletionAbortsTheUpload) {
  faults_->FailNext(StoreOp::kCompleteUpload, faults_->ServerError("done.bin"));
  std::string data = Bytes(7 * kMiB, 5);
  auto upload = Upload("done.bin");
  AppendAll(*upload, data, 300 * kKiB);
  auto info = upload->Commit();
  EXPECT_EQ(info.status().code(), StatusCode::kUnavailable) << info.status().ToString();
  EXPECT_FALSE(upload->Append(std::span<const char>("x", 1)).ok());
  EXPECT_FALSE(upload->Commit().ok());
  ASSERT_TRUE(AbortsSettle());
  EXPECT_EQ(registry_.aborted(), 1u);
  EXPECT_EQ(faults_->Calls(StoreOp::kAbortUpload), 1);
  EXPECT_EQ(PendingUploads(), 0u);
  EXPECT_EQ(local_->Head("done.bin", {}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(counters_.failed.load(), 1u);
  EXPECT_EQ(budget_.used(), 0u);
}

TEST_F(ObjectUploadTest, UploadDroppedUncommittedIsAborted) {
  std::string data = Bytes(6 * kMiB, 6);
  {
    auto upload = Upload("dropped.bin");
    AppendAll(*upload, data, 300 * kKiB);
  }
  ASSERT_TRUE(AbortsSettle());
  EXPECT_EQ(registry_.aborted(), 1u);
  EXPECT_EQ(PendingUploads(), 0u);
  EXPECT_EQ(local_->Head("dropped.bin", {}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(budget_.used(), 0u);
}

// Two files written at once within a budget of two parts: writers wait, never lose bytes, and
// the budget is never passed.
TEST_F(ObjectUploadTest, ConcurrentWritersStayWithinTheBudget) {
  WriteBudget budget(2 * kMinPartSize);
  UploadOptions options = SmallParts();
  options.max_part_size = kMinPartSize;  // every part fits the budget beside the other writer's
  std::vector<std::string> data = {Bytes(23 * kMiB + 11, 7), Bytes(21 * kMiB + 5, 8)};
  std::vector<Status> results(2);
  std::vector<std::thread> writers;
  for (int i = 0; i < 2; ++i) {
    writers.emplace_back([&, i] {
      auto upload = Upload("w" + std::to_string(i), options, &budget);
      size_t chunk = 300 * kKiB + 17 * i;
      for (size_t at = 0; at < data[i].size() && results[i].ok(); at += chunk) {
        results[i] = upload->Append(
            std::span<const char>(data[i].data() + at, std::min(chunk, data[i].size() - at)));
      }
      if (results[i].ok()) results[i] = upload->Commit().status();
    });
  }
  for (std::thread& t : writers) t.join();
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(results[i].ok()) << results[i].ToString();
    EXPECT_EQ(Object("w" + std::to_string(i)), data[i]) << "writer " << i;
  }
  EXPECT_LE(budget.peak(), budget.capacity());
  EXPECT_EQ(budget.used(), 0u);
  EXPECT_EQ(PendingUploads(), 0u);
}

TEST(UploadOptionsTest, PartsFitTheMemoryOfOneFile) {
  UploadOptions o = UploadOptionsFor(256 * kMiB, 4);
  EXPECT_EQ(o.max_part_size, 51 * kMiB);
  EXPECT_EQ(o.first_part_size, 8 * kMiB);
  EXPECT_EQ(o.parts_in_flight, 4u);
  EXPECT_EQ(LargestObject(o), (8000 + 16000 + 32000 + 7000 * 51) * kMiB);

  UploadOptions small = UploadOptionsFor(40 * kMiB, 4);
  EXPECT_EQ(small.max_part_size, 8 * kMiB);
  EXPECT_EQ(small.first_part_size, 8 * kMiB);
}

}  // namespace
}  // namespace lakecache
