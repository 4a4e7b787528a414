// RocksDB and LMDB behind bench/meta_index_engines.h, with the settings DescribeIndexes names.
#include "meta_index_engines.h"

#include <lmdb.h>
#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/table.h>
#include <rocksdb/version.h>
#include <rocksdb/write_batch.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

namespace lakecache::bench {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

void Check(const rocksdb::Status& s, const char* what) {
  if (!s.ok()) Die(std::string(what) + ": " + s.ToString());
}

class RocksReader final : public IndexReader {
 public:
  explicit RocksReader(rocksdb::DB* db) : db_(db) {}
  bool Get(const std::string& key, uint64_t* sink) override {
    rocksdb::PinnableSlice value;
    const rocksdb::Status s =
        db_->Get(rocksdb::ReadOptions(), db_->DefaultColumnFamily(), key, &value);
    if (s.IsNotFound()) return false;
    Check(s, "rocksdb get");
    *sink += Load64(value.data());
    return true;
  }
  uint64_t Scan(const std::string& start, uint64_t limit, uint64_t* sink) override {
    std::string end = start;
    end.back() = '\x01';  // start ends in '\0'
    const rocksdb::Slice end_slice(end);
    rocksdb::ReadOptions options;
    options.iterate_upper_bound = &end_slice;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(options));
    uint64_t n = 0;
    for (it->Seek(start); it->Valid() && n < limit; it->Next(), ++n) {
      *sink += it->key().size() + Load64(it->value().data());
    }
    Check(it->status(), "rocksdb scan");
    return n;
  }

 private:
  rocksdb::DB* db_;
};

class RocksIndex final : public Index {
 public:
  RocksIndex(const std::string& dir, const IndexOptions& o) : sync_(o.sync) {
    rocksdb::BlockBasedTableOptions table;
    table.block_cache = rocksdb::NewLRUCache(o.block_cache_mib * kMiB);
    table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
    table.cache_index_and_filter_blocks = true;  // bounded memory: charged to the block cache
    table.pin_l0_filter_and_index_blocks_in_cache = true;
    // Partitioned: a table file's whole index and filter blocks are over 1 MiB at 10M entries,
    // more than a shard of the cache (1/64), so every get read them again (1 MiB per get, seen).
    table.index_type = rocksdb::BlockBasedTableOptions::kTwoLevelIndexSearch;
    table.partition_filters = true;
    table.pin_top_level_index_and_filter = true;
    rocksdb::Options options;
    options.create_if_missing = true;
    options.compression = rocksdb::kLZ4Compression;
    options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
    rocksdb::DB* db = nullptr;
    Check(rocksdb::DB::Open(options, dir, &db), "rocksdb open");
    db_.reset(db);
  }
  ~RocksIndex() override { Check(db_->Close(), "rocksdb close"); }

  void Put(const Batch& batch) override {
    rocksdb::WriteBatch wb;
    for (const auto& [key, value] : batch) Check(wb.Put(key, value), "rocksdb batch");
    rocksdb::WriteOptions options;
    options.sync = sync_;
    Check(db_->Write(options, &wb), "rocksdb write");
  }
  void WaitIdle() override {
    for (int i = 0; i < 36'000; ++i) {  // an hour at most
      if (Property("rocksdb.num-running-compactions") + Property("rocksdb.num-running-flushes") +
              Property("rocksdb.compaction-pending") +
              Property("rocksdb.mem-table-flush-pending") ==
          0) {
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    Die("rocksdb still compacting after an hour");
  }
  std::unique_ptr<IndexReader> NewReader() override {
    return std::make_unique<RocksReader>(db_.get());
  }

 private:
  uint64_t Property(const char* name) {
    uint64_t v = 0;
    if (!db_->GetIntProperty(name, &v)) Die(std::string("rocksdb property ") + name);
    return v;
  }
  const bool sync_;
  std::unique_ptr<rocksdb::DB> db_;
};

void CheckMdb(int rc, const char* what) {
  if (rc != MDB_SUCCESS) Die(std::string(what) + ": " + mdb_strerror(rc));
}

MDB_val Val(const std::string& s) { return MDB_val{s.size(), const_cast<char*>(s.data())}; }

// A read transaction reset between requests and renewed for each, as a server's would be.
class LmdbReader final : public IndexReader {
 public:
  LmdbReader(MDB_env* env, MDB_dbi dbi) : dbi_(dbi) {
    CheckMdb(mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn_), "mdb read txn");
    CheckMdb(mdb_cursor_open(txn_, dbi_, &cursor_), "mdb cursor");
    mdb_txn_reset(txn_);
  }
  ~LmdbReader() override {
    mdb_cursor_close(cursor_);
    mdb_txn_abort(txn_);
  }
  bool Get(const std::string& key, uint64_t* sink) override {
    CheckMdb(mdb_txn_renew(txn_), "mdb renew");
    MDB_val k = Val(key), v{};
    const int rc = mdb_get(txn_, dbi_, &k, &v);
    if (rc == MDB_SUCCESS) *sink += Load64(v.mv_data);
    mdb_txn_reset(txn_);
    if (rc == MDB_NOTFOUND) return false;
    CheckMdb(rc, "mdb get");
    return true;
  }
  uint64_t Scan(const std::string& start, uint64_t limit, uint64_t* sink) override {
    CheckMdb(mdb_txn_renew(txn_), "mdb renew");
    CheckMdb(mdb_cursor_renew(txn_, cursor_), "mdb cursor renew");
    MDB_val k = Val(start), v{};
    uint64_t n = 0;
    int rc = mdb_cursor_get(cursor_, &k, &v, MDB_SET_RANGE);
    for (; rc == MDB_SUCCESS && n < limit; ++n) {
      if (k.mv_size < start.size() || std::memcmp(k.mv_data, start.data(), start.size()) != 0) {
        break;
      }
      *sink += k.mv_size + Load64(v.mv_data);
      rc = mdb_cursor_get(cursor_, &k, &v, MDB_NEXT);
    }
    mdb_txn_reset(txn_);
    if (rc != MDB_NOTFOUND) CheckMdb(rc, "mdb scan");
    return n;
  }

 private:
  const MDB_dbi dbi_;
  MDB_txn* txn_ = nullptr;
  MDB_cursor* cursor_ = nullptr;
};

class LmdbIndex final : public Index {
 public:
  LmdbIndex(const std::string& dir, const IndexOptions& o) {
    CheckMdb(mdb_env_create(&env_), "mdb env");
    CheckMdb(mdb_env_set_mapsize(env_, o.map_bytes), "mdb map size");
    // NORDAHEAD: random reads of a file larger than memory; NOTLS: readers are not tied to threads.
    const unsigned flags = MDB_NOTLS | MDB_NORDAHEAD | (o.sync ? 0 : MDB_NOSYNC);
    CheckMdb(mdb_env_open(env_, dir.c_str(), flags, 0644), "mdb open");
    MDB_txn* txn = nullptr;
    CheckMdb(mdb_txn_begin(env_, nullptr, 0, &txn), "mdb txn");
    CheckMdb(mdb_dbi_open(txn, nullptr, 0, &dbi_), "mdb dbi");
    CheckMdb(mdb_txn_commit(txn), "mdb commit");
  }
  ~LmdbIndex() override { mdb_env_close(env_); }

  void Put(const Batch& batch) override {
    MDB_txn* txn = nullptr;
    CheckMdb(mdb_txn_begin(env_, nullptr, 0, &txn), "mdb txn");
    for (const auto& [key, value] : batch) {
      MDB_val k = Val(key), v = Val(value);
      CheckMdb(mdb_put(txn, dbi_, &k, &v, 0), "mdb put");
    }
    CheckMdb(mdb_txn_commit(txn), "mdb commit");
  }
  void WaitIdle() override {}
  std::unique_ptr<IndexReader> NewReader() override {
    return std::make_unique<LmdbReader>(env_, dbi_);
  }

 private:
  MDB_env* env_ = nullptr;
  MDB_dbi dbi_ = 0;
};

}  // namespace

void Die(const std::string& what) {
  std::fprintf(stderr, "meta_index: %s\n", what.c_str());
  std::fflush(nullptr);
  _exit(1);  // also in forked children: the engines' static destructors run in one process only
}

uint64_t Load64(const void* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

std::unique_ptr<Index> OpenIndex(std::string_view engine, const std::string& dir,
                                 const IndexOptions& options) {
  if (engine == "rocksdb") return std::make_unique<RocksIndex>(dir, options);
  if (engine == "lmdb") return std::make_unique<LmdbIndex>(dir, options);
  Die("no engine " + std::string(engine));
}

std::string DescribeIndexes(const IndexOptions& o) {
  char text[512];
  std::snprintf(
      text, sizeof text,
      "RocksDB %d.%d.%d: LZ4, block cache %llu MiB holding the partitioned index and filter "
      "blocks (top level and L0's pinned), bloom filters 10 bits/key, memtables 64 MiB x 2, WAL%s, "
      "a WriteBatch "
      "per folder. LMDB %d.%d.%d: map %.1f GiB, MDB_NOTLS|MDB_NORDAHEAD%s, a write txn "
      "per folder, a read txn reset and renewed per get or page.",
      ROCKSDB_MAJOR, ROCKSDB_MINOR, ROCKSDB_PATCH,
      static_cast<unsigned long long>(o.block_cache_mib), o.sync ? " fsynced" : "",
      MDB_VERSION_MAJOR, MDB_VERSION_MINOR, MDB_VERSION_PATCH,
      static_cast<double>(o.map_bytes) / (kMiB << 10), o.sync ? "" : "|MDB_NOSYNC");
  return text;
}

}  // namespace lakecache::bench
