// The native data path beside FUSE (native/native_server.h, liblakecache_native): real mounts of
// s3rver, read through the C ABI in this process and by native_probe (tests/native) as other
// processes and uids.
#include <fcntl.h>
#include <linux/falloc.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "integration/cli_fixture.h"
#include "native/native_ring.h"
#include "native/native_socket.h"
#include "native/native_wire.h"
#include "native_client/lakecache_native.h"

namespace lakecache::testing {
namespace {

constexpr char kNobody[] = "65534";

class NativeTest : public CliFixture {
 protected:
  void SetUp() override {
    CliFixture::SetUp();
    ASSERT_TRUE(CanMount())
        << "the native data path's tests mount FUSE: run them as root with /dev/fuse";
    // Others (nobody) may reach the mounts in the scratch folder.
    ::chmod(scratch_->path().c_str(), 0755);
  }

  // A standalone mount of the bucket with `extra` mount arguments; its log is LOG.
  std::string MountBucket(const std::vector<std::string>& extra = {},
                          const std::string& log = "mount.log") {
    std::string mnt = Mountpoint();
    std::vector<std::string> args = {"--log-level", "info",        "mount",        "s3://cli",
                                     mnt,           "--cache-dir", Folder("cache")};
    args.insert(args.end(), extra.begin(), extra.end());
    mount_ = StartMount(args, mnt, log);
    return mnt;
  }

  static std::string Big() {
    std::string big(kBigSize, '\0');
    for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i % 251);
    return big;
  }

  RunResult Probe(const std::vector<std::string>& args, bool as_nobody = false) {
    std::vector<std::string> argv;
    if (as_nobody) {
      argv = {"setpriv", std::string("--reuid=") + kNobody, std::string("--regid=") + kNobody,
              "--clear-groups"};
    }
    argv.push_back(NATIVE_PROBE_BINARY);
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, Env(), std::chrono::seconds(60));
  }

  // How many mappings of this process name `name` (a memfd's, as /proc/self/maps shows it).
  static size_t MappingsOf(const std::string& name) {
    std::ifstream maps("/proc/self/maps");
    size_t n = 0;
    for (std::string line; std::getline(maps, line);) {
      if (line.find("memfd:" + name) != std::string::npos) ++n;
    }
    return n;
  }

  ChildProcess* mount_ = nullptr;
};

TEST_F(NativeTest, ReadsMatchTheStoreByteForByte) {
  std::string mnt = MountBucket();
  ASSERT_NE(mount_, nullptr);
  EXPECT_EQ(ReadAll(mnt + "/.lakecache/native").back(), '\n');
  lc_client* c = lc_attach((mnt + "/data").c_str());
  ASSERT_NE(c, nullptr) << lc_last_error();
  EXPECT_EQ(std::string(lc_mountpoint(c)), mnt);
  const std::string big = Big();

  // pread, twice (cold: fetched and staged; warm: by reference from the memory tier), and at
  // offsets that cross the block boundary.
  lc_file* f = lc_open(c, (mnt + "/data/big.bin").c_str());
  ASSERT_NE(f, nullptr) << lc_last_error();
  ASSERT_EQ(lc_size(f), big.size());
  for (int pass = 0; pass < 2; ++pass) {
    std::string got(big.size(), '\0');
    ASSERT_EQ(lc_pread(f, got.data(), got.size(), 0), static_cast<ssize_t>(big.size()))
        << lc_last_error();
    EXPECT_TRUE(got == big) << "pass " << pass;
  }
  std::string part(3 << 20, '\0');
  ASSERT_EQ(lc_pread(f, part.data(), part.size(), (4 << 20) - 12345),
            static_cast<ssize_t>(big.size() - ((4 << 20) - 12345)));
  EXPECT_EQ(part.substr(0, big.size() - ((4 << 20) - 12345)), big.substr((4 << 20) - 12345));
  EXPECT_EQ(lc_pread(f, part.data(), 10, big.size()), 0);

  // A view: in place, short at the block's end.
  lc_view v;
  ASSERT_EQ(lc_view_range(f, (4 << 20) - 100, 1000, &v), 0) << lc_last_error();
  ASSERT_EQ(v.length, 100u);
  EXPECT_EQ(std::string(static_cast<const char*>(v.data), v.length),
            big.substr((4 << 20) - 100, 100));
  lc_release(c, &v);
  lc_close(f);

  // A second client of this process (a reader thread's) maps the node's memory no second time.
  size_t mapped = MappingsOf("lakecache-mount-memory");
  ASSERT_GT(mapped, 0u);
  lc_client* second = lc_attach(mnt.c_str());
  ASSERT_NE(second, nullptr) << lc_last_error();
  lc_file* again = lc_open(second, (mnt + "/data/big.bin").c_str());
  ASSERT_NE(again, nullptr) << lc_last_error();
  ASSERT_EQ(lc_view_range(again, 0, 1000, &v), 0) << lc_last_error();
  EXPECT_EQ(std::string(static_cast<const char*>(v.data), v.length), big.substr(0, 1000));
  EXPECT_EQ(MappingsOf("lakecache-mount-memory"), mapped);
  lc_release(second, &v);
  lc_close(again);
  lc_detach(second);
  EXPECT_EQ(MappingsOf("lakecache-mount-memory"), mapped);  // the first client's still

  // A batch by path: whole files, a range, a missing file, a folder, a path outside the mount.
  std::string outside = scratch_->path() + "/elsewhere";
  std::string absolute = mnt + "/data/sub/b.txt";
  lc_read reads[6] = {};
  reads[0].path = "data/a.txt";
  reads[0].length = UINT64_MAX;
  reads[1].path = absolute.c_str();
  reads[1].length = UINT64_MAX;
  reads[2].path = "data/big.bin";
  reads[2].offset = 5;
  reads[2].length = 6 << 20;
  reads[3].path = "data/missing.txt";
  reads[3].length = 1;
  reads[4].path = "data/sub";
  reads[4].length = 1;
  reads[5].path = outside.c_str();
  reads[5].length = 1;
  ssize_t ok = lc_read_many(c, reads, 6);
  std::string results;
  for (const lc_read& r : reads) {
    results += std::to_string(r.result) + " " + (r.error != nullptr ? r.error : "") + "; ";
  }
  ASSERT_EQ(ok, 3) << lc_last_error() << " " << results;
  EXPECT_EQ(std::string(static_cast<char*>(reads[0].buf), reads[0].result), "hello world\n");
  EXPECT_EQ(std::string(static_cast<char*>(reads[1].buf), reads[1].result), "bee");
  ASSERT_EQ(reads[2].result, static_cast<int64_t>(big.size() - 5));
  EXPECT_TRUE(std::string(static_cast<char*>(reads[2].buf), reads[2].result) == big.substr(5));
  EXPECT_EQ(reads[3].result, -ENOENT);
  EXPECT_NE(std::string(reads[3].error).find("missing.txt"), std::string::npos) << reads[3].error;
  EXPECT_EQ(reads[4].result, -EISDIR);
  EXPECT_EQ(reads[5].result, -EXDEV);
  for (lc_read& r : reads) std::free(r.buf);

  // A descriptor opened through the mount.
  int fd = ::open((mnt + "/data/a.txt").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  lc_file* by_fd = lc_open_fd(c, fd);
  ::close(fd);
  ASSERT_NE(by_fd, nullptr) << lc_last_error();
  char text[32] = {};
  EXPECT_EQ(lc_pread(by_fd, text, sizeof(text), 0), 12);
  EXPECT_STREQ(text, "hello world\n");
  lc_close(by_fd);
  EXPECT_EQ(lc_open_fd(c, ::open("/etc/hostname", O_RDONLY)), nullptr);
  EXPECT_EQ(errno, EXDEV) << lc_last_error();
  lc_detach(c);
  EXPECT_EQ(MappingsOf("lakecache-mount-memory"), 0u);

  // Another process, through the C ABI alone.
  RunResult sum = Probe({"sum", mnt + "/data/big.bin"});
  ASSERT_EQ(sum.exit_code, 0) << sum.err;
  uint64_t h = 14695981039346656037ull;
  for (unsigned char ch : big) h = (h ^ ch) * 1099511628211ull;
  char want[64];
  std::snprintf(want, sizeof(want), "bytes=%zu fnv=%016llx", big.size(),
                static_cast<unsigned long long>(h));
  EXPECT_NE(sum.out.find(want), std::string::npos) << sum.out;
}

TEST_F(NativeTest, AnotherUidIsRefusedUnlessAllowed) {
  std::string mnt = MountBucket({"-o", "allow_other"});
  ASSERT_NE(mount_, nullptr);
  RunResult refused = Probe({"attach", mnt + "/data/a.txt"}, /*as_nobody=*/true);
  EXPECT_EQ(refused.exit_code, 1) << refused.out;
  EXPECT_NE(refused.err.find("uid 65534 may not read this mount's native data path"),
            std::string::npos)
      << refused.err;
  EXPECT_NE(refused.err.find("--allow-uid 65534"), std::string::npos) << refused.err;
  StopAll();

  std::string allowed = MountBucket({"-o", "allow_other", "--allow-uid", kNobody}, "allowed.log");
  ASSERT_NE(mount_, nullptr);
  RunResult read = Probe({"sum", allowed + "/data/a.txt"}, /*as_nobody=*/true);
  EXPECT_EQ(read.exit_code, 0) << read.err;
  EXPECT_NE(read.out.find("bytes=12 "), std::string::npos) << read.out;
}

TEST_F(NativeTest, AReaderKilledWhileHoldingBlocksLeavesNothingHeld) {
  std::string mnt = MountBucket();
  ASSERT_NE(mount_, nullptr);
  auto holder = ChildProcess::Start({NATIVE_PROBE_BINARY, "hold", mnt + "/data/big.bin", "5"},
                                    scratch_->path() + "/hold.log", Env());
  ASSERT_TRUE(holder.ok()) << holder.status().ToString();
  ASSERT_TRUE(WaitFor([&] { return (*holder)->LogTail().find("holding 5") != std::string::npos; },
                      std::chrono::seconds(30)))
      << (*holder)->LogTail();
  ::kill((*holder)->pid(), SIGKILL);
  std::string log = scratch_->path() + "/mount.log";
  ASSERT_TRUE(WaitFor(
      [&] { return ReadAll(log).find("held 1 files open and 5 ranges") != std::string::npos; },
      std::chrono::seconds(20)))
      << mount_->LogTail();
  EXPECT_NE(ReadAll(log).find("now released"), std::string::npos);
}

TEST_F(NativeTest, AnObjectReplacedUnderAReaderGivesOneVersionOrAnError) {
  std::string mnt = MountBucket();
  ASSERT_NE(mount_, nullptr);
  const std::string big = Big();
  ASSERT_TRUE(server_->PutObjects(kBucket, {{"data/swap.bin", big}}).ok());
  lc_client* c = lc_attach(mnt.c_str());
  ASSERT_NE(c, nullptr) << lc_last_error();
  lc_file* f = lc_open(c, "data/swap.bin");
  ASSERT_NE(f, nullptr) << lc_last_error();
  std::string first(1 << 20, '\0');
  ASSERT_EQ(lc_pread(f, first.data(), first.size(), 0), static_cast<ssize_t>(first.size()));
  EXPECT_EQ(first, big.substr(0, first.size()));
  // The same size, other bytes: a reader that mixed versions would not notice the length.
  std::string other(big.size(), 'x');
  ASSERT_TRUE(server_->PutObjects(kBucket, {{"data/swap.bin", other}}).ok());
  std::string second(big.size() - (4 << 20), '\0');
  ssize_t n = lc_pread(f, second.data(), second.size(), 4 << 20);
  if (n >= 0) {
    EXPECT_EQ(second, big.substr(4 << 20)) << "bytes of another version";
  } else {
    EXPECT_TRUE(errno == ESTALE || errno == EIO) << errno << " " << lc_last_error();
  }
  lc_close(f);
  // A new open reads the new version whole.
  lc_file* again = lc_open(c, "data/swap.bin");
  ASSERT_NE(again, nullptr) << lc_last_error();
  std::string all(other.size(), '\0');
  // The mount's listing may serve the old ETag until its metadata expires: then the new open
  // still sees the old version, whole. Either way, never a mix.
  ssize_t got = lc_pread(again, all.data(), all.size(), 0);
  if (got == static_cast<ssize_t>(all.size())) {
    EXPECT_TRUE(all == other || all == big) << "a mix of versions";
  }
  lc_close(again);
  lc_detach(c);
}

TEST_F(NativeTest, ReadersGoOnThroughATakeoverOfTheMount) {
  std::string mnt = MountBucket();
  ASSERT_NE(mount_, nullptr);
  auto reader = ChildProcess::Start({NATIVE_PROBE_BINARY, "loop", mnt + "/data/big.bin", "8"},
                                    scratch_->path() + "/loop.log", Env());
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  ASSERT_TRUE(WaitFor([&] { return (*reader)->LogTail().find("reading") != std::string::npos; },
                      std::chrono::seconds(30)))
      << (*reader)->LogTail();
  RunResult taken = Lc({"mount", "--takeover", mnt});
  ASSERT_EQ(taken.exit_code, 0) << taken.err << mount_->LogTail();
  ASSERT_TRUE(WaitFor([&] { return !(*reader)->Running(); }, std::chrono::seconds(60)));
  std::string out = (*reader)->LogTail();
  EXPECT_NE(out.find("errors=0 wrong=0"), std::string::npos) << out;
  // The new server serves native readers too.
  RunResult sum = Probe({"sum", mnt + "/data/a.txt"});
  EXPECT_EQ(sum.exit_code, 0) << sum.err;
}

// The mount's server (the holder's child) SIGKILLed under a native reader: the holder starts
// another, the reader attaches to it and reads on, every byte right.
TEST_F(NativeTest, ReadersGoOnThroughACrashOfTheMountsServer) {
  std::string mnt = MountBucket();
  ASSERT_NE(mount_, nullptr);
  auto server_pid = [&] {
    std::ifstream in("/proc/" + std::to_string(mount_->pid()) + "/task/" +
                     std::to_string(mount_->pid()) + "/children");
    pid_t child = 0;
    in >> child;
    return child;
  };
  pid_t old_server = server_pid();
  ASSERT_GT(old_server, 0);
  auto reader = ChildProcess::Start({NATIVE_PROBE_BINARY, "loop", mnt + "/data/big.bin", "6"},
                                    scratch_->path() + "/loop.log", Env());
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  ASSERT_TRUE(WaitFor([&] { return (*reader)->LogTail().find("reading") != std::string::npos; },
                      std::chrono::seconds(30)))
      << (*reader)->LogTail();
  ASSERT_EQ(::kill(old_server, SIGKILL), 0);
  ASSERT_TRUE(WaitFor(
      [&] {
        pid_t now = server_pid();
        return now > 0 && now != old_server;
      },
      std::chrono::seconds(30)))
      << mount_->LogTail();
  ASSERT_TRUE(WaitFor([&] { return !(*reader)->Running(); }, std::chrono::seconds(60)));
  std::string out = (*reader)->LogTail();
  EXPECT_NE(out.find("errors=0 wrong=0"), std::string::npos) << out << mount_->LogTail();
}

// A reader that speaks the wire itself, to send what the library never would.
class RawSession {
 public:
  explicit RawSession(const std::string& socket_path) {
    sock_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket_path.c_str(), sizeof(addr.sun_path) - 1);
    if (::connect(sock_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return;
    char hello[sizeof(native::MessageHeader) + sizeof(native::HelloBody)] = {};
    native::MessageHeader h;
    h.type = native::kHello;
    native::HelloBody b;
    std::memcpy(hello, &h, sizeof(h));
    std::memcpy(hello + sizeof(h), &b, sizeof(b));
    native::SendMessage(sock_, hello, sizeof(hello), nullptr, 0);
    char buf[512];
    int fds[native::kMaxMessageFds];
    size_t nfds = 0;
    if (native::ReceiveMessage(sock_, buf, sizeof(buf), fds, &nfds) <= 0 || nfds != 4) return;
    native::WelcomeBody w;
    std::memcpy(&w, buf + sizeof(h), sizeof(w));
    ok_ = ring_.MapFd(fds[0], w.sq_entries, w.cq_entries);
    submit_ = fds[1];
    complete_ = fds[2];
    ::close(fds[0]);
    ::close(fds[3]);
  }
  ~RawSession() {
    for (int fd : {sock_, submit_, complete_, arena_fd_}) {
      if (fd >= 0) ::close(fd);
    }
  }
  bool ok() const { return ok_; }
  native::RingMapping& ring() { return ring_; }

  // Opens `path`: the file id, or 0.
  uint32_t Open(const std::string& path) {
    std::string msg(sizeof(native::MessageHeader) + sizeof(native::OpenPathsBody), '\0');
    native::MessageHeader h;
    h.type = native::kOpenPaths;
    h.request_id = 7;
    native::OpenPathsBody b;
    b.count = 1;
    std::memcpy(msg.data(), &h, sizeof(h));
    std::memcpy(msg.data() + sizeof(h), &b, sizeof(b));
    msg += path;
    msg.push_back('\0');
    native::SendMessage(sock_, msg.data(), msg.size(), nullptr, 0);
    std::vector<char> buf(native::kMaxMessage);
    for (;;) {
      int fds[native::kMaxMessageFds];
      size_t nfds = 0;
      ssize_t n = native::ReceiveMessage(sock_, buf.data(), buf.size(), fds, &nfds);
      for (size_t i = 0; i < nfds; ++i) ::close(fds[i]);
      if (n <= 0) return 0;
      std::memcpy(&h, buf.data(), sizeof(h));
      if (h.type != native::kOpened) continue;
      native::OpenedFile e;
      std::memcpy(&e, buf.data() + sizeof(h) + sizeof(native::OpenedBody), sizeof(e));
      return e.error == 0 ? e.file_id : 0;
    }
  }
  void Kick() {
    uint64_t one = 1;
    (void)!::write(submit_, &one, sizeof(one));
  }
  // The next completion, waiting up to 10 s.
  std::optional<native::Cqe> Next() {
    native::Cqe c;
    for (int i = 0; i < 1000; ++i) {
      if (native::TakeCompletion(ring_, &client_, &c)) return c;
      pollfd p{complete_, POLLIN, 0};
      ring_.header()->reader_waiting.store(1);
      if (native::TakeCompletion(ring_, &client_, &c)) return c;
      if (::poll(&p, 1, 10) > 0) {
        uint64_t count;
        (void)!::read(complete_, &count, sizeof(count));
      }
      ring_.header()->reader_waiting.store(0);
    }
    return std::nullopt;
  }
  bool Submit(const native::Sqe& e) { return native::SubmitRequest(ring_, &client_, e); }
  // Closes file `id` (one message).
  void Close(uint32_t id) {
    char msg[sizeof(native::MessageHeader) + sizeof(uint32_t)];
    native::MessageHeader h;
    h.type = native::kClose;
    std::memcpy(msg, &h, sizeof(h));
    std::memcpy(msg + sizeof(h), &id, sizeof(id));
    native::SendMessage(sock_, msg, sizeof(msg), nullptr, 0);
  }
  // The descriptor of the first arena the server sent (-1: none yet), reading what is waiting.
  int ArenaFd() {
    for (;;) {
      if (arena_fd_ >= 0) return arena_fd_;
      pollfd p{sock_, POLLIN, 0};
      if (::poll(&p, 1, 1000) <= 0) return -1;
      char buf[512];
      int fds[native::kMaxMessageFds];
      size_t nfds = 0;
      ssize_t n = native::ReceiveMessage(sock_, buf, sizeof(buf), fds, &nfds);
      if (n <= 0) return -1;
      native::MessageHeader h;
      std::memcpy(&h, buf, sizeof(h));
      for (size_t i = 0; i < nfds; ++i) {
        if (h.type == native::kArena && arena_fd_ < 0) {
          arena_fd_ = fds[i];
        } else {
          ::close(fds[i]);
        }
      }
    }
  }
  // True once the server has closed the session (messages it sent before are skipped).
  bool Ended() {
    for (;;) {
      pollfd p{sock_, POLLIN, 0};
      if (::poll(&p, 1, 10000) <= 0) return false;
      char buf[512];
      int fds[native::kMaxMessageFds];
      size_t nfds = 0;
      ssize_t n = native::ReceiveMessage(sock_, buf, sizeof(buf), fds, &nfds);
      for (size_t i = 0; i < nfds; ++i) ::close(fds[i]);
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET;
    }
  }

 private:
  int sock_ = -1, submit_ = -1, complete_ = -1, arena_fd_ = -1;
  bool ok_ = false;
  native::RingMapping ring_;
  native::RingClientState client_;
};

TEST_F(NativeTest, BadRequestsGetAnErrorAndABrokenRingEndsOnlyItsSession) {
  std::string mnt = MountBucket();
  ASSERT_NE(mount_, nullptr);
  std::string socket_path = ReadAll(mnt + "/.lakecache/native");
  socket_path.pop_back();
  RawSession raw(socket_path);
  ASSERT_TRUE(raw.ok());
  uint32_t id = raw.Open("data/big.bin");
  ASSERT_NE(id, 0u);
  EXPECT_EQ(raw.Open("data/../../etc/passwd"), 0u);
  struct Case {
    const char* what;
    native::Sqe e;
    int64_t want;  // the result, or INT64_MIN for "any bytes"
  };
  auto sqe = [](uint8_t op, uint32_t file, uint64_t offset, uint64_t length) {
    native::Sqe e;
    e.op = op;
    e.file_id = file;
    e.offset = offset;
    e.length = length;
    return e;
  };
  std::vector<Case> cases = {
      {"a wrong file id", sqe(native::kRead, id + 1000, 0, 10), -EBADF},
      {"an unknown op", sqe(77, id, 0, 10), -EINVAL},
      {"an offset past the end", sqe(native::kRead, id, uint64_t{1} << 62, 10), 0},
      {"a length that overflows", sqe(native::kRead, id, 100, UINT64_MAX - 50), (4 << 20) - 100},
      {"a zero length", sqe(native::kRead, id, 0, 0), 0},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    cases[i].e.user_data = i + 1;
    ASSERT_TRUE(raw.Submit(cases[i].e));
  }
  raw.Kick();
  for (size_t got = 0; got < cases.size(); ++got) {
    std::optional<native::Cqe> c = raw.Next();
    ASSERT_TRUE(c.has_value()) << "no completion after " << got;
    ASSERT_GE(c->user_data, 1u);
    ASSERT_LE(c->user_data, cases.size());
    const Case& want = cases[c->user_data - 1];
    EXPECT_EQ(c->result, want.want) << want.what;
  }
  // The node memory a reader maps is read-only: it can neither write nor punch holes in it.
  int arena = raw.ArenaFd();
  ASSERT_GE(arena, 0) << "no arena sent for a read by reference";
  EXPECT_EQ(::fcntl(arena, F_GETFL) & O_ACCMODE, O_RDONLY);
  EXPECT_EQ(::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, arena, 0), MAP_FAILED);
  EXPECT_NE(::fallocate(arena, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096), 0);
  // A release of something never given, and twice: nothing happens.
  native::Sqe release = sqe(native::kRelease, 0, 0, 0);
  release.anchor = 424242;
  release.flags = native::kFlagAck;
  release.user_data = 99;
  ASSERT_TRUE(raw.Submit(release));
  raw.Kick();
  std::optional<native::Cqe> ack = raw.Next();
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->user_data, 99u);

  // A well-behaved reader beside it.
  lc_client* good = lc_attach(mnt.c_str());
  ASSERT_NE(good, nullptr) << lc_last_error();
  // Garbage in the ring: a tail far beyond the head. The server ends that session, only that one.
  raw.ring().header()->sq_tail.store(0x80000000u);
  raw.Kick();
  EXPECT_TRUE(raw.Ended());
  EXPECT_TRUE(WaitFor(
      [&] {
        return ReadAll(scratch_->path() + "/mount.log").find("broke its request ring") !=
               std::string::npos;
      },
      std::chrono::seconds(10)));
  lc_file* f = lc_open(good, "data/big.bin");
  ASSERT_NE(f, nullptr) << lc_last_error();
  const std::string big = Big();
  std::string got(big.size(), '\0');
  EXPECT_EQ(lc_pread(f, got.data(), got.size(), 0), static_cast<ssize_t>(big.size()))
      << lc_last_error();
  EXPECT_TRUE(got == big);
  lc_close(f);
  lc_detach(good);
}

// A file closed while its read is in flight (a fetch from the store), and a reader that never
// consumes its completions: the server neither frees a handle under a read nor spins, and it
// answers that session's next open and every other reader.
TEST_F(NativeTest, ACloseUnderAReadAndAFullCompletionRingAreServedCalmly) {
  std::string mnt = MountBucket();
  ASSERT_NE(mount_, nullptr);
  std::string socket_path = ReadAll(mnt + "/.lakecache/native");
  socket_path.pop_back();
  RawSession raw(socket_path);
  ASSERT_TRUE(raw.ok());
  uint32_t id = raw.Open("data/big.bin");  // not read yet: its reads go to the store
  ASSERT_NE(id, 0u);
  native::Sqe e;
  e.op = native::kRead;
  e.file_id = id;
  e.length = 1 << 20;
  e.offset = 4 << 20;
  e.user_data = 1;
  ASSERT_TRUE(raw.Submit(e));
  raw.Kick();
  raw.Close(id);  // while the read fetches
  std::optional<native::Cqe> c = raw.Next();
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->user_data, 1u);
  // Fill the completion ring: requests the server answers, none consumed.
  uint32_t again = raw.Open("data/a.txt");
  ASSERT_NE(again, 0u);
  e.file_id = again;
  e.offset = 0;
  native::RingHeader* h = raw.ring().header();
  EXPECT_TRUE(WaitFor(
      [&] {
        while (raw.Submit(e)) {
        }
        raw.Kick();
        return h->cq_tail.load() - h->cq_head.load() == raw.ring().cq_entries;
      },
      std::chrono::seconds(30)))
      << "the completion ring did not fill";
  // The session thread still answers its socket, and other readers read.
  EXPECT_NE(raw.Open("data/sub/b.txt"), 0u);
  lc_client* good = lc_attach(mnt.c_str());
  ASSERT_NE(good, nullptr) << lc_last_error();
  lc_file* f = lc_open(good, "data/a.txt");
  ASSERT_NE(f, nullptr) << lc_last_error();
  char text[16] = {};
  EXPECT_EQ(lc_pread(f, text, sizeof(text), 0), 12) << lc_last_error();
  lc_close(f);
  lc_detach(good);
}

}  // namespace
}  // namespace lakecache::testing
