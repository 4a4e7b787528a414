#include "master_client/master_set.h"

#include <grpcpp/server_context.h>

#include <algorithm>

#include "rpc/grpc_util.h"

namespace lakecache {
namespace {

constexpr auto kLongestPause = std::chrono::milliseconds(1000);
// A master that did not answer is passed over (and not taken back as the leader a view names)
// until it answers again or this long has passed: longer than a mount's call, and than the lease
// the followers' views go on naming a dead leader for.
constexpr auto kDownFor = std::chrono::seconds(30);
// A probe of a master's transport: a few round trips to a server that answers at once.
constexpr auto kProbeTimeout = std::chrono::milliseconds(1000);

// The leader a redirect names: true with `leader` set (maybe empty) when `status` is one.
bool RedirectLeader(const grpc::Status& status, const grpc::ClientContext& context,
                    std::string* leader) {
  if (status.error_code() != grpc::StatusCode::FAILED_PRECONDITION) return false;
  const auto& trailing = context.GetServerTrailingMetadata();
  auto it = trailing.find(kLeaderMetadata);
  if (it == trailing.end()) return false;
  leader->assign(it->second.data(), it->second.size());
  return true;
}

bool DidNotAnswer(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE ||
         status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

}  // namespace

grpc::Status RedirectToLeader(grpc::ServerContext* context, const std::string& self,
                              const std::string& leader, const std::string& why) {
  context->AddTrailingMetadata(kLeaderMetadata, leader);
  std::string message = leader.empty()
                            ? "no master leads the cluster now" +
                                  (why.empty() ? std::string() : " (" + why + ")") + "; master " +
                                  self + " follows and serves this only through the leader"
                            : "master " + self + " follows; the leader " + leader + " serves this";
  return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, message);
}

Result<std::vector<std::string>> ParseMasterList(std::string_view flag, std::string_view list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    std::string_view item = list.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (item.empty()) {
      return Status::InvalidArgument(std::string(flag) + " '" + std::string(list) +
                                     "': an empty address in the list (HOST:PORT[,HOST:PORT...])");
    }
    std::string address(item);
    LC_RETURN_IF_ERROR(rpc::CheckListenAddress(flag, address));
    if (std::find(out.begin(), out.end(), address) == out.end()) out.push_back(address);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

MasterSet::MasterSet(std::vector<std::string> addresses, ChannelFn open,
                     std::optional<rpc::Transport> transport, const SteadyClock* clock)
    : addresses_(std::move(addresses)),
      open_(std::move(open)),
      transport_(transport),
      clock_(clock) {
  for (const std::string& a : addresses_) known_.push_back({a, nullptr});
  down_until_.resize(known_.size());
}

MasterSet::Master MasterSet::At(size_t i) {
  if (known_[i].channel == nullptr) known_[i].channel = open_(known_[i].address);
  return known_[i];
}

size_t MasterSet::IndexOf(const std::string& address) {
  for (size_t i = 0; i < known_.size(); ++i) {
    if (known_[i].address == address) return i;
  }
  // A leader by another name than the ones given (its pod IP, say): one slot after them, which the
  // next such leader takes over, so the list does not grow with every restart.
  if (known_.size() == addresses_.size()) {
    known_.push_back({address, nullptr});
    down_until_.emplace_back();
  } else {
    known_.back() = {address, nullptr};
    down_until_.back() = {};
  }
  return known_.size() - 1;
}

size_t MasterSet::NextAfter(size_t i) {
  auto now = clock_->Now();
  for (size_t step = 1; step <= known_.size(); ++step) {
    size_t next = (i + step) % known_.size();
    if (now >= down_until_[next]) return next;
  }
  return (i + 1) % known_.size();  // every one down: each in turn
}

void MasterSet::Answered(const Master& master) {
  MutexLock lock(&mu_);
  for (size_t i = 0; i < known_.size(); ++i) {
    if (known_[i].address == master.address) down_until_[i] = {};
  }
}

Status MasterSet::WaitForAny(std::chrono::system_clock::time_point deadline) {
  std::vector<Master> all;
  {
    MutexLock lock(&mu_);
    for (size_t i = 0; i < known_.size(); ++i) all.push_back(At(i));
  }
  std::vector<bool> probed(all.size(), false);
  for (;;) {
    for (size_t i = 0; i < all.size(); ++i) {
      grpc_connectivity_state state = all[i].channel->GetState(/*try_to_connect=*/true);
      if (state == GRPC_CHANNEL_READY) {
        MutexLock lock(&mu_);
        current_ = IndexOf(all[i].address);
        return Status::Ok();
      }
      // A connection that failed: at a server of the other transport it always will.
      if (state == GRPC_CHANNEL_TRANSIENT_FAILURE && transport_ && !probed[i]) {
        probed[i] = true;
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::system_clock::now());
        LC_RETURN_IF_ERROR(CheckTransport(all[i].address, std::clamp(left, {}, kProbeTimeout)));
      }
    }
    auto now = std::chrono::system_clock::now();
    if (now >= deadline) return Status::Unavailable("no connection to the " + Describe());
    // Wakes on any change of the first channel's state, or after a tenth of a second to look at
    // the others.
    all[0].channel->WaitForStateChange(all[0].channel->GetState(false),
                                       std::min(deadline, now + std::chrono::milliseconds(100)));
  }
}

Status MasterSet::CheckTransport(const std::string& address,
                                 std::chrono::milliseconds timeout) const {
  if (!transport_) return Status::Ok();
  std::string mismatch = rpc::TransportMismatch(address, *transport_, timeout);
  if (mismatch.empty()) return Status::Ok();
  return Status::InvalidArgument("master " + address + " " + mismatch);
}

MasterSet::Master MasterSet::Current() {
  MutexLock lock(&mu_);
  return At(current_);
}

void MasterSet::NoteLeader(const std::string& leader) {
  if (leader.empty()) return;
  MutexLock lock(&mu_);
  size_t i = IndexOf(leader);
  if (clock_->Now() >= down_until_[i]) current_ = i;
}

bool MasterSet::Failed(const Master& master, const grpc::Status& status,
                       const grpc::ClientContext& context) {
  std::string leader;
  bool redirect = RedirectLeader(status, context, &leader);
  if (!redirect && !DidNotAnswer(status)) return false;
  // A master that answered with a redirect is up, and so is one that was only slow (the attempt's
  // deadline passed on a connected channel: a large listing, a busy host); one that did not
  // answer is passed over until it answers again or kDownFor passes (the views of its followers
  // go on naming a dead leader until its lease ends).
  bool slow = status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED &&
              master.channel->GetState(/*try_to_connect=*/false) == GRPC_CHANNEL_READY;
  MutexLock lock(&mu_);
  size_t failed = IndexOf(master.address);
  down_until_[failed] =
      redirect || slow ? std::chrono::steady_clock::time_point{} : clock_->Now() + kDownFor;
  if (redirect && !leader.empty() && leader != master.address) {
    size_t named = IndexOf(leader);
    current_ = clock_->Now() >= down_until_[named] ? named : NextAfter(failed);
  } else if (current_ == failed) {
    current_ = NextAfter(failed);
  }
  return true;
}

std::string MasterSet::Describe() const {
  if (addresses_.size() == 1) return "master at " + addresses_[0];
  std::string out = "masters ";
  for (size_t i = 0; i < addresses_.size(); ++i) out += (i ? "," : "") + addresses_[i];
  return out;
}

MasterSet::Attempts::Attempts(MasterSet& set, std::chrono::system_clock::time_point deadline)
    : set_(set), deadline_(deadline) {}

bool MasterSet::Attempts::Again(const Master& master, const grpc::Status& status,
                                const grpc::ClientContext& context) {
  // The call's own deadline cut the attempt short: the answer before it says more.
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && !last_.ok() &&
      std::chrono::system_clock::now() >= deadline_) {
    return false;
  }
  last_ = rpc::FromGrpcStatus(status, "master " + master.address);
  // No connection: a master of the other transport never gives one, whatever the wait.
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE &&
      std::find(probed_.begin(), probed_.end(), master.address) == probed_.end()) {
    probed_.push_back(master.address);
    if (Status mismatch = set_.CheckTransport(master.address, kProbeTimeout); !mismatch.ok()) {
      answers_.clear();
      last_ = mismatch;
      return false;
    }
  }
  std::erase_if(answers_, [&](const Answer& a) { return a.master == master.address; });
  answers_.push_back({master.address, status.error_message()});
  if (answers_.size() > 4) answers_.erase(answers_.begin());
  std::string leader;
  bool redirect = RedirectLeader(status, context, &leader);
  if (!set_.Failed(master, status, context)) return false;
  if (redirect) {
    std::erase(unreachable_, master.address);
  } else if (std::find(unreachable_.begin(), unreachable_.end(), master.address) ==
             unreachable_.end()) {
    unreachable_.push_back(master.address);
  }
  size_t masters;
  {
    MutexLock lock(&set_.mu_);
    masters = set_.known_.size();
  }
  // Every master out of reach: no point in waiting for one (a restart is the caller's to wait
  // for, as with a single master).
  if (unreachable_.size() >= masters) return false;
  if (std::chrono::system_clock::now() >= deadline_) return false;
  // A redirect to a leader not yet asked is followed at once; no leader, or one that did not
  // answer (its lease not yet expired), is asked again after a pause.
  bool leader_down =
      std::find(unreachable_.begin(), unreachable_.end(), leader) != unreachable_.end();
  bool pause_now = redirect && (leader.empty() || leader == last_leader_ || leader_down);
  if (redirect) last_leader_ = leader;
  if (redirect && !leader.empty() && leader_down) {
    // The named leader did not answer: try the next master meanwhile instead.
    MutexLock lock(&set_.mu_);
    set_.current_ = set_.NextAfter(set_.IndexOf(master.address));
  }
  if (pause_now) {
    auto left = deadline_ - std::chrono::system_clock::now();
    set_.clock_->SleepFor(
        std::min<std::chrono::system_clock::duration>(pause_, std::max(left, {})));
    pause_ = std::min(pause_ * 2, kLongestPause);
    if (std::chrono::system_clock::now() >= deadline_) return false;
  }
  return true;
}

Status MasterSet::Attempts::Error() const {
  if (answers_.size() < 2) return last_;
  // Group the answers by what they said, the last answer's group first.
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;  // reason, masters
  for (auto it = answers_.rbegin(); it != answers_.rend(); ++it) {
    auto group = std::find_if(groups.begin(), groups.end(),
                              [&](const auto& g) { return g.first == it->reason; });
    if (group == groups.end()) group = groups.insert(groups.end(), {it->reason, {}});
    group->second.insert(group->second.begin(), it->master);
  }
  auto line = [](const auto& group) {
    std::string who = group.second.size() == 1 ? "master " : "masters ";
    for (size_t i = 0; i < group.second.size(); ++i) who += (i ? "," : "") + group.second[i];
    return group.first.empty() ? who : who + ": " + group.first;
  };
  std::string message = line(groups.front());
  for (size_t i = 1; i < groups.size(); ++i) {
    message += (i == 1 ? " (before that: " : "; ") + line(groups[i]);
  }
  if (groups.size() > 1) message += ")";
  return Status(last_.code(), message);
}

Status MasterSet::Call(const Attempt& attempt, std::chrono::milliseconds per_attempt,
                       std::chrono::system_clock::time_point deadline) {
  Attempts attempts(*this, deadline);
  for (;;) {
    Master master = Current();
    grpc::ClientContext context;
    context.set_deadline(std::min(deadline, std::chrono::system_clock::now() + per_attempt));
    grpc::Status status = attempt(master, &context);
    if (status.ok()) {
      Answered(master);
      return Status::Ok();
    }
    if (!attempts.Again(master, status, context)) return attempts.Error();
  }
}

}  // namespace lakecache
