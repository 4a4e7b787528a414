// UploadRegistry: the multipart uploads a mount's server has started and not finished, kept in a
// file of its own, so that the next server of the same mountpoint aborts what a crash left behind.
//
// Each server writes `<base>.<pid>` (one line per upload: namespace, key, upload id, escaped), so
// that two servers of one mount (a takeover) never write one file. At start, a server takes the
// files of servers that are gone as leftovers. Aborts run on a thread of this class and are
// retried, with a growing pause, until the store answers; what is still pending at shutdown stays
// in the file for the next server. Thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "ufs/object_store.h"

namespace lakecache {

struct UploadRecord {
  std::string ns;  // namespace name
  std::string key;
  std::string upload_id;
  bool operator==(const UploadRecord&) const = default;
};

class UploadRegistry {
 public:
  // `base` empty: nothing is written to disk (tests, or a mount without a run folder).
  explicit UploadRegistry(std::string base);
  ~UploadRegistry();

  // The uploads of servers of this mountpoint that are gone; their files are removed once every
  // upload listed is aborted (AbortLeftovers).
  std::vector<UploadRecord> Leftovers() const;
  // Aborts every leftover upload whose namespace `store_of` knows (null: a namespace this config
  // no longer has, which is kept for a later server), in the background.
  void AbortLeftovers(
      const std::function<std::shared_ptr<ObjectStore>(const std::string&)>& store_of);

  void Add(const UploadRecord& upload) EXCLUDES(mu_);
  void Remove(const UploadRecord& upload) EXCLUDES(mu_);
  // Aborts `upload` on `store` in the background, retrying until the store answers; then
  // removes it.
  void AbortLater(std::shared_ptr<ObjectStore> store, const UploadRecord& upload) EXCLUDES(mu_);

  // Aborts started and not yet answered.
  size_t pending_aborts() const EXCLUDES(mu_);
  uint64_t aborted() const EXCLUDES(mu_);

 private:
  struct Abort {
    std::shared_ptr<ObjectStore> store;
    UploadRecord upload;
    std::string from_file;  // a leftover's file, removed with its last upload
  };
  void Save() REQUIRES(mu_);
  // An abort answered for good (done, or a store that cannot abort).
  void Settled(const Abort& a) REQUIRES(mu_);
  void RunAborts();

  const std::string base_;
  const std::string file_;                                                    // base_.<pid>
  std::vector<std::pair<std::string, std::vector<UploadRecord>>> leftovers_;  // by file
  mutable Mutex mu_;
  CondVar changed_;
  std::vector<UploadRecord> uploads_ GUARDED_BY(mu_);
  std::vector<Abort> aborts_ GUARDED_BY(mu_);
  std::map<std::string, size_t> leftover_left_ GUARDED_BY(mu_);  // by leftover file
  uint64_t aborted_ GUARDED_BY(mu_) = 0;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread aborter_;
};

// "a\tb" <-> "a%09b": a key as one field of a registry line.
std::string EscapeField(std::string_view field);
std::string UnescapeField(std::string_view field);

}  // namespace lakecache
