// POSIX file helpers shared by LocalStore's source files (local_store.cc, local_store_uploads.cc):
// errno to Status, whole-buffer reads and writes, and files that appear whole or not at all.
//
// Every Status names `name` (the store's URI of the file). Thread-safe: no shared state.
#pragma once

#include <sys/stat.h>

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"
#include "common/scoped_fd.h"
#include "ufs/local_store.h"
#include "ufs/object_store.h"

namespace lakecache::local_files {

inline constexpr std::string_view kUploadsDir = LocalStore::kUploadsDir;
inline constexpr std::string_view kTempPrefix = LocalStore::kTempPrefix;

Status ErrnoStatus(int err, const std::string& name);
Status CheckDeadline(const IoOptions& options, const std::string& name);

// Splits "a/b/c" into its '/'-separated segments.
std::vector<std::string_view> Segments(std::string_view path);

// A key names exactly one file below the root: no "..", which would escape it, no empty or "."
// segment, which would give one file two keys, and nothing in LocalStore's staging folder.
Status ValidateKey(std::string_view key, const std::string& name);
Status Precheck(std::string_view key, const IoOptions& options, const std::string& name);

// Size, mtime and inode together change on every rewrite, including a rename over the file.
std::string EtagOf(const struct stat& st);
ObjectInfo InfoOf(std::string key, const struct stat& st);

Result<size_t> PreadFull(int fd, uint64_t offset, std::span<char> buf, const std::string& name);
Status WriteFull(int fd, std::span<const char> data, const std::string& name);
// Creates the directories above `key` below `root`. Other failures surface when the write
// creates its temporary file.
Status MakeParents(const std::string& root, std::string_view key, const std::string& name);
// Appends all of the file `path` to `out_fd`.
Status AppendFile(int out_fd, const std::string& path, const std::string& name);
Status FsyncDir(const std::string& dir, const std::string& name);
std::string RandomSuffix();  // 16 hex digits

// Writes a temporary file (kTempPrefix) beside `path` by `fill`, fsyncs it and puts it at `path`:
// renamed over whatever is there, or, when `exclusive`, linked only if nothing is (else
// kPreconditionFailed). Readers see the old file or the new one, never a partial one. Returns the
// new file's stat. REQUIRES: the directory of `path` exists.
Result<struct stat> WriteFileWhole(const std::string& path, const std::string& name, bool exclusive,
                                   const std::function<Status(int fd)>& fill);

}  // namespace lakecache::local_files
