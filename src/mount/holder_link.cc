#include "mount/holder_link.h"

#include <fcntl.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "common/text_codec.h"
#include "mount/holder_wire.h"

namespace lakecache {

struct HolderLink::Watcher {
  std::thread thread;
  ScopedFd wake_read, wake_write;
};

Result<std::unique_ptr<HolderLink>> HolderLink::Connect(const std::string& socket_path,
                                                        const std::string& mountpoint,
                                                        const std::string& options, int descriptors,
                                                        std::chrono::milliseconds wait) {
  std::unique_ptr<HolderLink> link(new HolderLink());
  LC_ASSIGN_OR_RETURN(link->fd_, ConnectToHolder(socket_path));
  LC_RETURN_IF_ERROR(
      SendHolderMessage(link->fd_.get(), {"hello",
                                          {{"version", std::to_string(kHolderProtocol)},
                                           {"mountpoint", mountpoint},
                                           {"options", options},
                                           {"descriptors", std::to_string(descriptors)},
                                           {"pid", std::to_string(::getpid())}}}));
  std::vector<ScopedFd> fds;
  Result<HolderMessage> answer = ReceiveHolderMessage(link->fd_.get(), &fds, wait);
  if (!answer.ok()) {
    if (answer.status().code() == StatusCode::kDeadlineExceeded) {
      return Status::DeadlineExceeded("the holder at " + socket_path +
                                      " did not hand the mount over in " +
                                      std::to_string(wait.count()) + " ms");
    }
    return answer.status().WithContext("the holder at " + socket_path);
  }
  if (answer->type == "refused") return Status::PreconditionFailed(answer->Get("error"));
  if (answer->type != "welcome" || fds.size() < 2) {
    return Status::Internal("the holder's answer was '" + answer->type + "' with " +
                            std::to_string(fds.size()) + " descriptors");
  }
  std::optional<std::string> init = HexDecode(answer->Get("init"));
  if (!init) return Status::Internal("the holder's FUSE INIT is not hex");
  link->init_ = std::move(*init);
  link->journal_fd_ = std::move(fds[0]);
  for (size_t i = 1; i < fds.size(); ++i) link->fuse_fds_.push_back(std::move(fds[i]));
  return link;
}

HolderLink::~HolderLink() { Unwatch(); }

std::vector<int> HolderLink::TakeFuseFds() {
  std::vector<int> out;
  for (ScopedFd& f : fuse_fds_) out.push_back(f.release());
  fuse_fds_.clear();
  return out;
}

int HolderLink::TakeJournalFd() { return journal_fd_.release(); }

void HolderLink::SendInit(const std::string& init) {
  init_ = init;
  if (Status s = SendHolderMessage(fd_.get(), {"init", {{"init", HexEncode(init)}}}); !s.ok()) {
    spdlog::warn("could not give the holder the FUSE INIT: {}", s.message());
  }
}

void HolderLink::SendServing() { (void)SendHolderMessage(fd_.get(), {"serving", {}}); }

Status HolderLink::SendJournal(int fd) {
  ScopedFd journal(fd);
  int fds[] = {journal.get()};
  return SendHolderMessage(fd_.get(), {"journal", {}}, std::span<const int>(fds));
}

void HolderLink::Unwatch() {
  if (watcher_ == nullptr) return;
  (void)!::write(watcher_->wake_write.get(), "x", 1);
  if (watcher_->thread.joinable()) watcher_->thread.join();
  watcher_.reset();
}

void HolderLink::Watch(std::function<void()> on_stop, std::function<void()> on_gone) {
  watcher_ = std::make_unique<Watcher>();
  int wake_fds[2];
  if (::pipe2(wake_fds, O_CLOEXEC) != 0) return;
  watcher_->wake_read.reset(wake_fds[0]);
  watcher_->wake_write.reset(wake_fds[1]);
  int fd = fd_.get();
  int wake = wake_fds[0];
  watcher_->thread =
      std::thread([fd, wake, on_stop = std::move(on_stop), on_gone = std::move(on_gone)] {
        while (true) {
          pollfd polls[] = {{fd, POLLIN, 0}, {wake, POLLIN, 0}};
          if (::poll(polls, 2, -1) < 0 && errno != EINTR) return;
          if (polls[1].revents != 0) return;
          if (polls[0].revents == 0) continue;
          Result<HolderMessage> m = ReceiveHolderMessage(fd, nullptr, std::chrono::milliseconds(0));
          if (!m.ok()) {
            if (m.status().code() == StatusCode::kDeadlineExceeded) continue;
            on_gone();
            return;
          }
          if (m->type == "stop") {
            spdlog::info("holder: pid {} takes the mount over: stopping", m->Get("successor"));
            on_stop();
          }
        }
      });
}

Result<TakeoverResult> RequestTakeover(const std::string& socket_path, const std::string& exe,
                                       std::chrono::milliseconds timeout) {
  LC_ASSIGN_OR_RETURN(ScopedFd fd, ConnectToHolder(socket_path));
  Status sent = SendHolderMessage(fd.get(), {"takeover", {{"exe", exe}}});
  Result<HolderMessage> answer =
      sent.ok() ? ReceiveHolderMessage(fd.get(), nullptr, timeout) : Result<HolderMessage>(sent);
  fd.reset();
  if (!answer.ok()) return answer.status().WithContext("the holder at " + socket_path);
  if (answer->type == "refused") return Status::PreconditionFailed(answer->Get("error"));
  if (answer->type != "taken") {
    return Status::Internal("the holder answered '" + answer->type + "'");
  }
  TakeoverResult result;
  result.pid = std::stoi(answer->Get("pid"));
  result.pause_s = std::stoi(answer->Get("pause_ms")) / 1000.0;
  return result;
}

}  // namespace lakecache
