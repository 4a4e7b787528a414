// LocalStore's multipart uploads. An upload is the folder <root>/.lakecache-uploads/<id>/ holding
// the file "key" (the upload's key; its mtime is the initiation time) and one file per part,
// "part-00001"; Complete concatenates the parts into the object and removes the folder.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <sstream>
#include <tuple>

#include <fmt/format.h>

#include "ufs/local_files.h"
#include "ufs/local_store.h"

namespace lakecache {
namespace {

using namespace local_files;  // NOLINT: LocalStore's own helpers

constexpr char kKeyFile[] = "key";

std::string PartFile(int part_number) { return fmt::format("part-{:05d}", part_number); }

// Ids are RandomSuffix() hex, so no id can name a path outside the staging folder.
bool ValidUploadId(std::string_view id) {
  return !id.empty() && id.size() <= 64 && std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
}

Status NoSuchUpload(const std::string& name, std::string_view upload_id) {
  return Status::NotFound(fmt::format("{}: no such multipart upload '{}'", name, upload_id));
}

Result<std::string> ReadSmallFile(const std::string& path, const std::string& name) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoStatus(errno, name);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Status MakeDir(const std::string& path, const std::string& name) {
  if (::mkdir(path.c_str(), 0777) == 0 || errno == EEXIST) return Status::Ok();
  return ErrnoStatus(errno, name);
}

// Removes the upload's folder and everything in it; a folder already gone is OK.
Status RemoveUploadDir(const std::string& dir, const std::string& name) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return errno == ENOENT ? Status::Ok() : ErrnoStatus(errno, name);
  while (const struct dirent* ent = ::readdir(d)) {
    std::string_view n = ent->d_name;
    if (n != "." && n != "..") ::unlinkat(::dirfd(d), ent->d_name, 0);
  }
  ::closedir(d);
  if (::rmdir(dir.c_str()) != 0 && errno != ENOENT) return ErrnoStatus(errno, name);
  return Status::Ok();
}

Status CheckParts(const std::vector<CompletedPart>& parts, const std::string& name) {
  if (parts.empty()) return Status::InvalidArgument(name + ": a multipart upload of no parts");
  for (size_t i = 1; i < parts.size(); ++i) {
    if (parts[i].part_number <= parts[i - 1].part_number) {
      return Status::InvalidArgument(fmt::format("{}: part numbers must ascend, but {} follows {}",
                                                 name, parts[i].part_number,
                                                 parts[i - 1].part_number));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> LocalStore::UploadDir(std::string_view key, std::string_view upload_id) const {
  if (!ValidUploadId(upload_id)) return NoSuchUpload(Name(key), upload_id);
  std::string dir = root_ + "/" + std::string(kUploadsDir) + "/" + std::string(upload_id);
  auto owner = ReadSmallFile(dir + "/" + kKeyFile, Name(key));
  if (!owner.ok() || *owner != key) return NoSuchUpload(Name(key), upload_id);
  return dir;
}

Result<std::string> LocalStore::CreateMultipartUpload(std::string_view key,
                                                      const IoOptions& options) {
  LC_RETURN_IF_ERROR(Precheck(key, options, Name(key)));
  std::string staging = root_ + "/" + std::string(kUploadsDir);
  LC_RETURN_IF_ERROR(MakeDir(staging, Name(key)));
  std::string id = RandomSuffix() + RandomSuffix();
  std::string dir = staging + "/" + id;
  if (::mkdir(dir.c_str(), 0777) != 0) return ErrnoStatus(errno, Name(key));
  LC_RETURN_IF_ERROR(WriteFileWhole(dir + "/" + kKeyFile, Name(key), false, [&](int fd) {
                       return WriteFull(fd, key, Name(key));
                     }).status());
  return id;
}

Result<std::string> LocalStore::UploadPart(std::string_view key, std::string_view upload_id,
                                           int part_number, std::span<const char> data,
                                           const IoOptions& options) {
  LC_RETURN_IF_ERROR(Precheck(key, options, Name(key)));
  if (part_number < 1 || part_number > kMaxParts) {
    return Status::InvalidArgument(
        fmt::format("{}: part number {} is outside 1..{}", Name(key), part_number, kMaxParts));
  }
  LC_ASSIGN_OR_RETURN(std::string dir, UploadDir(key, upload_id));
  LC_ASSIGN_OR_RETURN(struct stat st,
                      WriteFileWhole(dir + "/" + PartFile(part_number), Name(key), false,
                                     [&](int fd) { return WriteFull(fd, data, Name(key)); }));
  return EtagOf(st);
}

Result<ObjectInfo> LocalStore::CompleteMultipartUpload(std::string_view key,
                                                       std::string_view upload_id,
                                                       const std::vector<CompletedPart>& parts,
                                                       const IoOptions& options) {
  LC_RETURN_IF_ERROR(Precheck(key, options, Name(key)));
  LC_RETURN_IF_ERROR(CheckParts(parts, Name(key)));
  LC_ASSIGN_OR_RETURN(std::string dir, UploadDir(key, upload_id));
  for (size_t i = 0; i < parts.size(); ++i) {
    struct stat st;
    if (::stat((dir + "/" + PartFile(parts[i].part_number)).c_str(), &st) != 0 ||
        EtagOf(st) != parts[i].etag) {
      return Status::InvalidArgument(
          fmt::format("{}: part {} with ETag {} was not uploaded (InvalidPart)", Name(key),
                      parts[i].part_number, parts[i].etag));
    }
    if (i + 1 < parts.size() && static_cast<uint64_t>(st.st_size) < kMinPartSize) {
      return Status::InvalidArgument(
          fmt::format("{}: part {} has {} bytes, below the minimum of {} for all but the last "
                      "part (EntityTooSmall)",
                      Name(key), parts[i].part_number, st.st_size, kMinPartSize));
    }
  }
  LC_RETURN_IF_ERROR(MakeParents(root_, key, Name(key)));
  LC_ASSIGN_OR_RETURN(
      struct stat st, WriteFileWhole(PathOf(key), Name(key), false, [&](int fd) {
        for (const CompletedPart& part : parts) {
          LC_RETURN_IF_ERROR(AppendFile(fd, dir + "/" + PartFile(part.part_number), Name(key)));
        }
        return Status::Ok();
      }));
  LC_RETURN_IF_ERROR(RemoveUploadDir(dir, Name(key)));
  return InfoOf(std::string(key), st);
}

Status LocalStore::AbortMultipartUpload(std::string_view key, std::string_view upload_id,
                                        const IoOptions& options) {
  LC_RETURN_IF_ERROR(Precheck(key, options, Name(key)));
  auto dir = UploadDir(key, upload_id);
  if (!dir.ok()) return Status::Ok();  // already gone, as S3's NoSuchUpload
  return RemoveUploadDir(*dir, Name(key));
}

Result<std::vector<PendingUpload>> LocalStore::ListMultipartUploads(std::string_view prefix,
                                                                    const IoOptions& options) {
  LC_RETURN_IF_ERROR(CheckDeadline(options, Describe()));
  std::string staging = root_ + "/" + std::string(kUploadsDir);
  std::vector<PendingUpload> uploads;
  DIR* d = ::opendir(staging.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return uploads;  // none was ever created
    return ErrnoStatus(errno, Describe());
  }
  while (const struct dirent* ent = ::readdir(d)) {
    if (!ValidUploadId(ent->d_name)) continue;
    std::string key_file = staging + "/" + ent->d_name + "/" + kKeyFile;
    auto key = ReadSmallFile(key_file, Describe());
    struct stat st;
    // An upload being created or removed right now has no key file: not pending.
    if (!key.ok() || ::stat(key_file.c_str(), &st) != 0 || !key->starts_with(prefix)) continue;
    uploads.push_back({*key, ent->d_name, static_cast<int64_t>(st.st_mtim.tv_sec)});
  }
  ::closedir(d);
  std::sort(uploads.begin(), uploads.end(), [](const PendingUpload& a, const PendingUpload& b) {
    return std::tie(a.key, a.initiated, a.upload_id) < std::tie(b.key, b.initiated, b.upload_id);
  });
  return uploads;
}

}  // namespace lakecache
