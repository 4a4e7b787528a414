// meta_index: RocksDB and LMDB side by side as the on-disk index of listings and attributes (a
// mount's, or the master's): (folder, name) -> attributes, read as stats and as readdir pages.
//
//   meta_index [--entries N | --quick] [--dir /tmp] [--engines rocksdb,lmdb] [--gets 1000000]
//              [--cold-gets 20000] [--scans 10000] [--cold-scans 1000] [--block-cache-mib 64]
//              [--sync] [--seed S]
//
// Model: N entries (default 10M, --quick 1M) in folders of 1,000 names; key = folder path, '\0',
// name ("ns1/imagenet/train/d000123\0f0456.bin"), so a folder is one contiguous sorted range;
// value = 49 bytes (size u64, mtime i64, is_dir u8, an ETag of 32 hex chars). Each engine runs in
// a child process of its own (so the RSS is its own) on a fresh folder under --dir, removed after.
//   load     a grandchild inserts every folder, in a shuffled folder order (a mount fills its index
//            as folders are listed), one atomic batch per folder (RocksDB: a WriteBatch; LMDB: a
//            write transaction), and waits for the engine to settle (RocksDB's flushes and
//            compactions); then it writes folders of a second namespace until SIGKILLed mid-write,
//            never closing the database. entries/s counts the time inside the batch writes.
//   recover  open after that kill (ms); every loaded folder must be whole, and the second
//            namespace's folders whole or absent, the whole ones first.
//   size     allocated bytes of the database folder after a clean close.
//   reopen   open after a clean close, page cache warm (ms).
//   cold     as root: close, sync, drop the page cache, open; --cold-gets random gets on one
//            thread; again for --cold-scans pages. Not root: skipped, with a note.
//   warm     --gets random gets once, then the same gets timed on 1 and on 2 threads (split
//            between them); --scans readdir pages (the first 1,000 entries of a random folder
//            through an iterator or cursor) once, then timed.
// Writes are not fsynced (RocksDB: WAL on, sync=false; LMDB: MDB_NOSYNC): both survive a process
// kill, not a power loss; --sync fsyncs every batch in both. The engines' settings are in
// meta_index_engines.cc, and printed above the table. Exit status 1 on an error, 2 on bad usage.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <latch>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "meta_index_engines.h"

namespace lakecache::bench {
namespace {

constexpr uint64_t kFolderSize = 1000;
constexpr uint64_t kValueSize = 49;
constexpr uint64_t kExtraFolders = 5000;  // bounds the writes that the kill interrupts
constexpr uint64_t kMiB = uint64_t{1} << 20;
using Clock = std::chrono::steady_clock;

struct Options {
  uint64_t entries = 10'000'000;
  std::string dir = "/tmp";
  std::vector<std::string> engines = {"rocksdb", "lmdb"};
  uint64_t gets = 1'000'000;
  uint64_t cold_gets = 20'000;
  uint64_t scans = 10'000;
  uint64_t cold_scans = 1'000;
  IndexOptions index;  // its map_bytes set from entries after parsing
  uint64_t seed = 1;
  uint64_t folders() const { return entries / kFolderSize; }
};

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

uint64_t Mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9;
  x = (x ^ (x >> 27)) * 0x94d049bb133111eb;
  return x ^ (x >> 31);
}

void AppendDigits(std::string* s, uint64_t v, int width) {
  const size_t at = s->size();
  s->append(width, '0');
  for (int i = width - 1; i >= 0 && v > 0; --i, v /= 10) (*s)[at + i] = char('0' + v % 10);
}

// The start of a folder's range: its path and '\0'. Namespace 2 is the one the kill interrupts.
void FolderStart(int ns, uint64_t folder, std::string* key) {
  key->assign(ns == 1 ? "ns1/imagenet/train/d" : "ns2/imagenet/train/d");
  AppendDigits(key, folder, 6);
  key->push_back('\0');
}

void EntryKey(int ns, uint64_t folder, uint64_t name, std::string* key) {
  FolderStart(ns, folder, key);
  key->push_back('f');
  AppendDigits(key, name, 4);
  key->append(".bin");
}

std::string Value(uint64_t entry) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string v(kValueSize, '\0');
  const uint64_t size = Mix(entry) % (64 * kMiB);
  const int64_t mtime = 1'700'000'000 + static_cast<int64_t>(entry % 1'000'000);
  std::memcpy(&v[0], &size, 8);
  std::memcpy(&v[8], &mtime, 8);
  const uint64_t etag[2] = {Mix(entry ^ 0x5eed), Mix(entry + 0x5eed)};
  for (int i = 0; i < 32; ++i) v[17 + i] = kHex[(etag[i / 16] >> (4 * (i % 16))) & 15];
  return v;
}

struct Memory {
  double rss_mib = 0;
  double anon_mib = 0;
};

Memory ReadMemory() {
  std::ifstream status("/proc/self/status");
  Memory m;
  unsigned long long kib = 0;
  for (std::string line; std::getline(status, line);) {
    if (std::sscanf(line.c_str(), "VmRSS: %llu kB", &kib) == 1) m.rss_mib = kib / 1024.0;
    if (std::sscanf(line.c_str(), "RssAnon: %llu kB", &kib) == 1) m.anon_mib = kib / 1024.0;
  }
  return m;
}

double AllocatedMiB(const std::string& dir) {
  uint64_t bytes = 0;
  for (const auto& file : std::filesystem::directory_iterator(dir)) {
    struct stat st {};
    if (::stat(file.path().c_str(), &st) == 0) bytes += static_cast<uint64_t>(st.st_blocks) * 512;
  }
  return static_cast<double>(bytes) / kMiB;
}

// Drops the whole machine's page cache; false without the right to.
bool DropCaches() {
  if (geteuid() != 0) return false;
  sync();
  const int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
  if (fd < 0) return false;
  const bool ok = write(fd, "3\n", 2) == 2;
  close(fd);
  return ok;
}

Index::Batch FolderBatch(int ns, uint64_t folder) {
  Index::Batch batch(kFolderSize);
  for (uint64_t name = 0; name < kFolderSize; ++name) {
    EntryKey(ns, folder, name, &batch[name].first);
    batch[name].second = Value(folder * kFolderSize + name);
  }
  return batch;
}

void WriteAll(int fd, const void* data, size_t size) {
  if (write(fd, data, size) != static_cast<ssize_t>(size)) Die("pipe write");
}

bool ReadAll(int fd, void* data, size_t size) {
  auto* p = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = read(fd, p, size);
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

struct LoadReport {
  double put_s = 0;
  double settle_s = 0;
  Memory memory;
};

// The grandchild: loads, reports on `fd`, then writes namespace 2 until it is killed.
[[noreturn]] void LoadUntilKilled(const std::string& engine, const std::string& dir,
                                  const Options& o, int fd) {
  std::vector<uint64_t> order(o.folders());
  std::iota(order.begin(), order.end(), uint64_t{0});
  std::shuffle(order.begin(), order.end(), std::mt19937_64(o.seed));
  std::unique_ptr<Index> index = OpenIndex(engine, dir, o.index);
  LoadReport report;
  for (uint64_t folder : order) {
    const Index::Batch batch = FolderBatch(1, folder);
    const Clock::time_point start = Clock::now();
    index->Put(batch);
    report.put_s += Seconds(start);
  }
  const Clock::time_point start = Clock::now();
  index->WaitIdle();
  report.settle_s = Seconds(start);
  report.memory = ReadMemory();
  WriteAll(fd, &report, sizeof report);
  for (uint64_t folder = 0; folder < kExtraFolders; ++folder) index->Put(FolderBatch(2, folder));
  raise(SIGKILL);  // never closed: a crash is the point
  _exit(1);
}

LoadReport LoadAndKill(const std::string& engine, const std::string& dir, const Options& o) {
  int fds[2];
  if (pipe(fds) != 0) Die("pipe");
  const pid_t pid = fork();
  if (pid < 0) Die("fork");
  if (pid == 0) {
    close(fds[0]);
    LoadUntilKilled(engine, dir, o, fds[1]);
  }
  close(fds[1]);
  LoadReport report;
  const bool reported = ReadAll(fds[0], &report, sizeof report);
  close(fds[0]);
  if (reported) std::this_thread::sleep_for(std::chrono::milliseconds(20));  // mid-write
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!reported) Die(engine + ": the load failed");
  return report;
}

// After the kill: every loaded folder is whole; namespace 2's are whole or absent, the whole ones
// first (batches apply in order). Returns how many of namespace 2's are whole.
uint64_t CheckAfterKill(Index& index, const Options& o) {
  const std::unique_ptr<IndexReader> reader = index.NewReader();
  std::string start;
  uint64_t sink = 0;
  for (uint64_t folder = 0; folder < o.folders(); ++folder) {
    FolderStart(1, folder, &start);
    const uint64_t n = reader->Scan(start, kFolderSize + 1, &sink);
    if (n != kFolderSize) {
      Die("after the kill, loaded folder " + std::to_string(folder) + " has " + std::to_string(n) +
          " entries");
    }
  }
  uint64_t whole = 0;
  for (uint64_t folder = 0; folder < kExtraFolders; ++folder) {
    FolderStart(2, folder, &start);
    const uint64_t n = reader->Scan(start, kFolderSize + 1, &sink);
    if (n != 0 && (n != kFolderSize || whole != folder)) {
      Die("after the kill, a torn or reordered batch: folder " + std::to_string(folder));
    }
    if (n == kFolderSize) ++whole;
  }
  return whole;
}

std::atomic<uint64_t> g_sink{0};

// `count` random gets on `threads` threads, the same keys whatever the threads; gets/s, timed
// from the first thread's start to the last one's end.
double GetPass(Index& index, const Options& o, unsigned threads, uint64_t count, uint64_t seed) {
  std::latch ready(threads);
  std::atomic<uint64_t> missing{0};
  std::vector<std::pair<Clock::time_point, Clock::time_point>> spans(threads);
  std::vector<std::thread> pool;
  const uint64_t share = count / threads;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      const std::unique_ptr<IndexReader> reader = index.NewReader();
      std::string key;
      uint64_t sink = 0, miss = 0;
      ready.arrive_and_wait();
      spans[t].first = Clock::now();
      for (uint64_t i = t * share; i < (t + 1) * share; ++i) {
        const uint64_t entry = Mix(seed * 0x100000000 + i) % o.entries;
        EntryKey(1, entry / kFolderSize, entry % kFolderSize, &key);
        if (!reader->Get(key, &sink)) ++miss;
      }
      spans[t].second = Clock::now();
      missing += miss;
      g_sink += sink;
    });
  }
  for (std::thread& thread : pool) thread.join();
  if (missing > 0) Die(std::to_string(missing.load()) + " gets missed");
  Clock::time_point first = spans[0].first, last = spans[0].second;
  for (const auto& [begin, end] : spans) {
    first = std::min(first, begin);
    last = std::max(last, end);
  }
  return static_cast<double>(share * threads) / std::chrono::duration<double>(last - first).count();
}

// `count` readdir pages of random folders on one thread; pages/s.
double ScanPass(Index& index, const Options& o, uint64_t count, uint64_t seed) {
  const std::unique_ptr<IndexReader> reader = index.NewReader();
  std::string start;
  uint64_t sink = 0;
  const Clock::time_point began = Clock::now();
  for (uint64_t i = 0; i < count; ++i) {
    FolderStart(1, Mix(seed * 0x100000000 + i) % o.folders(), &start);
    if (reader->Scan(start, kFolderSize, &sink) != kFolderSize) Die("a short page");
  }
  const double seconds = Seconds(began);
  g_sink += sink;
  return static_cast<double>(count) / seconds;
}

struct Row {
  char engine[16] = {};
  double load_eps = 0, settle_s = 0, disk_mib = 0, recover_ms = 0, reopen_ms = 0;
  double warm1 = 0, warm2 = 0, cold_gets = 0, warm_scans = 0, cold_scans = 0;
  Memory memory;  // after the reads
  uint64_t whole_after_kill = 0;
  bool cold = false;
};

void Log(const Row& row, const char* phase, const std::string& what) {
  const Memory m = ReadMemory();
  std::printf("[%s] %-8s %s; RSS %.0f MiB (anon %.0f)\n", row.engine, phase, what.c_str(),
              m.rss_mib, m.anon_mib);
  std::fflush(stdout);
}

// Opens with a cold page cache (and a new, empty block cache): false when caches cannot be dropped.
bool ColdOpen(const std::string& engine, const std::string& dir, const Options& o,
              std::unique_ptr<Index>* index) {
  index->reset();
  const bool dropped = DropCaches();
  *index = OpenIndex(engine, dir, o.index);
  return dropped;
}

double Ms(Clock::time_point since) { return Seconds(since) * 1000; }

std::string Fixed(double v, int digits = 0) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", digits, v);
  return text;
}

Row RunEngine(const std::string& engine, const std::string& dir, const Options& o) {
  Row row;
  std::snprintf(row.engine, sizeof row.engine, "%s", engine.c_str());
  const LoadReport load = LoadAndKill(engine, dir, o);
  row.load_eps = static_cast<double>(o.entries) / load.put_s;
  row.settle_s = load.settle_s;
  std::printf(
      "[%s] load     %.0f entries/s (%.1f s in writes), settled in %.1f s; RSS %.0f MiB "
      "(anon %.0f)\n",
      row.engine, row.load_eps, load.put_s, row.settle_s, load.memory.rss_mib,
      load.memory.anon_mib);
  Clock::time_point start = Clock::now();
  std::unique_ptr<Index> index = OpenIndex(engine, dir, o.index);
  row.recover_ms = Ms(start);
  row.whole_after_kill = CheckAfterKill(*index, o);
  index->WaitIdle();
  Log(row, "recover",
      Fixed(row.recover_ms, 1) + " ms; all loaded folders whole; " +
          std::to_string(row.whole_after_kill) + " folders written before the kill whole");
  index.reset();
  row.disk_mib = AllocatedMiB(dir);
  start = Clock::now();
  index = OpenIndex(engine, dir, o.index);
  row.reopen_ms = Ms(start);
  Log(row, "reopen", Fixed(row.reopen_ms, 1) + " ms; " + Fixed(row.disk_mib, 0) + " MiB on disk");
  row.cold = ColdOpen(engine, dir, o, &index);
  if (row.cold) {
    row.cold_gets = GetPass(*index, o, 1, o.cold_gets, o.seed + 1);
    Log(row, "cold get", Fixed(row.cold_gets, 0) + " gets/s");
    ColdOpen(engine, dir, o, &index);
    row.cold_scans = ScanPass(*index, o, o.cold_scans, o.seed + 2);
    Log(row, "cold scan", Fixed(row.cold_scans, 0) + " pages/s");
  } else {
    std::printf("[%s] cold     skipped: the page cache can be dropped only as root\n", row.engine);
  }
  GetPass(*index, o, 1, o.gets, o.seed);
  row.warm1 = GetPass(*index, o, 1, o.gets, o.seed);
  row.warm2 = GetPass(*index, o, 2, o.gets, o.seed);
  Log(row, "warm get", Fixed(row.warm1, 0) + " gets/s 1t, " + Fixed(row.warm2, 0) + " 2t");
  ScanPass(*index, o, o.scans, o.seed + 3);
  row.warm_scans = ScanPass(*index, o, o.scans, o.seed + 3);
  row.memory = ReadMemory();
  Log(row, "warm scan", Fixed(row.warm_scans, 0) + " pages/s");
  return row;
}

// Runs one engine in a child process on a fresh folder, removed after; false when it failed.
bool RunChild(const std::string& engine, const Options& o, Row* row) {
  std::string dir = o.dir + "/meta_index." + engine + ".XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) Die("mkdtemp under " + o.dir);
  int fds[2];
  if (pipe(fds) != 0) Die("pipe");
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) Die("fork");
  if (pid == 0) {
    signal(SIGINT, SIG_DFL);
    close(fds[0]);
    const Row result = RunEngine(engine, dir, o);
    WriteAll(fds[1], &result, sizeof result);
    std::fflush(nullptr);
    _exit(0);
  }
  close(fds[1]);
  const bool ok = ReadAll(fds[0], row, sizeof *row);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

void PrintTable(const std::vector<Row>& rows, const Options& o) {
  std::printf("\n%llu entries in folders of %llu. %s\n", static_cast<unsigned long long>(o.entries),
              static_cast<unsigned long long>(kFolderSize), DescribeIndexes(o.index).c_str());
  std::printf("%-8s %11s %7s %7s %8s %7s %10s %10s %9s %8s %7s %11s\n", "engine", "load ent/s",
              "settle", "DB MiB", "recov ms", "reopen", "get/s 1t", "get/s 2t", "cold get",
              "pages/s", "cold pg", "RSS (anon)");
  for (const Row& r : rows) {
    std::printf("%-8s %11.0f %6.1fs %7.0f %8.0f %7.1f %10.0f %10.0f %9s %8.0f %7s %5.0f (%4.0f)\n",
                r.engine, r.load_eps, r.settle_s, r.disk_mib, r.recover_ms, r.reopen_ms, r.warm1,
                r.warm2, r.cold ? Fixed(r.cold_gets).c_str() : "n/a", r.warm_scans,
                r.cold ? Fixed(r.cold_scans).c_str() : "n/a", r.memory.rss_mib, r.memory.anon_mib);
  }
  std::printf(
      "RSS: MiB after the reads, the anonymous part in parentheses (the rest: mapped file)\n");
}

int Usage() {
  std::fprintf(stderr,
               "usage: meta_index [--entries N | --quick] [--dir /tmp] [--engines rocksdb,lmdb]\n"
               "                  [--gets N] [--cold-gets N] [--scans N] [--cold-scans N]\n"
               "                  [--block-cache-mib N] [--sync] [--seed S]\n"
               "  N entries: a multiple of 1000 from 1000 to 1e9 (default 1e7; --quick 1e6)\n");
  return 2;
}

bool ParseEngines(std::string_view list, std::vector<std::string>* engines) {
  engines->clear();
  while (!list.empty()) {
    const size_t comma = std::min(list.find(','), list.size());
    engines->emplace_back(list.substr(0, comma));
    if (engines->back() != "rocksdb" && engines->back() != "lmdb") return false;
    list.remove_prefix(std::min(comma + 1, list.size()));
  }
  return !engines->empty();
}

bool ParseOptions(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const bool has = i + 1 < argc;
    auto number = [&](uint64_t* v) { return (*v = std::strtoull(argv[++i], nullptr, 10)) > 0; };
    if (arg == "--quick") {
      o->entries = 1'000'000;
    } else if (arg == "--sync") {
      o->index.sync = true;
    } else if (arg == "--dir" && has) {
      o->dir = argv[++i];
    } else if (arg == "--engines" && has) {
      if (!ParseEngines(argv[++i], &o->engines)) return false;
    } else if (!has || !((arg == "--entries" && number(&o->entries)) ||
                         (arg == "--gets" && number(&o->gets)) ||
                         (arg == "--cold-gets" && number(&o->cold_gets)) ||
                         (arg == "--scans" && number(&o->scans)) ||
                         (arg == "--cold-scans" && number(&o->cold_scans)) ||
                         (arg == "--block-cache-mib" && number(&o->index.block_cache_mib)) ||
                         (arg == "--seed" && number(&o->seed)))) {
      return false;
    }
  }
  o->index.map_bytes = (o->entries + kExtraFolders * kFolderSize) * 512 + (kMiB << 10);
  return o->entries % kFolderSize == 0 && o->entries <= 1'000'000'000 && o->gets >= 2;
}

int Main(int argc, char** argv) {
  Options o;
  if (!ParseOptions(argc, argv, &o)) return Usage();
  signal(SIGINT, SIG_IGN);  // ^C ends the children; this process still removes their folders
  std::vector<Row> rows;
  for (const std::string& engine : o.engines) {
    Row row;
    if (!RunChild(engine, o, &row)) {
      std::fprintf(stderr, "meta_index: %s failed\n", engine.c_str());
      return 1;
    }
    rows.push_back(row);
  }
  PrintTable(rows, o);
  return 0;
}

}  // namespace
}  // namespace lakecache::bench

int main(int argc, char** argv) { return lakecache::bench::Main(argc, argv); }
