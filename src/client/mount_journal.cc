#include "client/mount_journal.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <string_view>

namespace lakecache {
namespace {

// A record: u32 length of what follows the 8-byte head, u32 XXH32 of it, then a type byte and
// the fields (u64 little-endian, strings as u32 length and bytes).
enum RecordType : uint8_t { kInode = 1, kOpen = 2, kRelease = 3 };
constexpr size_t kHead = 8;
constexpr uint32_t kMaxRecord = 1 << 20;

void PutU64(std::string* out, uint64_t v) { out->append(reinterpret_cast<const char*>(&v), 8); }
void PutString(std::string* out, const std::string& s) {
  uint32_t n = static_cast<uint32_t>(s.size());
  out->append(reinterpret_cast<const char*>(&n), 4);
  out->append(s);
}

std::string Framed(const std::string& body) {
  uint32_t len = static_cast<uint32_t>(body.size());
  uint32_t sum = XXH32(body.data(), body.size(), 0);
  std::string record(reinterpret_cast<const char*>(&len), 4);
  record.append(reinterpret_cast<const char*>(&sum), 4);
  return record + body;
}

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool U64(uint64_t* v) {
    if (in_.size() < 8) return false;
    std::memcpy(v, in_.data(), 8);
    in_.remove_prefix(8);
    return true;
  }
  bool String(std::string* s) {
    uint32_t n = 0;
    if (in_.size() < 4) return false;
    std::memcpy(&n, in_.data(), 4);
    in_.remove_prefix(4);
    if (in_.size() < n) return false;
    s->assign(in_.data(), n);
    in_.remove_prefix(n);
    return true;
  }

 private:
  std::string_view in_;
};

}  // namespace

Result<std::unique_ptr<MountJournal>> MountJournal::Open(int fd) {
  std::unique_ptr<MountJournal> journal(new MountJournal(fd));
  LC_RETURN_IF_ERROR(journal->Replay());
  return journal;
}

MountJournal::~MountJournal() { ::close(fd_); }

Status MountJournal::Replay() {
  struct stat st;
  if (::fstat(fd_, &st) != 0) {
    return Status::IoError(std::string("mount journal: ") + std::strerror(errno));
  }
  std::string data(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < data.size()) {
    ssize_t n = ::pread(fd_, data.data() + got, data.size() - got, static_cast<off_t>(got));
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  std::map<uint64_t, OpenFile> open;
  size_t at = 0;
  while (at + kHead <= got) {
    uint32_t len = 0, sum = 0;
    std::memcpy(&len, data.data() + at, 4);
    std::memcpy(&sum, data.data() + at + 4, 4);
    if (len == 0 || len > kMaxRecord || at + kHead + len > got) break;
    std::string_view body(data.data() + at + kHead, len);
    if (XXH32(body.data(), body.size(), 0) != sum) break;  // cut short by a kill: the log ends
    Reader r(body.substr(1));
    switch (static_cast<uint8_t>(body[0])) {
      case kInode: {
        Inode i;
        uint64_t is_dir = 0;
        if (r.U64(&i.ino) && r.U64(&is_dir) && r.String(&i.ns) && r.String(&i.path)) {
          i.is_dir = is_dir != 0;
          inodes_.push_back(std::move(i));
        }
        break;
      }
      case kOpen: {
        OpenFile f;
        if (r.U64(&f.fh) && r.U64(&f.ino) && r.String(&f.etag) && r.U64(&f.size)) {
          max_fh_ = std::max(max_fh_, f.fh);
          open[f.fh] = std::move(f);
        }
        break;
      }
      case kRelease: {
        uint64_t fh = 0;
        if (r.U64(&fh)) open.erase(fh);
        break;
      }
      default:
        break;
    }
    at += kHead + len;
  }
  for (auto& [fh, f] : open) open_files_.push_back(std::move(f));
  MutexLock lock(&mu_);
  end_ = at;  // a torn tail is overwritten
  return Status::Ok();
}

void MountJournal::Append(const std::string& record) {
  MutexLock lock(&mu_);
  if (failed_) return;
  size_t done = 0;
  while (done < record.size()) {
    ssize_t n =
        ::pwrite(fd_, record.data() + done, record.size() - done, static_cast<off_t>(end_ + done));
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      spdlog::warn("mount journal: {}; a restart of this mount's server will not keep its state",
                   std::strerror(errno));
      failed_ = true;
      return;
    }
    done += static_cast<size_t>(n);
  }
  end_ += record.size();
}

void MountJournal::AddInode(const Inode& inode) {
  std::string body(1, static_cast<char>(kInode));
  PutU64(&body, inode.ino);
  PutU64(&body, inode.is_dir ? 1 : 0);
  PutString(&body, inode.ns);
  PutString(&body, inode.path);
  Append(Framed(body));
}

void MountJournal::AddOpen(const OpenFile& open) {
  std::string body(1, static_cast<char>(kOpen));
  PutU64(&body, open.fh);
  PutU64(&body, open.ino);
  PutString(&body, open.etag);
  PutU64(&body, open.size);
  Append(Framed(body));
}

void MountJournal::AddRelease(uint64_t fh) {
  std::string body(1, static_cast<char>(kRelease));
  PutU64(&body, fh);
  Append(Framed(body));
}

}  // namespace lakecache
