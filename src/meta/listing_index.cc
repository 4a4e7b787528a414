#include "meta/listing_index.h"

#include <lmdb.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

namespace lakecache {
namespace {

// The index's own files besides LMDB's data.mdb and lock.mdb: `state` says whether a process
// has it open, under which boot and which pid ("open BOOT_ID PID" or "closed BOOT_ID PID": the
// last process to open it; a mount's new server opens it before the old one closes it);
// `corrupt` is left by a process that found it corrupt in use.
constexpr const char* kStateFile = "state";
constexpr const char* kCorruptFile = "corrupt";
// Readers at once: FUSE threads, revalidations, gRPC handlers.
constexpr unsigned kMaxReaders = 1024;

std::string BootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id.empty() ? "unknown" : id;
}

void WriteState(const std::string& dir, const std::string& state) {
  std::ofstream out(dir + "/" + kStateFile, std::ios::trunc);
  out << state << " " << BootId() << " " << ::getpid() << "\n";
}

// Whether this process is the last that opened the index in `dir`.
bool LastOpener(const std::string& dir) {
  std::ifstream in(dir + "/" + kStateFile);
  std::string state, boot;
  pid_t pid = 0;
  return (in >> state >> boot >> pid) && pid == ::getpid();
}

// Why the index in `dir` must not be trusted, or "" when it may be.
std::string DistrustReason(const std::string& dir) {
  std::error_code ec;
  if (std::filesystem::exists(dir + "/" + kCorruptFile, ec)) {
    return "a process found it corrupt";
  }
  std::ifstream in(dir + "/" + kStateFile);
  std::string state, boot;
  if (!(in >> state >> boot)) return "";
  if (state == "open" && boot != BootId()) {
    return "the machine went down while it was open (its last writes were not synced)";
  }
  return "";
}

MDB_val Val(std::string_view s) { return MDB_val{s.size(), const_cast<char*>(s.data())}; }

std::string Key(std::string_view scope, std::string_view dir) {
  std::string key;
  key.reserve(scope.size() + 1 + dir.size());
  key.append(scope).push_back('\0');
  key.append(dir);
  return key;
}

bool IsCorruption(int rc) {
  return rc == MDB_CORRUPTED || rc == MDB_PAGE_NOTFOUND || rc == MDB_INVALID ||
         rc == MDB_VERSION_MISMATCH || rc == MDB_BAD_TXN;
}

// Opens the environment in `dir` and walks to its first and last keys, which reads the pages a
// torn file would have lost. An LMDB error code, or MDB_SUCCESS with *env and *dbi set.
int OpenEnv(const std::string& dir, const ListingIndexOptions& options, MDB_env** env,
            MDB_dbi* dbi) {
  int rc = mdb_env_create(env);
  if (rc != MDB_SUCCESS) return rc;
  mdb_env_set_mapsize(*env, options.map_size);
  mdb_env_set_maxreaders(*env, kMaxReaders);
  rc = mdb_env_open(*env, dir.c_str(), MDB_NOTLS | MDB_NORDAHEAD | MDB_NOSYNC, 0600);
  MDB_txn* txn = nullptr;
  if (rc == MDB_SUCCESS) rc = mdb_txn_begin(*env, nullptr, MDB_RDONLY, &txn);
  if (rc == MDB_SUCCESS) rc = mdb_dbi_open(txn, nullptr, 0, dbi);
  MDB_cursor* cursor = nullptr;
  if (rc == MDB_SUCCESS) rc = mdb_cursor_open(txn, *dbi, &cursor);
  for (MDB_cursor_op op : {MDB_FIRST, MDB_LAST}) {
    MDB_val k{}, v{};
    if (rc == MDB_SUCCESS) rc = mdb_cursor_get(cursor, &k, &v, op);
    if (rc == MDB_NOTFOUND) rc = MDB_SUCCESS;
  }
  if (cursor != nullptr) mdb_cursor_close(cursor);
  if (txn != nullptr) mdb_txn_abort(txn);
  if (rc != MDB_SUCCESS) {
    mdb_env_close(*env);
    *env = nullptr;
  }
  return rc;
}

void RemoveIndexFiles(const std::string& dir) {
  std::error_code ec;
  for (const char* name : {"data.mdb", "lock.mdb", kCorruptFile}) {
    std::filesystem::remove(dir + "/" + name, ec);
  }
}

}  // namespace

Result<std::unique_ptr<ListingIndex>> ListingIndex::Open(const std::string& dir,
                                                         ListingIndexOptions options) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return Status::IoError("listing index " + dir + ": cannot make it: " + ec.message());
  }
  ::chmod(dir.c_str(), 0700);  // listings name the objects of every namespace
  if (options.empty) {
    RemoveIndexFiles(dir);
  } else if (std::string reason = DistrustReason(dir); !reason.empty()) {
    spdlog::warn("listing index {}: {}: rebuilt empty (listings are fetched again)", dir, reason);
    RemoveIndexFiles(dir);
  }
  MDB_env* env = nullptr;
  MDB_dbi dbi = 0;
  int rc = OpenEnv(dir, options, &env, &dbi);
  if (rc != MDB_SUCCESS && rc != EACCES && rc != EROFS && rc != ENOSPC) {
    spdlog::warn("listing index {}: unreadable ({}): rebuilt empty (listings are fetched again)",
                 dir, mdb_strerror(rc));
    RemoveIndexFiles(dir);
    rc = OpenEnv(dir, options, &env, &dbi);
  }
  if (rc != MDB_SUCCESS) {
    return Status::IoError("listing index " + dir + ": cannot open it: " + mdb_strerror(rc));
  }
  WriteState(dir, "open");
  return std::unique_ptr<ListingIndex>(
      new ListingIndex(dir, env, dbi, std::max<uint64_t>(options.unmap_every, 1)));
}

ListingIndex::~ListingIndex() {
  bool synced = !broken_ && mdb_env_sync(env_, 1) == MDB_SUCCESS;
  mdb_env_close(env_);
  if (synced && LastOpener(dir_)) WriteState(dir_, "closed");
}

void ListingIndex::Failed(int rc, std::string_view what) {
  if (rc == MDB_MAP_FULL || rc == ENOSPC || rc == EDQUOT) {
    full_ = true;
    if (!warned_.exchange(true)) {
      spdlog::warn(
          "listing index {}: full while {} ({}): listings that do not fit stay in memory only "
          "(raise its map size or free disk space)",
          dir_, what, mdb_strerror(rc));
    }
    return;
  }
  if (IsCorruption(rc) && !broken_.exchange(true)) {
    spdlog::error(
        "listing index {}: corrupt ({} while {}): no longer used; it is rebuilt empty at the next "
        "start",
        dir_, mdb_strerror(rc), what);
    std::ofstream(dir_ + "/" + kCorruptFile) << mdb_strerror(rc) << "\n";
    return;
  }
  if (!IsCorruption(rc) && !warned_.exchange(true)) {
    spdlog::warn("listing index {}: {} failed: {}", dir_, what, mdb_strerror(rc));
  }
}

bool ListingIndex::Put(std::string_view scope, std::string_view dir, const IndexedListing& folder) {
  if (broken_) return false;
  std::string key = Key(scope, dir);
  std::string value = Encode(folder);
  MDB_txn* txn = nullptr;
  int rc = mdb_txn_begin(env_, nullptr, 0, &txn);
  if (rc == MDB_SUCCESS) {
    MDB_val k = Val(key), v = Val(value);
    rc = mdb_put(txn, dbi_, &k, &v, 0);
    rc = rc == MDB_SUCCESS ? mdb_txn_commit(txn) : (mdb_txn_abort(txn), rc);
  }
  if (rc != MDB_SUCCESS) {
    Failed(rc, "writing a listing");
    return false;
  }
  Touched(value.size());
  return true;
}

void ListingIndex::Touched(size_t bytes) {
  const uint64_t before = touched_.fetch_add(bytes, std::memory_order_relaxed);
  if (before / unmap_every_ == (before + bytes) / unmap_every_) return;
  MDB_envinfo info;
  if (mdb_env_info(env_, &info) != MDB_SUCCESS) return;
  MutexLock lock(&unmap_mu_);
  // lmdb.h gives the map's address only for a fixed map: this process's maps name it.
  if (map_ == nullptr) {
    std::error_code ec;
    const std::string file = std::filesystem::canonical(dir_ + "/data.mdb", ec).string();
    std::ifstream maps("/proc/self/maps");
    for (std::string line; !ec && std::getline(maps, line);) {
      unsigned long lo = 0, hi = 0;
      if (line.ends_with(" " + file) && std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) == 2) {
        map_ = reinterpret_cast<char*>(lo);
        map_size_ = hi - lo;
        break;
      }
    }
    if (map_ == nullptr) return;
  }
  // Only the file's pages up to the last one used can be mapped.
  const size_t used = std::min<size_t>((info.me_last_pgno + 1) * ::getpagesize(), map_size_);
  ::madvise(map_, used, MADV_DONTNEED);
}

std::optional<IndexedListing> ListingIndex::Get(std::string_view scope, std::string_view dir) {
  if (broken_) return std::nullopt;
  std::string key = Key(scope, dir);
  MDB_txn* txn = nullptr;
  int rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn);
  std::optional<IndexedListing> out;
  bool bad_value = false;
  if (rc == MDB_SUCCESS) {
    MDB_val k = Val(key), v{};
    rc = mdb_get(txn, dbi_, &k, &v);
    if (rc == MDB_SUCCESS) {
      out = Decode(std::string_view(static_cast<const char*>(v.mv_data), v.mv_size));
      bad_value = !out.has_value();
    }
    mdb_txn_abort(txn);
    Touched(v.mv_size);
  }
  if (rc != MDB_SUCCESS && rc != MDB_NOTFOUND) Failed(rc, "reading a listing");
  if (bad_value) {
    spdlog::warn("listing index {}: the listing of '{}' is corrupt: erased, listed again", dir_,
                 dir);
    Erase(scope, dir);
  }
  return out;
}

void ListingIndex::Erase(std::string_view scope, std::string_view dir) {
  if (broken_) return;
  std::string key = Key(scope, dir);
  MDB_txn* txn = nullptr;
  int rc = mdb_txn_begin(env_, nullptr, 0, &txn);
  if (rc == MDB_SUCCESS) {
    MDB_val k = Val(key);
    rc = mdb_del(txn, dbi_, &k, nullptr);
    if (rc == MDB_NOTFOUND) rc = MDB_SUCCESS;
    rc = rc == MDB_SUCCESS ? mdb_txn_commit(txn) : (mdb_txn_abort(txn), rc);
  }
  if (rc != MDB_SUCCESS) Failed(rc, "erasing a listing");
}

size_t ListingIndex::EraseBelow(std::string_view scope, std::string_view dir) {
  if (broken_) return 0;
  // "dir" itself, then the run of keys that start "dir/" ("dir-x" sorts between the two).
  std::string exact = Key(scope, dir);
  std::string below = dir.empty() ? exact : exact + "/";
  std::vector<std::string> keys = {exact};
  MDB_txn* txn = nullptr;
  int rc = mdb_txn_begin(env_, nullptr, 0, &txn);
  MDB_cursor* cursor = nullptr;
  if (rc == MDB_SUCCESS) rc = mdb_cursor_open(txn, dbi_, &cursor);
  MDB_val key = Val(below), value{};
  for (MDB_cursor_op op = MDB_SET_RANGE; rc == MDB_SUCCESS; op = MDB_NEXT) {
    rc = mdb_cursor_get(cursor, &key, &value, op);
    std::string_view found(static_cast<const char*>(key.mv_data), key.mv_size);
    if (rc != MDB_SUCCESS || !found.starts_with(below)) break;
    if (found != exact) keys.emplace_back(found);
  }
  if (cursor != nullptr) mdb_cursor_close(cursor);
  size_t erased = 0;
  if (rc == MDB_SUCCESS || rc == MDB_NOTFOUND) {
    rc = MDB_SUCCESS;
    for (size_t i = 0; i < keys.size() && rc == MDB_SUCCESS; ++i) {
      MDB_val k = Val(keys[i]);
      rc = mdb_del(txn, dbi_, &k, nullptr);
      if (rc == MDB_SUCCESS) ++erased;
      if (rc == MDB_NOTFOUND) rc = MDB_SUCCESS;
    }
  }
  if (txn != nullptr) rc = rc == MDB_SUCCESS ? mdb_txn_commit(txn) : (mdb_txn_abort(txn), rc);
  if (rc != MDB_SUCCESS) {
    Failed(rc, "erasing listings");
    return 0;
  }
  return erased;
}

}  // namespace lakecache
