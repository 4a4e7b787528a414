// The mount's stack built from options without the CLI: a local namespace assembled into a FUSE
// mount of its own, served on a thread, read through the kernel, then stopped and unmounted.
#include "mount/mount_assembly.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <thread>

#include "support/fuse_mounts.h"
#include "support/test_servers.h"

namespace lakecache {
namespace {

TEST(MountAssemblyTest, AStackBuiltFromOptionsServesItsNamespaceUntilStopped) {
  testing::TempDir data("lakecache-assembly-data");
  testing::TempDir mnt("lakecache-assembly-mnt");
  std::ofstream(data.path() + "/hello.txt") << "hello from the store";
  MountSources sources;
  sources.config.namespaces["lake"] = testing::LocalNamespace("lake", data.path(), 1 << 20);
  sources.config.cache.memory_capacity = 16 << 20;
  StoreOptions store_options;
  store_options.retries = false;
  auto table = NamespaceTable::Open(sources.config, store_options, /*probe=*/false);
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  sources.namespaces = std::move(*table);
  MountSpec spec;
  spec.mountpoint = mnt.path();
  spec.single_namespace_root = true;
  spec.fs.read_only = true;
  spec.fs.uid = ::getuid();
  spec.fs.gid = ::getgid();
  spec.fuse.fs_name = "lakecache:assembly-test";

  auto mounted = AssembleMount(std::move(sources), spec, nullptr);
  ASSERT_TRUE(mounted.ok()) << mounted.status().ToString();
  EXPECT_TRUE(testing::IsMounted(mnt.path()));
  Status served = Status::Internal("not served");
  std::thread server([&] { served = ServeMount(*mounted); });
  {
    std::ifstream in(mnt.path() + "/hello.txt");
    std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(content, "hello from the store");
  }
  mounted->mount->Stop();
  server.join();
  EXPECT_TRUE(served.ok()) << served.ToString();
  EXPECT_FALSE(testing::IsMounted(mnt.path()));
  EXPECT_TRUE(testing::UnmountForTest(mnt.path()).ok());
}

}  // namespace
}  // namespace lakecache
