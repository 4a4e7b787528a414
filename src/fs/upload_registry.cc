#include "fs/upload_registry.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <spdlog/spdlog.h>

#include "common/text_codec.h"

namespace lakecache {
namespace {

constexpr auto kFirstRetry = std::chrono::milliseconds(200);
constexpr auto kLastRetry = std::chrono::seconds(30);
constexpr auto kAbortTimeout = std::chrono::seconds(30);

std::vector<UploadRecord> ReadRecords(const std::string& path) {
  std::vector<UploadRecord> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> fields;
    std::stringstream split(line);
    for (std::string f; std::getline(split, f, '\t');) fields.push_back(UnescapeField(f));
    if (fields.size() == 3) out.push_back({fields[0], fields[1], fields[2]});
  }
  return out;
}

bool ProcessAlive(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

}  // namespace

// A field of a registry line: '%', tab, newline and carriage return as %XX.
constexpr TextCodec kFieldCodec = TextCodec::PercentHex("\t\n\r");

std::string EscapeField(std::string_view field) { return kFieldCodec.Escape(field); }

std::string UnescapeField(std::string_view field) { return kFieldCodec.Unescape(field); }

UploadRegistry::UploadRegistry(std::string base)
    : base_(std::move(base)), file_(base_.empty() ? "" : base_ + "." + std::to_string(::getpid())) {
  if (!base_.empty()) {
    std::filesystem::path dir = std::filesystem::path(base_).parent_path();
    std::string stem = std::filesystem::path(base_).filename().string() + ".";
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      std::string name = entry.path().filename().string();
      if (!name.starts_with(stem)) continue;
      std::string pid_text = name.substr(stem.size());
      if (pid_text.ends_with(".earlier")) {  // set aside by an earlier process of this pid
        leftovers_.emplace_back(entry.path().string(), ReadRecords(entry.path().string()));
        continue;
      }
      if (pid_text.empty() || pid_text.size() > 9 ||
          pid_text.find_first_not_of("0123456789") != std::string::npos) {
        continue;
      }
      pid_t pid = static_cast<pid_t>(std::stol(pid_text));
      std::string path = entry.path().string();
      if (pid == ::getpid()) {
        // An earlier process of the same pid (a restarted container): moved aside, so that this
        // one's file does not replace it.
        std::string aside = path + ".earlier";
        if (::rename(path.c_str(), aside.c_str()) != 0) continue;
        path = aside;
      } else if (ProcessAlive(pid)) {
        continue;
      }
      leftovers_.emplace_back(path, ReadRecords(path));
    }
  }
  aborter_ = std::thread([this] { RunAborts(); });
}

UploadRegistry::~UploadRegistry() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  changed_.SignalAll();
  aborter_.join();
  // One last try for each abort still pending (a server stopping under its writers); what the
  // store does not take stays in the file for the next server.
  MutexLock lock(&mu_);
  for (const Abort& a : aborts_) {
    Status s = a.store->AbortMultipartUpload(a.upload.key, a.upload.upload_id,
                                             IoOptions::WithTimeout(std::chrono::seconds(5)));
    if (!s.ok() && s.code() != StatusCode::kNotFound) continue;
    std::erase(uploads_, a.upload);
    Settled(a);
  }
  aborts_.clear();
  Save();
  if (!file_.empty() && uploads_.empty()) ::unlink(file_.c_str());
}

std::vector<UploadRecord> UploadRegistry::Leftovers() const {
  std::vector<UploadRecord> out;
  for (const auto& [file, records] : leftovers_)
    out.insert(out.end(), records.begin(), records.end());
  return out;
}

void UploadRegistry::AbortLeftovers(
    const std::function<std::shared_ptr<ObjectStore>(const std::string&)>& store_of) {
  for (const auto& [file, records] : leftovers_) {
    bool all_known = true;
    std::vector<Abort> aborts;
    for (const UploadRecord& r : records) {
      std::shared_ptr<ObjectStore> store = store_of(r.ns);
      if (store == nullptr) {
        all_known = false;
        continue;
      }
      aborts.push_back({std::move(store), r, ""});
    }
    if (!all_known) {
      spdlog::warn("{}: uploads of namespaces this mount does not have are left for later", file);
      continue;
    }
    if (aborts.empty()) {
      ::unlink(file.c_str());
      continue;
    }
    spdlog::info("aborting {} upload(s) a previous server of this mount left unfinished ({})",
                 aborts.size(), file);
    for (Abort& a : aborts) a.from_file = file;
    MutexLock lock(&mu_);
    leftover_left_[file] += aborts.size();
    for (Abort& a : aborts) aborts_.push_back(std::move(a));
  }
  changed_.SignalAll();
}

void UploadRegistry::Add(const UploadRecord& upload) {
  MutexLock lock(&mu_);
  uploads_.push_back(upload);
  Save();
}

void UploadRegistry::Remove(const UploadRecord& upload) {
  MutexLock lock(&mu_);
  auto it = std::find(uploads_.begin(), uploads_.end(), upload);
  if (it == uploads_.end()) return;
  uploads_.erase(it);
  Save();
}

void UploadRegistry::AbortLater(std::shared_ptr<ObjectStore> store, const UploadRecord& upload) {
  {
    MutexLock lock(&mu_);
    aborts_.push_back({std::move(store), upload, ""});
  }
  changed_.SignalAll();
}

size_t UploadRegistry::pending_aborts() const {
  MutexLock lock(&mu_);
  return aborts_.size();
}

uint64_t UploadRegistry::aborted() const {
  MutexLock lock(&mu_);
  return aborted_;
}

void UploadRegistry::Save() {
  if (file_.empty()) return;
  std::string text;
  for (const UploadRecord& u : uploads_) {
    text += EscapeField(u.ns) + "\t" + EscapeField(u.key) + "\t" + EscapeField(u.upload_id) + "\n";
  }
  std::string tmp = file_ + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out) {
      spdlog::warn("{}: cannot record the uploads in progress", tmp);
      return;
    }
  }
  if (::rename(tmp.c_str(), file_.c_str()) != 0) {
    spdlog::warn("{}: cannot record the uploads in progress", file_);
  }
}

void UploadRegistry::Settled(const Abort& a) {
  if (a.from_file.empty()) return;
  // A leftover file goes once every upload it lists is answered.
  if (--leftover_left_[a.from_file] == 0) {
    ::unlink(a.from_file.c_str());
    leftover_left_.erase(a.from_file);
  }
}

void UploadRegistry::RunAborts() {
  auto pause = std::chrono::duration_cast<Clock::duration>(kFirstRetry);
  MutexLock lock(&mu_);
  while (true) {
    while (!stopping_ && aborts_.empty()) changed_.Wait(&mu_);
    if (stopping_) return;
    // The abort stays queued while it runs, so pending_aborts() counts it until it is answered
    // (only this thread removes entries; others append).
    Abort a = aborts_.front();
    mu_.Unlock();
    Status s = a.store->AbortMultipartUpload(a.upload.key, a.upload.upload_id,
                                             IoOptions::WithTimeout(kAbortTimeout));
    mu_.Lock();
    aborts_.erase(aborts_.begin());
    if (s.ok() || s.code() == StatusCode::kNotFound) {
      ++aborted_;
      pause = kFirstRetry;
      auto it = std::find(uploads_.begin(), uploads_.end(), a.upload);
      if (it != uploads_.end()) {
        uploads_.erase(it);
        Save();
      }
      Settled(a);
      spdlog::info("{}: upload {} aborted", a.store->Describe() + "/" + a.upload.key,
                   a.upload.upload_id);
      continue;
    }
    if (s.code() == StatusCode::kUnimplemented) {
      // A store that cannot abort (s3rver) keeps its parts; nothing more can be done here.
      spdlog::warn("{}: cannot abort upload {}: {}", a.upload.key, a.upload.upload_id,
                   s.ToString());
      auto it = std::find(uploads_.begin(), uploads_.end(), a.upload);
      if (it != uploads_.end()) {
        uploads_.erase(it);
        Save();
      }
      Settled(a);
      continue;
    }
    spdlog::warn(
        "{}: aborting upload {} failed, retrying in {} ms: {}", a.upload.key, a.upload.upload_id,
        std::chrono::duration_cast<std::chrono::milliseconds>(pause).count(), s.ToString());
    aborts_.push_back(std::move(a));
    changed_.WaitUntil(&mu_, Clock::now() + pause);
    pause = std::min<Clock::duration>(pause * 2, kLastRetry);
  }
}

}  // namespace lakecache
