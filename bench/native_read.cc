// The reader of bench/native: reads files of a lakecache mount through FUSE (read(2)) or through
// the native data path (liblakecache_native: lc_pread copies, lc_view_range reads in place,
// lc_read_many batches), or copies memory for the memory-copy ceiling, with N threads, and prints
// one JSON line: bytes, seconds, MB/s, the reader's CPU seconds, minor page faults and voluntary
// context switches (getrusage RUSAGE_SELF over the timed part), requests and files.
//
//   native_read seq    --via fuse|native|view [--threads N] [--request 1MiB] PATH...
//   native_read random --via fuse|native|view [--threads N] [--io 128KiB] [--count M]
//                      [--seed S] PATH
//   native_read files  --via fuse|native|batch [--threads N] [--batch 64]
//                      [--max-size 16MiB] LISTFILE
//   native_read memcpy [--threads N] [--size 512MiB] [--passes 4]
//
// seq: thread i reads PATH[i % count] whole, from its start, --request bytes at a time. random:
// each thread reads --count ranges of --io bytes at offsets that are multiples of --io; the
// offsets are a permutation (seeded by --seed) of every such offset of the file, thread i taking
// the i-th run of --count of them, so no range is read twice in a run while threads x count fit
// the file (the report's "repeats" counts those read again). files: the files listed in LISTFILE
// (one path per line) are read whole, each thread taking a contiguous share of the list.
// memcpy: each thread copies a buffer of --size into another --passes times.
//
// --via: fuse = pread(2) (files: open, read to the end, close) into a buffer; native = lc_pread
// into a buffer (files: lc_open, lc_pread, lc_close); view = lc_view_range of whole blocks
// (random: of --io), the reader touching one byte of every 4 KiB page and XORing the first 8 bytes
// of the view, then lc_release; batch (files) = lc_read_many of --batch paths at a time into
// buffers of --max-size given by the reader and reused. Each native thread attaches a client of
// its own (one session per reader, as separate processes would). Setup (attach, open, buffers)
// happens before the clock starts; every thread starts at once. Short reads are errors. Nothing is
// checked byte by byte: correctness is tested elsewhere. Exit status 1 on an error, 2 on bad usage.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <latch>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "lakecache_native.h"

namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kPage = 4096;

struct Args {
  std::string mode;
  std::string via;
  unsigned threads = 1;
  uint64_t request = kMiB;
  uint64_t io = 128 << 10;
  uint64_t count = 1024;
  uint64_t seed = 1;
  uint64_t batch = 64;
  uint64_t max_size = 16 * kMiB;
  uint64_t size = 512 * kMiB;
  unsigned passes = 4;
  std::vector<std::string> paths;
};

int Usage() {
  std::fprintf(
      stderr,
      "usage: native_read seq    --via fuse|native|view [--threads N] [--request 1MiB] PATH...\n"
      "       native_read random --via fuse|native|view [--threads N] [--io 128KiB] [--count M]\n"
      "                          [--seed S] PATH\n"
      "       native_read files  --via fuse|native|batch [--threads N] [--batch 64]\n"
      "                          [--max-size 16MiB] LISTFILE\n"
      "       native_read memcpy [--threads N] [--size 512MiB] [--passes 4]\n");
  return 2;
}

// "512MiB", "128KiB", "1G", "4096": bytes (K/M/G and KiB/MiB/GiB are powers of 2).
bool ParseBytes(const char* text, uint64_t* out) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(text, &end);
  if (errno != 0 || end == text || v < 0) return false;
  std::string unit = end;
  uint64_t mult = 1;
  if (unit.empty() || unit == "B") {
    mult = 1;
  } else if (unit == "K" || unit == "KiB") {
    mult = 1 << 10;
  } else if (unit == "M" || unit == "MiB") {
    mult = kMiB;
  } else if (unit == "G" || unit == "GiB") {
    mult = kMiB << 10;
  } else {
    return false;
  }
  *out = static_cast<uint64_t>(v * static_cast<double>(mult));
  return true;
}

bool ParseCount(const char* text, uint64_t* out) {
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0') return false;
  *out = v;
  return true;
}

// The first error of any thread; the run fails with it.
std::mutex g_error_mu;
std::string g_error;

void SetError(const std::string& message) {
  std::lock_guard<std::mutex> lock(g_error_mu);
  if (g_error.empty()) g_error = message;
}

bool Failed() {
  std::lock_guard<std::mutex> lock(g_error_mu);
  return !g_error.empty();
}

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

// A relative path made absolute against the working folder: lc_open takes a relative path as
// relative to the mountpoint.
std::string Absolute(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  char cwd[4096];
  if (::getcwd(cwd, sizeof(cwd)) == nullptr) return path;
  return std::string(cwd) + "/" + path;
}

std::string NativeError(const std::string& what) { return what + ": " + lc_last_error(); }

// A buffer of `bytes`, every page touched (so that no timed read pays for a page fault in it).
std::unique_ptr<char[]> TouchedBuffer(uint64_t bytes) {
  std::unique_ptr<char[]> buf(new char[std::max<uint64_t>(bytes, 1)]);
  std::memset(buf.get(), 0, std::max<uint64_t>(bytes, 1));
  return buf;
}

// Touches one byte of every 4 KiB page of a view and its first 8 bytes: the mapping is read.
uint64_t TouchView(const void* data, size_t length) {
  const auto* p = static_cast<const volatile unsigned char*>(data);
  uint64_t x = 0;
  for (size_t at = 0; at < length; at += kPage) x += p[at];
  uint64_t first = 0;
  std::memcpy(&first, data, std::min<size_t>(8, length));
  return x ^ first;
}

// What each thread did.
struct Tally {
  uint64_t bytes = 0;
  uint64_t requests = 0;
  uint64_t files = 0;
  uint64_t checksum = 0;
};

// A thread's work: `setup` before the clock starts (false: failed, error set), `run` timed.
struct Worker {
  std::function<bool()> setup;
  std::function<void(Tally*)> run;
  std::function<void()> teardown;
};

struct NativeClient {
  lc_client* client = nullptr;
  ~NativeClient() {
    if (client != nullptr) lc_detach(client);
  }
  bool Attach(const std::string& path) {
    client = lc_attach(path.c_str());
    if (client == nullptr) SetError(NativeError("lc_attach " + path));
    return client != nullptr;
  }
};

// ---- seq ------------------------------------------------------------------------------------

struct SeqState {
  std::string path;
  int fd = -1;
  uint64_t size = 0;
  NativeClient nc;
  lc_file* file = nullptr;
  std::unique_ptr<char[]> buf;
  ~SeqState() {
    if (file != nullptr) lc_close(file);
    if (fd >= 0) ::close(fd);
  }
};

bool OpenEither(const std::string& via, SeqState* s) {
  if (via == "fuse") {
    s->fd = ::open(s->path.c_str(), O_RDONLY | O_CLOEXEC);
    if (s->fd < 0) {
      SetError(Errno("open " + s->path));
      return false;
    }
    struct stat st;
    if (::fstat(s->fd, &st) != 0) {
      SetError(Errno("fstat " + s->path));
      return false;
    }
    s->size = static_cast<uint64_t>(st.st_size);
    return true;
  }
  if (!s->nc.Attach(s->path)) return false;
  s->file = lc_open(s->nc.client, s->path.c_str());
  if (s->file == nullptr) {
    SetError(NativeError("lc_open " + s->path));
    return false;
  }
  s->size = lc_size(s->file);
  return true;
}

void SeqRun(const Args& a, SeqState* s, Tally* t) {
  uint64_t offset = 0;
  if (a.via == "view") {
    uint64_t block = lc_block_size(s->file);
    if (block == 0) block = 4 * kMiB;
    while (offset < s->size) {
      lc_view v;
      if (lc_view_range(s->file, offset, block, &v) != 0) {
        return SetError(NativeError("lc_view_range " + s->path));
      }
      if (v.length == 0) break;
      t->checksum ^= TouchView(v.data, v.length);
      offset += v.length;
      ++t->requests;
      lc_release(s->nc.client, &v);
    }
  } else {
    while (offset < s->size) {
      uint64_t want = std::min(a.request, s->size - offset);
      ssize_t n = a.via == "fuse" ? ::pread(s->fd, s->buf.get(), want, static_cast<off_t>(offset))
                                  : lc_pread(s->file, s->buf.get(), want, offset);
      if (n < 0) {
        return SetError(a.via == "fuse" ? Errno("pread " + s->path)
                                        : NativeError("lc_pread " + s->path));
      }
      if (n == 0) break;
      offset += static_cast<uint64_t>(n);
      ++t->requests;
    }
  }
  if (offset != s->size) {
    return SetError(s->path + ": read " + std::to_string(offset) + " of " +
                    std::to_string(s->size) + " bytes");
  }
  t->bytes += offset;
  t->files += 1;
}

// ---- random -----------------------------------------------------------------------------------

void RandomRun(const Args& a, SeqState* s, const std::vector<uint64_t>& offsets, Tally* t) {
  for (uint64_t offset : offsets) {
    if (a.via == "view") {
      lc_view v;
      if (lc_view_range(s->file, offset, a.io, &v) != 0) {
        return SetError(NativeError("lc_view_range " + s->path));
      }
      if (v.length != a.io) {
        lc_release(s->nc.client, &v);
        return SetError(s->path + ": a short view at " + std::to_string(offset));
      }
      t->checksum ^= TouchView(v.data, v.length);
      lc_release(s->nc.client, &v);
    } else {
      ssize_t n = a.via == "fuse" ? ::pread(s->fd, s->buf.get(), a.io, static_cast<off_t>(offset))
                                  : lc_pread(s->file, s->buf.get(), a.io, offset);
      if (n < 0) {
        return SetError(a.via == "fuse" ? Errno("pread " + s->path)
                                        : NativeError("lc_pread " + s->path));
      }
      if (static_cast<uint64_t>(n) != a.io) {
        return SetError(s->path + ": a short read at " + std::to_string(offset));
      }
    }
    t->bytes += a.io;
    ++t->requests;
  }
}

// ---- files ------------------------------------------------------------------------------------

struct FilesState {
  std::vector<std::string> paths;  // this thread's share
  NativeClient nc;
  std::unique_ptr<char[]> buf;  // fuse, native: one file; batch: --batch slots of --max-size
  uint64_t capacity = 0;
  std::vector<lc_read> reads;
};

void FilesRun(const Args& a, FilesState* s, Tally* t) {
  if (a.via == "fuse") {
    for (const std::string& path : s->paths) {
      int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) return SetError(Errno("open " + path));
      for (;;) {
        ssize_t n = ::read(fd, s->buf.get(), s->capacity);
        if (n < 0) {
          SetError(Errno("read " + path));
          ::close(fd);
          return;
        }
        if (n == 0) break;
        t->bytes += static_cast<uint64_t>(n);
        ++t->requests;
      }
      ::close(fd);
      ++t->files;
    }
  } else if (a.via == "native") {
    for (const std::string& path : s->paths) {
      lc_file* f = lc_open(s->nc.client, path.c_str());
      if (f == nullptr) return SetError(NativeError("lc_open " + path));
      uint64_t size = lc_size(f);
      if (size > s->capacity) {
        lc_close(f);
        return SetError(path + ": larger than --max-size");
      }
      ssize_t n = size == 0 ? 0 : lc_pread(f, s->buf.get(), size, 0);
      lc_close(f);
      if (n < 0) return SetError(NativeError("lc_pread " + path));
      if (static_cast<uint64_t>(n) != size) return SetError(path + ": a short read");
      t->bytes += size;
      ++t->requests;
      ++t->files;
    }
  } else {  // batch
    for (size_t at = 0; at < s->paths.size(); at += a.batch) {
      size_t count = std::min<size_t>(a.batch, s->paths.size() - at);
      for (size_t i = 0; i < count; ++i) {
        lc_read& r = s->reads[i];
        r = lc_read{};
        r.path = s->paths[at + i].c_str();
        r.offset = 0;
        r.length = s->capacity;  // clamped to the file; the buffer holds --max-size
        r.buf = s->buf.get() + i * s->capacity;
      }
      ssize_t ok = lc_read_many(s->nc.client, s->reads.data(), count);
      if (ok < 0) return SetError(NativeError("lc_read_many"));
      for (size_t i = 0; i < count; ++i) {
        const lc_read& r = s->reads[i];
        if (r.result < 0) {
          return SetError(s->paths[at + i] + ": " + (r.error != nullptr ? r.error : "read failed"));
        }
        if (static_cast<uint64_t>(r.result) != r.length)
          return SetError(s->paths[at + i] + ": a short read");
        if (r.length == s->capacity)
          return SetError(s->paths[at + i] + ": as large as --max-size or larger");
        t->bytes += static_cast<uint64_t>(r.result);
        ++t->files;
      }
      ++t->requests;
    }
  }
}

// ---- the run ------------------------------------------------------------------------------------

double CpuSeconds(const rusage& r, bool user) {
  const timeval& tv = user ? r.ru_utime : r.ru_stime;
  return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
}

// Runs the workers: every setup, then (the clock started, rusage taken) every run at once.
int RunWorkers(const Args& a, std::vector<Worker>& workers, const std::string& extra_json) {
  size_t n = workers.size();
  std::vector<Tally> tallies(n);
  std::latch ready(static_cast<std::ptrdiff_t>(n) + 1);
  std::latch go(1);
  std::atomic<bool> setup_ok{true};
  std::vector<std::thread> threads;
  for (size_t i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      if (!workers[i].setup()) setup_ok = false;
      ready.count_down();
      go.wait();
      if (setup_ok && !Failed()) workers[i].run(&tallies[i]);
      if (workers[i].teardown) workers[i].teardown();
    });
  }
  ready.arrive_and_wait();
  rusage r0{}, r1{};
  ::getrusage(RUSAGE_SELF, &r0);
  auto t0 = std::chrono::steady_clock::now();
  go.count_down();
  for (std::thread& t : threads) t.join();
  auto t1 = std::chrono::steady_clock::now();
  ::getrusage(RUSAGE_SELF, &r1);
  if (Failed()) {
    std::fprintf(stderr, "native_read: %s\n", g_error.c_str());
    return 1;
  }
  Tally total;
  for (const Tally& t : tallies) {
    total.bytes += t.bytes;
    total.requests += t.requests;
    total.files += t.files;
    total.checksum ^= t.checksum;
  }
  double seconds = std::chrono::duration<double>(t1 - t0).count();
  double user = CpuSeconds(r1, true) - CpuSeconds(r0, true);
  double sys = CpuSeconds(r1, false) - CpuSeconds(r0, false);
  std::printf("{\"mode\": \"%s\", \"via\": \"%s\", \"threads\": %u, \"bytes\": %" PRIu64
              ", \"seconds\": %.6f, \"mbps\": %.1f, \"cpu_seconds\": %.4f, \"user_seconds\": %.4f, "
              "\"sys_seconds\": %.4f, \"minor_faults\": %ld, \"voluntary_switches\": %ld, "
              "\"requests\": %" PRIu64 ", \"files\": %" PRIu64 ", \"checksum\": %" PRIu64 "%s}\n",
              a.mode.c_str(), a.via.c_str(), a.threads, total.bytes, seconds,
              seconds > 0 ? static_cast<double>(total.bytes) / seconds / 1e6 : 0.0, user + sys,
              user, sys, r1.ru_minflt - r0.ru_minflt, r1.ru_nvcsw - r0.ru_nvcsw, total.requests,
              total.files, total.checksum, extra_json.c_str());
  return 0;
}

int Seq(const Args& a) {
  if (a.via != "fuse" && a.via != "native" && a.via != "view") return Usage();
  std::vector<std::unique_ptr<SeqState>> states;
  std::vector<Worker> workers;
  for (unsigned i = 0; i < a.threads; ++i) {
    auto s = std::make_unique<SeqState>();
    s->path = a.paths[i % a.paths.size()];
    SeqState* sp = s.get();
    states.push_back(std::move(s));
    workers.push_back(Worker{[&a, sp] {
                               if (a.via != "view") sp->buf = TouchedBuffer(a.request);
                               return OpenEither(a.via, sp);
                             },
                             [&a, sp](Tally* t) { SeqRun(a, sp, t); }, nullptr});
  }
  return RunWorkers(a, workers, "");
}

int Random(const Args& a) {
  if (a.via != "fuse" && a.via != "native" && a.via != "view") return Usage();
  if (a.paths.size() != 1 || a.io == 0) return Usage();
  struct stat st;
  if (::stat(a.paths[0].c_str(), &st) != 0) {
    std::fprintf(stderr, "native_read: stat %s: %s\n", a.paths[0].c_str(), std::strerror(errno));
    return 1;
  }
  uint64_t slots = static_cast<uint64_t>(st.st_size) / a.io;
  if (slots == 0) {
    std::fprintf(stderr, "native_read: %s is smaller than --io\n", a.paths[0].c_str());
    return 1;
  }
  std::vector<uint64_t> perm(slots);
  std::iota(perm.begin(), perm.end(), uint64_t{0});
  std::mt19937_64 rng(a.seed);
  std::shuffle(perm.begin(), perm.end(), rng);
  uint64_t total = a.count * a.threads;
  uint64_t repeats = total > slots ? total - slots : 0;
  std::vector<std::vector<uint64_t>> offsets(a.threads);
  for (unsigned i = 0; i < a.threads; ++i) {
    for (uint64_t k = 0; k < a.count; ++k)
      offsets[i].push_back(perm[(i * a.count + k) % slots] * a.io);
  }
  std::vector<std::unique_ptr<SeqState>> states;
  std::vector<Worker> workers;
  for (unsigned i = 0; i < a.threads; ++i) {
    auto s = std::make_unique<SeqState>();
    s->path = a.paths[0];
    SeqState* sp = s.get();
    const std::vector<uint64_t>* mine = &offsets[i];
    states.push_back(std::move(s));
    workers.push_back(Worker{[&a, sp] {
                               if (a.via != "view") sp->buf = TouchedBuffer(a.io);
                               return OpenEither(a.via, sp);
                             },
                             [&a, sp, mine](Tally* t) { RandomRun(a, sp, *mine, t); }, nullptr});
  }
  return RunWorkers(a, workers, ", \"repeats\": " + std::to_string(repeats));
}

int Files(const Args& a) {
  if (a.via != "fuse" && a.via != "native" && a.via != "batch") return Usage();
  if (a.paths.size() != 1 || a.batch == 0 || a.max_size == 0) return Usage();
  std::ifstream in(a.paths[0]);
  if (!in) {
    std::fprintf(stderr, "native_read: cannot read the list %s\n", a.paths[0].c_str());
    return 1;
  }
  std::vector<std::string> all;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) all.push_back(Absolute(line));
  }
  if (all.empty()) {
    std::fprintf(stderr, "native_read: the list %s is empty\n", a.paths[0].c_str());
    return 1;
  }
  std::vector<std::unique_ptr<FilesState>> states;
  std::vector<Worker> workers;
  size_t per = (all.size() + a.threads - 1) / a.threads;
  for (unsigned i = 0; i < a.threads; ++i) {
    auto s = std::make_unique<FilesState>();
    size_t first = std::min(all.size(), i * per);
    size_t last = std::min(all.size(), first + per);
    s->paths.assign(all.begin() + static_cast<ptrdiff_t>(first),
                    all.begin() + static_cast<ptrdiff_t>(last));
    FilesState* sp = s.get();
    states.push_back(std::move(s));
    workers.push_back(Worker{[&a, sp] {
                               // fuse: one read past the largest file sees the end at once.
                               sp->capacity = a.max_size;
                               uint64_t slots = a.via == "batch" ? a.batch : 1;
                               sp->buf = TouchedBuffer(sp->capacity * slots);
                               sp->reads.resize(slots);
                               if (a.via == "fuse" || sp->paths.empty()) return true;
                               return sp->nc.Attach(sp->paths[0]);
                             },
                             [&a, sp](Tally* t) { FilesRun(a, sp, t); }, nullptr});
  }
  return RunWorkers(a, workers, ", \"listed\": " + std::to_string(all.size()));
}

int Memcpy(const Args& a) {
  if (a.size == 0 || a.passes == 0) return Usage();
  struct Buffers {
    std::unique_ptr<char[]> src, dst;
  };
  std::vector<Buffers> bufs(a.threads);
  std::vector<Worker> workers;
  for (unsigned i = 0; i < a.threads; ++i) {
    Buffers* b = &bufs[i];
    workers.push_back(Worker{[&a, b, i] {
                               b->src = TouchedBuffer(a.size);
                               b->dst = TouchedBuffer(a.size);
                               std::memset(b->src.get(), static_cast<int>(i + 1), a.size);
                               return true;
                             },
                             [&a, b](Tally* t) {
                               for (unsigned p = 0; p < a.passes; ++p) {
                                 std::memcpy(b->dst.get(), b->src.get(), a.size);
                                 t->checksum ^=
                                     static_cast<unsigned char>(b->dst[(p * 4099) % a.size]);
                                 t->bytes += a.size;
                                 ++t->requests;
                               }
                             },
                             nullptr});
  }
  return RunWorkers(a, workers, "");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Usage();
  Args a;
  a.mode = argv[1];
  if (a.mode == "-h" || a.mode == "--help") {
    Usage();
    return 0;
  }
  for (int i = 2; i < argc; ++i) {
    std::string f = argv[i];
    bool has = i + 1 < argc;
    uint64_t v = 0;
    if (f == "--via" && has) {
      a.via = argv[++i];
    } else if (f == "--threads" && has && ParseCount(argv[++i], &v) && v >= 1 && v <= 1024) {
      a.threads = static_cast<unsigned>(v);
    } else if (f == "--request" && has && ParseBytes(argv[++i], &a.request) && a.request > 0) {
    } else if (f == "--io" && has && ParseBytes(argv[++i], &a.io) && a.io > 0) {
    } else if (f == "--count" && has && ParseCount(argv[++i], &a.count) && a.count > 0) {
    } else if (f == "--seed" && has && ParseCount(argv[++i], &a.seed)) {
    } else if (f == "--batch" && has && ParseCount(argv[++i], &a.batch) && a.batch > 0) {
    } else if (f == "--max-size" && has && ParseBytes(argv[++i], &a.max_size) && a.max_size > 0) {
    } else if (f == "--size" && has && ParseBytes(argv[++i], &a.size) && a.size > 0) {
    } else if (f == "--passes" && has && ParseCount(argv[++i], &v) && v >= 1) {
      a.passes = static_cast<unsigned>(v);
    } else if (!f.empty() && f[0] != '-') {
      a.paths.push_back(Absolute(f));
    } else {
      std::fprintf(stderr, "native_read: bad argument %s\n", f.c_str());
      return Usage();
    }
  }
  if (a.mode == "memcpy") {
    a.via = "memcpy";
    return Memcpy(a);
  }
  if (a.paths.empty()) return Usage();
  if (a.mode == "seq") return Seq(a);
  if (a.mode == "random") return Random(a);
  if (a.mode == "files") return Files(a);
  return Usage();
}
