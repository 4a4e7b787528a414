#include "fs/order_hints.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>

#include "common/units.h"

namespace lakecache {
namespace {

uint64_t PathHash(std::string_view path) { return std::hash<std::string_view>{}(path); }

}  // namespace

uint64_t HintedFile::HeadBlocks(uint64_t head) const {
  if (block_size == 0) return 0;
  return std::min(blocks(), std::max<uint64_t>(1, (head + block_size - 1) / block_size));
}

uint64_t HintedFile::BlockBytes(uint64_t index) const {
  uint64_t start = index * block_size;
  return start >= size ? 0 : std::min(block_size, size - start);
}

OrderHints::OrderHints(HintTarget* target, OrderHintOptions options)
    : target_(target), options_(options) {
  thread_ = std::thread([this] { Run(); });
}

OrderHints::~OrderHints() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.SignalAll();
  thread_.join();
  std::vector<std::unique_ptr<HintedFile>> drop;
  {
    MutexLock lock(&mu_);
    while (!orders_.empty()) Remove(orders_.size() - 1, &drop);
  }
  DropAll(std::move(drop));
}

std::string OrderHints::Normalize(std::string_view path) {
  std::string out;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t end = path.find('/', pos);
    if (end == std::string_view::npos) end = path.size();
    std::string_view part = path.substr(pos, end - pos);
    pos = end + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..") return "";
    if (!out.empty()) out += '/';
    out += part;
  }
  return out;
}

uint64_t OrderHints::BeginWrite(pid_t process, bool append, std::string prefix) {
  std::vector<std::unique_ptr<HintedFile>> drop;
  uint64_t writer = 0;
  {
    MutexLock lock(&mu_);
    Order* order = nullptr;
    auto mine = std::find_if(orders_.begin(), orders_.end(),
                             [&](const auto& o) { return process != 0 && o->process == process; });
    if (mine != orders_.end()) {
      if (append) {
        order = mine->get();
      } else {
        Remove(static_cast<size_t>(mine - orders_.begin()), &drop);
      }
    }
    if (order == nullptr) {
      if (orders_.size() >= options_.max_orders) {
        auto oldest =
            std::min_element(orders_.begin(), orders_.end(),
                             [](const auto& a, const auto& b) { return a->active < b->active; });
        Remove(static_cast<size_t>(oldest - orders_.begin()), &drop);
      }
      auto created = std::make_unique<Order>();
      created->id = next_id_++;
      created->process = process;
      order = created.get();
      orders_.push_back(std::move(created));
      live_orders_.store(orders_.size(), std::memory_order_relaxed);
    }
    order->active = options_.clock->Now();
    ++order->writers;
    writer = next_id_++;
    writers_[writer] = Writer{order->id, std::move(prefix)};
  }
  DropAll(std::move(drop));
  return writer;
}

void OrderHints::Write(uint64_t writer, std::string_view bytes) {
  {
    MutexLock lock(&mu_);
    auto w = writers_.find(writer);
    Order* order = w == writers_.end() ? nullptr : FindOrder(w->second.order);
    if (order == nullptr) return;  // replaced by a newer order of the same process
    const std::string& prefix = w->second.prefix;
    while (!bytes.empty()) {
      size_t nl = bytes.find('\n');
      if (nl == std::string_view::npos) {
        order->partial.append(bytes);
        break;
      }
      if (order->partial.empty()) {
        AddLine(*order, prefix, bytes.substr(0, nl));
      } else {
        order->partial.append(bytes.substr(0, nl));
        AddLine(*order, prefix, order->partial);
        order->partial.clear();
      }
      bytes.remove_prefix(nl + 1);
    }
    order->active = options_.clock->Now();
  }
  cv_.Signal();
}

void OrderHints::EndWrite(uint64_t writer) {
  {
    MutexLock lock(&mu_);
    auto w = writers_.find(writer);
    if (w == writers_.end()) return;
    if (Order* order = FindOrder(w->second.order)) {
      if (!order->partial.empty()) {
        std::string last = std::move(order->partial);
        order->partial.clear();
        AddLine(*order, w->second.prefix, last);
      }
      --order->writers;
    }
    writers_.erase(w);
  }
  cv_.Signal();
}

void OrderHints::AddLine(Order& order, const std::string& prefix, std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.empty() || line.front() == '#') return;
  std::string path = Normalize(line);
  if (!path.empty()) path.insert(0, prefix);
  if (path.empty()) {
    ++counters_.files_missing;
    return;
  }
  order.index.emplace(PathHash(path), order.entries.size());
  order.entries.emplace_back().path = std::move(path);
  ++counters_.files_hinted;
}

void OrderHints::Opened(std::string_view path) {
  if (live_orders_.load(std::memory_order_relaxed) == 0) return;
  uint64_t hash = PathHash(path);
  std::vector<std::unique_ptr<HintedFile>> drop;
  bool moved = false;
  {
    MutexLock lock(&mu_);
    for (auto& order : orders_) {
      auto it = order->index.find(hash);
      if (it == order->index.end()) continue;
      Entry& e = order->entries[it->second];
      order->active = options_.clock->Now();
      order->furthest = std::max(order->furthest, it->second + 1);
      switch (e.state) {
        case State::kPending:  // read before its turn (or before the rest of its head)
          ahead_ -= e.bytes_started;
          e.state = State::kRead;
          e.path = std::string();
          e.file.reset();
          break;
        case State::kFetching:
          e.opened = true;
          break;
        case State::kFetched:
          e.state = State::kRead;
          ahead_ -= e.bytes_started;
          e.file.reset();  // its blocks are the reader's now
          ++counters_.files_read;
          moved = true;
          break;
        default:
          break;
      }
      Sweep(*order, &drop);
    }
  }
  // A file read, or files given up (a reader far ahead), leave room in the window.
  bool room = moved || !drop.empty();
  DropAll(std::move(drop));
  if (room) cv_.Signal();
}

void OrderHints::Sweep(Order& order, std::vector<std::unique_ptr<HintedFile>>* drop) {
  if (order.furthest <= options_.lag) return;
  size_t behind = order.furthest - options_.lag;
  for (; order.swept < behind && order.swept < order.next; ++order.swept) {
    Entry& e = order.entries[order.swept];
    if (Unread(e)) {
      Release(e, drop);
      ++counters_.files_dropped;
    }
  }
  // Nothing is fetched that far behind the readers.
  if (order.next < behind) {
    for (size_t i = order.next; i < behind; ++i) {
      Entry& e = order.entries[i];
      if (Unread(e)) {
        Release(e, drop);
        ++counters_.files_dropped;
      } else if (e.state == State::kPending) {
        e.state = State::kDropped;
        e.path = std::string();
      }
    }
    order.next = behind;
    order.swept = std::max(order.swept, behind);
  }
}

void OrderHints::Release(Entry& e, std::vector<std::unique_ptr<HintedFile>>* drop) {
  ahead_ -= e.bytes_started;
  e.state = State::kDropped;
  if (e.file != nullptr) drop->push_back(std::move(e.file));
  e.path = std::string();
}

void OrderHints::Remove(size_t at, std::vector<std::unique_ptr<HintedFile>>* drop) {
  Order& order = *orders_[at];
  for (Entry& e : order.entries) {
    if (Unread(e)) Release(e, drop);
    // An entry being fetched is settled by Finish, which finds its order gone.
  }
  orders_.erase(orders_.begin() + static_cast<std::ptrdiff_t>(at));
  live_orders_.store(orders_.size(), std::memory_order_relaxed);
}

bool OrderHints::Unread(const Entry& e) {
  // Fetched whole, or the start of its head, and not opened.
  return e.state == State::kFetched || (e.state == State::kPending && e.bytes_started > 0);
}

OrderHints::Order* OrderHints::FindOrder(uint64_t id) {
  for (auto& o : orders_) {
    if (o->id == id) return o.get();
  }
  return nullptr;
}

void OrderHints::DropAll(std::vector<std::unique_ptr<HintedFile>> files) {
  for (const auto& f : files) target_->Drop(*f);
}

bool OrderHints::NextWork(Work* work, SteadyClock::time_point* wake) {
  SteadyClock::time_point now = options_.clock->Now();
  *wake = now + std::chrono::seconds(1);  // the idle sweep
  if (ahead_ >= options_.window || orders_.empty()) return false;
  for (size_t n = 0; n < orders_.size(); ++n) {
    Order& order = *orders_[(turn_ + n) % orders_.size()];
    if (order.retry_at > now) {
      *wake = std::min(*wake, order.retry_at);
      continue;
    }
    while (order.next < order.entries.size() &&
           order.entries[order.next].state != State::kPending) {
      ++order.next;
    }
    if (order.next >= order.entries.size()) continue;
    Entry& e = order.entries[order.next];
    e.state = State::kFetching;
    e.opened = false;
    work->order = order.id;
    work->entry = order.next;
    work->first_block = e.blocks_started;
    work->file = std::move(e.file);
    if (work->file == nullptr) work->path = e.path;
    turn_ = (turn_ + n + 1) % orders_.size();
    return true;
  }
  return false;
}

std::unique_ptr<HintedFile> OrderHints::Finish(Work& work, Result<HintedFile> resolved,
                                               uint64_t started) {
  Order* order = FindOrder(work.order);
  std::unique_ptr<HintedFile> file = std::move(work.file);
  if (file == nullptr && resolved.ok()) file = std::make_unique<HintedFile>(std::move(*resolved));
  if (order == nullptr) return file;  // replaced meanwhile: what started is not wanted
  Entry& e = order->entries[work.entry];
  if (file == nullptr) {
    e.state = State::kMissing;
    e.path = std::string();
    ++counters_.files_missing;
    if (order->next == work.entry) ++order->next;
    return nullptr;
  }
  if (work.entry < order->swept && !e.opened) {
    // Readers went `lag` past it while it was being fetched: given up as soon as fetched.
    ahead_ -= e.bytes_started;
    e.state = State::kDropped;
    e.path = std::string();
    ++counters_.files_dropped;
    return file;
  }
  uint64_t bytes = 0;
  for (uint64_t b = work.first_block; b < work.first_block + started; ++b) {
    bytes += file->BlockBytes(b);
  }
  counters_.bytes_fetched += bytes;
  e.blocks_started += started;
  bool complete = e.blocks_started >= file->HeadBlocks(options_.head);
  if (complete) ++counters_.files_fetched;
  if (e.opened) {
    // A reader has it already: it reads the blocks started, and those of an earlier, partial
    // start of its head.
    ahead_ -= e.bytes_started;
    e.state = State::kRead;
    e.path = std::string();
    ++counters_.files_read;
    if (order->next == work.entry) ++order->next;
    return nullptr;
  }
  e.bytes_started += bytes;
  ahead_ += bytes;
  e.file = std::move(file);
  if (complete) {
    e.state = State::kFetched;
    e.path = std::string();
    if (order->next == work.entry) ++order->next;
  } else {
    e.state = State::kPending;  // the rest when the budget has room again
    order->retry_at = options_.clock->Now() + options_.budget_retry;
  }
  return nullptr;
}

void OrderHints::Run() {
  mu_.Lock();
  while (!stopping_) {
    // Orders nobody matched or wrote for a while are given up.
    std::vector<std::unique_ptr<HintedFile>> drop;
    SteadyClock::time_point now = options_.clock->Now();
    for (size_t i = orders_.size(); i-- > 0;) {
      if (orders_[i]->writers == 0 && now - orders_[i]->active > options_.idle) Remove(i, &drop);
    }
    Work work;
    SteadyClock::time_point wake;
    if (!NextWork(&work, &wake)) {
      if (!drop.empty()) {
        mu_.Unlock();
        DropAll(std::move(drop));
        mu_.Lock();
        continue;
      }
      options_.clock->WaitUntil(&cv_, &mu_, wake);
      continue;
    }
    uint64_t limit = std::max<uint64_t>(1, options_.window - ahead_);
    mu_.Unlock();
    DropAll(std::move(drop));
    Result<HintedFile> resolved = Status::NotFound("");
    const HintedFile* file = work.file.get();
    if (file == nullptr) {
      resolved = target_->Resolve(work.path);
      if (!resolved.ok()) {
        spdlog::debug("order hint: {}: {}", work.path, resolved.status().ToString());
      } else {
        file = &*resolved;
      }
    }
    uint64_t started = 0;
    if (file != nullptr && file->block_size > 0) {
      uint64_t head = file->HeadBlocks(options_.head);
      uint64_t blocks = std::max<uint64_t>(1, (limit + file->block_size - 1) / file->block_size);
      if (work.first_block < head) {
        started =
            target_->Fetch(*file, work.first_block, std::min(blocks, head - work.first_block));
      }
    }
    mu_.Lock();
    std::unique_ptr<HintedFile> unwanted = Finish(work, std::move(resolved), started);
    if (unwanted != nullptr) {
      mu_.Unlock();
      target_->Drop(*unwanted);
      mu_.Lock();
    }
  }
  mu_.Unlock();
}

OrderHints::Counters OrderHints::counters() const {
  MutexLock lock(&mu_);
  return counters_;
}

uint64_t OrderHints::bytes_ahead() const {
  MutexLock lock(&mu_);
  return ahead_;
}

std::string OrderHints::Describe() const {
  MutexLock lock(&mu_);
  std::string out =
      "window " + FormatByteSize(options_.window) + ", fetched ahead " + FormatByteSize(ahead_) +
      "; files hinted " + std::to_string(counters_.files_hinted) + ", fetched " +
      std::to_string(counters_.files_fetched) + " (" + FormatByteSize(counters_.bytes_fetched) +
      "), read after fetch " + std::to_string(counters_.files_read) + ", dropped unread " +
      std::to_string(counters_.files_dropped) + ", not found " +
      std::to_string(counters_.files_missing) + "\n";
  for (const auto& o : orders_) {
    out += "order " + std::to_string(o->id) + ": process " + std::to_string(o->process) + ", " +
           std::to_string(o->entries.size()) + " files, readers at " + std::to_string(o->furthest) +
           ", next fetch " + std::to_string(o->next) + (o->writers > 0 ? ", being written" : "") +
           "\n";
  }
  return out;
}

}  // namespace lakecache
