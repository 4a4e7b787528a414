#include "jobs/flat_tree_walk.h"

#include <algorithm>

namespace lakecache {

FlatTreeWalk::FlatTreeWalk(std::string base, std::string dir, FileFn on_file, FolderFn on_folder)
    : base_(std::move(base)),
      dir_(std::move(dir)),
      on_file_(std::move(on_file)),
      on_folder_(std::move(on_folder)) {
  open_.push_back(OpenFolder{"", next_id_++, 0, {}, {}});
}

Status FlatTreeWalk::Add(ObjectInfo object) {
  const std::string& key = object.key;
  if (!key.starts_with(base_)) return Status::Ok();
  if (any_key_ && key <= last_key_) {
    if (key == last_key_) return Status::Ok();  // a page repeated an entry
    return Status::Internal("the flat listing of '" + base_ + "' is out of order: '" + key +
                            "' after '" + last_key_ + "'");
  }
  last_key_ = key;
  any_key_ = true;
  LC_RETURN_IF_ERROR(Decide(key));
  std::string_view rel_key = std::string_view(key).substr(base_.size());
  size_t slash = rel_key.rfind('/');
  std::string rel(slash == std::string_view::npos ? std::string_view()
                                                  : rel_key.substr(0, slash + 1));
  std::string_view name = rel_key.substr(rel.size());
  while (!rel.starts_with(open_.back().rel)) LC_RETURN_IF_ERROR(Close());
  OpenDown(rel);
  OpenFolder& top = open_.back();
  if (IsValidName(name)) {
    top.pending.push_back(
        Pending{key, DirEntry{std::string(name), false, object.size, object.etag, object.mtime}});
  }
  top.listing.objects.push_back(std::move(object));
  max_held_ = std::max(max_held_, ++held_);
  return Status::Ok();
}

Status FlatTreeWalk::Finish() {
  while (!open_.empty()) LC_RETURN_IF_ERROR(Close());
  return Status::Ok();
}

Status FlatTreeWalk::Decide(std::string_view key) {
  for (OpenFolder& folder : open_) {
    for (Pending& p : folder.pending) {
      if (p.decided || p.shadowed) continue;
      if (!key.starts_with(p.key)) {
        p.decided = true;  // past everything below p.key
        continue;
      }
      // key > p.key: what follows p.key says whether the key is below "p.key/", or past it.
      auto next = static_cast<unsigned char>(key[p.key.size()]);
      if (next == '/') {
        p.shadowed = true;
      } else if (next > '/') {
        p.decided = true;
      }
    }
    LC_RETURN_IF_ERROR(Flush(folder, /*all=*/false));
  }
  return Status::Ok();
}

Status FlatTreeWalk::Flush(OpenFolder& folder, bool all) {
  while (!folder.pending.empty()) {
    Pending& front = folder.pending.front();
    if (!front.decided && !front.shadowed && !all) break;
    if (!front.shadowed) {
      std::string path = JoinPath(DirOf(folder.rel), front.entry.name);
      LC_RETURN_IF_ERROR(
          on_file_(TreeFile{std::move(path), std::move(front.entry), folder.id, folder.files++}));
    }
    folder.pending.pop_front();
  }
  return Status::Ok();
}

Status FlatTreeWalk::Close() {
  OpenFolder& top = open_.back();
  LC_RETURN_IF_ERROR(Flush(top, /*all=*/true));
  held_ -= top.listing.objects.size();
  uint64_t id = top.id;
  std::string dir = DirOf(top.rel);
  ListResult listing = std::move(top.listing);
  open_.pop_back();
  return on_folder_(id, dir, std::move(listing));
}

void FlatTreeWalk::OpenDown(const std::string& rel) {
  while (open_.back().rel.size() < rel.size()) {
    size_t next = rel.find('/', open_.back().rel.size());
    std::string child = rel.substr(0, next + 1);
    open_.back().listing.common_prefixes.push_back(base_ + child);
    open_.push_back(OpenFolder{std::move(child), next_id_++, 0, {}, {}});
  }
}

std::string FlatTreeWalk::DirOf(const std::string& rel) const {
  return rel.empty() ? dir_ : JoinPath(dir_, rel.substr(0, rel.size() - 1));
}

}  // namespace lakecache
