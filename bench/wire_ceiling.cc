// The wire ceiling of this machine for a cluster mount's remote reads: what a mount fed by another
// process over loopback TCP can reach when neither end does anything but move the bytes.
//
//   wire_ceiling serve [--size 512MiB] [--port 0] [--port-file F]
//   wire_ceiling mount MOUNTPOINT --from HOST:PORT [--size 512MiB] [--connections 4] [--threads 16]
//   wire_ceiling read --from HOST:PORT [--size 512MiB] [--connections 4] [--verify]
//
// serve: the sender; one file of pattern bytes (the same as fuse_ceiling's) in memory, answering
// each connection's range requests (wire_stream.h) from it. It prints its port (and writes it to F)
// once listening, and runs until killed.
// mount: the null FUSE file system of fuse_ceiling (MOUNTPOINT/data, our mount's options) whose
// every read of up to 1 MiB is one round trip over a pool of --connections connections to the
// sender, received into the FUSE thread's reused buffer and replied with fuse_reply_buf. When
// unmounted it says how many connections were ever busy at once (the reads the kernel overlapped).
// read: the same stream without FUSE: --connections threads, each on its own connection, take the
// next 1 MiB of the file in turn until all of it was received; prints one JSON line (bytes,
// seconds, mbps = 10^6 B/s, cpu_seconds of this process). --verify compares every byte with the
// pattern (exit 1 on a difference).
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "null_fuse.h"
#include "wire_stream.h"

namespace {

namespace lb = lakecache::bench;

struct Flags {
  std::string command;
  std::string mountpoint;
  std::string from;
  std::string port_file;
  size_t size = size_t{512} << 20;
  unsigned port = 0;
  unsigned connections = 4;  // connections a cluster mount keeps to each worker
  unsigned threads = 16;     // FuseMountOptions::max_threads
  bool verify = false;
};

int Usage() {
  std::fprintf(stderr,
               "usage: wire_ceiling serve [--size 512MiB] [--port 0] [--port-file F]\n"
               "       wire_ceiling mount MOUNTPOINT --from HOST:PORT [--size 512MiB] "
               "[--connections 4] [--threads 16]\n"
               "       wire_ceiling read --from HOST:PORT [--size 512MiB] [--connections 4] "
               "[--verify]\n");
  return 2;
}

bool ParseCount(const char* text, unsigned* out, unsigned max) {
  char* end = nullptr;
  unsigned long v = std::strtoul(text, &end, 10);
  if (end == text || *end != '\0' || v > max) return false;
  *out = static_cast<unsigned>(v);
  return true;
}

bool ParseFlags(int argc, char** argv, Flags* f) {
  if (argc < 2) return false;
  f->command = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    bool ok = value != nullptr;
    if (a == "--size" && ok) {
      ok = lb::ParseSize(value, &f->size);
    } else if (a == "--port" && ok) {
      ok = ParseCount(value, &f->port, 65535);
    } else if (a == "--port-file" && ok) {
      f->port_file = value;
    } else if (a == "--from" && ok) {
      f->from = value;
    } else if (a == "--connections" && ok) {
      ok = ParseCount(value, &f->connections, 1024) && f->connections > 0;
    } else if (a == "--threads" && ok) {
      ok = ParseCount(value, &f->threads, 1024) && f->threads > 0;
    } else if (a == "--verify") {
      f->verify = true;
      continue;
    } else if (f->command == "mount" && a[0] != '-' && f->mountpoint.empty()) {
      f->mountpoint = a;
      continue;
    } else {
      return false;
    }
    if (!ok) return false;
    ++i;
  }
  return true;
}

bool WritePortFile(const std::string& path, uint16_t port) {
  std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return false;
  bool ok = std::fprintf(f, "%u\n", port) > 0;
  ok = std::fclose(f) == 0 && ok;
  return ok && std::rename(tmp.c_str(), path.c_str()) == 0;  // readers never see it half written
}

int Serve(const Flags& f) {
  // Preallocated and touched up front, so no request pays for a page fault.
  std::unique_ptr<char[]> data(new char[f.size]);
  lb::FillPattern(data.get(), 0, f.size);
  uint16_t port = 0;
  int fd = lb::ListenLoopback(static_cast<uint16_t>(f.port), &port);
  if (fd < 0) return 1;
  if (!f.port_file.empty() && !WritePortFile(f.port_file, port)) {
    std::fprintf(stderr, "wire_ceiling: cannot write %s\n", f.port_file.c_str());
    return 1;
  }
  std::printf("%u\n", port);
  std::fflush(stdout);
  lb::ServeWire(fd, data.get(), f.size);
  return 1;  // ServeWire returns only when accept fails
}

int Mount(const Flags& f) {
  auto pool = std::make_unique<lb::WirePool>();
  if (!pool->Open(f.from, f.connections)) return 1;
  lb::NullFuseOptions options;
  options.name = "wire_ceiling";
  options.size = f.size;
  options.threads = f.threads;
  int rc = lb::RunNullFuse(f.mountpoint, options,
                           [p = pool.get()](fuse_req_t req, size_t offset, size_t length) {
                             thread_local std::unique_ptr<char[]> buf(new char[lb::kMaxRead]);
                             int64_t got = p->Fetch(offset, length, buf.get());
                             if (got != static_cast<int64_t>(length)) {
                               fuse_reply_err(req, EIO);
                             } else {
                               fuse_reply_buf(req, buf.get(), length);
                             }
                           });
  std::fprintf(stderr, "wire_ceiling: at most %zu of %u connections were busy at once\n",
               pool->PeakBusy(), f.connections);
  return rc;
}

double CpuSeconds() {
  rusage ru;
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// One connection's share of `read`: the next 1 MiB of the file until none is left.
bool ReadShare(const Flags& f, lb::WireConnection* c, std::atomic<uint64_t>* next) {
  std::unique_ptr<char[]> buf(new char[lb::kMaxRead]);
  std::unique_ptr<char[]> expected(f.verify ? new char[lb::kMaxRead] : nullptr);
  for (;;) {
    uint64_t offset = next->fetch_add(lb::kMaxRead);
    if (offset >= f.size) return true;
    uint64_t length = std::min<uint64_t>(lb::kMaxRead, f.size - offset);
    if (c->Fetch(offset, length, buf.get()) != static_cast<int64_t>(length)) {
      std::fprintf(stderr, "wire_ceiling: the stream failed at offset %" PRIu64 "\n", offset);
      return false;
    }
    if (f.verify) {
      lb::FillPattern(expected.get(), offset, length);
      if (std::memcmp(buf.get(), expected.get(), length) != 0) {
        std::fprintf(stderr, "wire_ceiling: wrong bytes in [%" PRIu64 ", +%" PRIu64 ")\n", offset,
                     length);
        return false;
      }
    }
  }
}

int Read(const Flags& f) {
  std::vector<std::unique_ptr<lb::WireConnection>> connections;
  for (unsigned i = 0; i < f.connections; ++i) {
    connections.push_back(std::make_unique<lb::WireConnection>());
    if (!connections.back()->Connect(f.from)) return 1;
  }
  std::atomic<uint64_t> next{0};
  std::atomic<bool> ok{true};
  double cpu = CpuSeconds();
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (auto& c : connections) {
    threads.emplace_back([&, c = c.get()] {
      if (!ReadShare(f, c, &next)) ok = false;
    });
  }
  for (auto& t : threads) t.join();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!ok) return 1;
  std::printf("{\"bytes\": %zu, \"seconds\": %.6f, \"mbps\": %.1f, \"cpu_seconds\": %.3f}\n",
              f.size, seconds, static_cast<double>(f.size) / seconds / 1e6, CpuSeconds() - cpu);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  if (!ParseFlags(argc, argv, &f)) return Usage();
  if (f.command == "serve") return Serve(f);
  if (f.command == "mount" && !f.mountpoint.empty() && !f.from.empty()) return Mount(f);
  if (f.command == "read" && !f.from.empty()) return Read(f);
  return Usage();
}
