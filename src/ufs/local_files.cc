#include "ufs/local_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <random>
#include <system_error>
#include <vector>

#include <fmt/format.h>

namespace lakecache::local_files {

Status ErrnoStatus(int err, const std::string& name) {
  std::string msg = name + ": " + std::generic_category().message(err);
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return Status::NotFound(std::move(msg));
    case EACCES:
    case EPERM:
      return Status::AccessDenied(std::move(msg));
    case ENOSPC:
    case EDQUOT:
      return Status::NoSpace(std::move(msg));
    default:
      return Status::IoError(std::move(msg));
  }
}

Status CheckDeadline(const IoOptions& options, const std::string& name) {
  if (Clock::now() < options.deadline) return Status::Ok();
  return Status::DeadlineExceeded(name + ": deadline passed");
}

std::vector<std::string_view> Segments(std::string_view path) {
  std::vector<std::string_view> out;
  for (size_t start = 0;;) {
    size_t slash = path.find('/', start);
    out.push_back(path.substr(start, slash - start));
    if (slash == std::string_view::npos) return out;
    start = slash + 1;
  }
}

Status ValidateKey(std::string_view key, const std::string& name) {
  if (key.empty()) return Status::InvalidArgument(name + ": empty key");
  if (key.find('\0') != std::string_view::npos) {
    return Status::InvalidArgument(name + ": key contains a NUL byte");
  }
  if (key == kUploadsDir || key.starts_with(std::string(kUploadsDir) + "/")) {
    return Status::InvalidArgument(name + ": keys below '" + std::string(kUploadsDir) +
                                   "/' are reserved for uploads in progress");
  }
  for (std::string_view seg : Segments(key)) {
    if (seg == "..") return Status::InvalidArgument(name + ": '..' is not allowed in a key");
    if (seg.empty() || seg == ".") {
      return Status::InvalidArgument(name + ": key has an empty or '.' path segment");
    }
  }
  return Status::Ok();
}

Status Precheck(std::string_view key, const IoOptions& options, const std::string& name) {
  LC_RETURN_IF_ERROR(ValidateKey(key, name));
  return CheckDeadline(options, name);
}

std::string EtagOf(const struct stat& st) {
  auto mtime_ns = static_cast<uint64_t>(st.st_mtim.tv_sec) * 1'000'000'000ULL +
                  static_cast<uint64_t>(st.st_mtim.tv_nsec);
  return fmt::format("{:x}-{:x}-{:x}", static_cast<uint64_t>(st.st_size), mtime_ns,
                     static_cast<uint64_t>(st.st_ino));
}

ObjectInfo InfoOf(std::string key, const struct stat& st) {
  return ObjectInfo{std::move(key), static_cast<uint64_t>(st.st_size), EtagOf(st),
                    static_cast<int64_t>(st.st_mtim.tv_sec)};
}

Result<size_t> PreadFull(int fd, uint64_t offset, std::span<char> buf, const std::string& name) {
  size_t done = 0;
  while (done < buf.size()) {
    ssize_t n =
        ::pread(fd, buf.data() + done, buf.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, name);
    if (n == 0) break;  // end of file
    done += static_cast<size_t>(n);
  }
  return done;
}

Status WriteFull(int fd, std::span<const char> data, const std::string& name) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, name);
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status FsyncDir(const std::string& dir, const std::string& name) {
  ScopedFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0 || ::fsync(fd.get()) != 0) return ErrnoStatus(errno, name);
  return Status::Ok();
}

std::string RandomSuffix() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{:016x}", rng());
}

Status MakeParents(const std::string& root, std::string_view key, const std::string& name) {
  for (size_t slash = key.find('/'); slash != std::string_view::npos;
       slash = key.find('/', slash + 1)) {
    std::string parent = root + "/" + std::string(key.substr(0, slash));
    if (::mkdir(parent.c_str(), 0777) == 0 || errno != EEXIST) continue;
    struct stat st;
    if (::stat(parent.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
      return Status::InvalidArgument(name + ": '" + std::string(key.substr(0, slash)) +
                                     "' is an object, so no key can lie below it");
    }
  }
  return Status::Ok();
}

Status AppendFile(int out_fd, const std::string& path, const std::string& name) {
  ScopedFd in(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (in.get() < 0) return ErrnoStatus(errno, name);
  std::vector<char> buf(1 << 20);
  for (uint64_t offset = 0;;) {
    LC_ASSIGN_OR_RETURN(size_t n, PreadFull(in.get(), offset, buf, name));
    LC_RETURN_IF_ERROR(WriteFull(out_fd, std::span<const char>(buf.data(), n), name));
    if (n < buf.size()) return Status::Ok();
    offset += n;
  }
}

Result<struct stat> WriteFileWhole(const std::string& path, const std::string& name, bool exclusive,
                                   const std::function<Status(int fd)>& fill) {
  std::string dir = path.substr(0, path.rfind('/'));
  std::string tmp = dir + "/" + std::string(kTempPrefix) + RandomSuffix();
  ScopedFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666));
  if (fd.get() < 0) return ErrnoStatus(errno, name);
  struct stat st {};
  Status status = fill(fd.get());
  if (status.ok() && (::fsync(fd.get()) != 0 || ::fstat(fd.get(), &st) != 0 || fd.Close() != 0)) {
    status = ErrnoStatus(errno, name);
  }
  // link() fails on an existing target, so a create-only write cannot replace one.
  if (status.ok() && exclusive && ::link(tmp.c_str(), path.c_str()) != 0) {
    status = errno == EEXIST
                 ? Status::PreconditionFailed(name + ": create-only write: the key exists")
                 : ErrnoStatus(errno, name);
  }
  if (status.ok() && !exclusive && ::rename(tmp.c_str(), path.c_str()) != 0) {
    status = ErrnoStatus(errno, name);
  }
  if (!status.ok() || exclusive) ::unlink(tmp.c_str());
  if (!status.ok()) return status;
  LC_RETURN_IF_ERROR(FsyncDir(dir.empty() ? "/" : dir, name));
  return st;
}

}  // namespace lakecache::local_files
