// The FUSE ceiling of this machine for our read path: a null file system (null_fuse.h) that serves
// one file from a preallocated memory buffer, with the options of our mount. Reads reply with
// fuse_reply_buf straight from the buffer, so the time left is the kernel's and libfuse's, not
// ours.
//
//   fuse_ceiling MOUNTPOINT [--size 512MiB] [--keep-cache] [--threads N]
//
// The file is MOUNTPOINT/data. Runs in the foreground until unmounted or SIGTERM/SIGINT.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "null_fuse.h"

namespace {

using lakecache::bench::NullFuseOptions;

int Usage() {
  std::fprintf(stderr,
               "usage: fuse_ceiling MOUNTPOINT [--size 512MiB] [--keep-cache] [--threads N]\n"
               "Serves MOUNTPOINT/data (pattern bytes) from memory until unmounted or SIGTERM.\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  NullFuseOptions options;
  options.name = "fuse_ceiling";
  options.size = size_t{512} << 20;
  std::string mountpoint;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--size" && i + 1 < argc) {
      if (!lakecache::bench::ParseSize(argv[++i], &options.size)) return Usage();
    } else if (a == "--keep-cache") {
      options.keep_cache = true;
    } else if (a == "--threads" && i + 1 < argc) {
      options.threads = static_cast<unsigned>(std::atoi(argv[++i]));
    } else if (a == "-h" || a == "--help") {
      Usage();
      return 0;
    } else if (!a.empty() && a[0] != '-' && mountpoint.empty()) {
      mountpoint = a;
    } else {
      return Usage();
    }
  }
  if (mountpoint.empty()) return Usage();

  // Preallocated and touched up front, so no read pays for a page fault.
  std::unique_ptr<char[]> buf(new char[options.size + 1]);
  lakecache::bench::FillPattern(buf.get(), 0, options.size);
  return lakecache::bench::RunNullFuse(
      mountpoint, options, [data = buf.get()](fuse_req_t req, size_t offset, size_t length) {
        fuse_reply_buf(req, data + offset, length);
      });
}
