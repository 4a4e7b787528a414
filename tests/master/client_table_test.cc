#include "master/client_table.h"
#include "support/wait_for.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

namespace lakecache {
namespace {

rpc::ClientReport Report(const std::string& id, uint64_t read) {
  rpc::ClientReport r;
  r.set_id(id);
  r.set_host("node-a");
  r.set_mountpoint("/mnt/lake");
  r.set_read_bytes(read);
  return r;
}

TEST(ClientTableTest, KeepsTheLastReportOfEachMount) {
  ClientTable table(std::chrono::seconds(10));
  table.Note(Report("a", 1));
  table.Note(Report("b", 2));
  table.Note(Report("a", 5));
  std::vector<rpc::ClientReport> live = table.Live();
  ASSERT_EQ(live.size(), 2u);
  EXPECT_EQ(live[0].id(), "a");
  EXPECT_EQ(live[0].read_bytes(), 5u);
  EXPECT_EQ(live[1].read_bytes(), 2u);
}

TEST(ClientTableTest, IgnoresReportsWithoutAnIdOrWithOversizedNames) {
  ClientTable table(std::chrono::seconds(10));
  table.Note(Report("", 1));
  table.Note(Report(std::string(65, 'x'), 1));
  rpc::ClientReport big = Report("c", 1);
  big.set_mountpoint(std::string(5000, '/'));
  table.Note(big);
  EXPECT_TRUE(table.Live().empty());
}

TEST(ClientTableTest, AMountThatStopsReportingLeaves) {
  ClientTable table(std::chrono::milliseconds(50));
  table.Note(Report("a", 1));
  EXPECT_EQ(table.Live().size(), 1u);
  // Leaves once 50 ms have passed without a report from it.
  EXPECT_TRUE(testing::WaitFor([&] { return table.Live().empty(); }));
}

}  // namespace
}  // namespace lakecache
