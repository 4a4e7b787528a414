#include "cli/mount_options.h"

#include <unistd.h>

#include <charconv>

#include "common/units.h"

namespace lakecache::cli {
namespace {

Result<uint32_t> ParseNumber(const std::string& option, const std::string& text, int base) {
  uint32_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
    return Status::InvalidArgument("-o " + option + ": '" + text + "' is not a" +
                                   (base == 8 ? "n octal mode" : " number"));
  }
  return value;
}

struct MountOptionSpec {
  const char* name;
  const char* value;  // "" for a flag
  const char* help;
};

// What ApplyOne understands; the help and the error for an unknown option list it.
constexpr MountOptionSpec kMountOptions[] = {
    {"allow_other", "", "every user may read the mount, not only the one who mounted it"},
    {"uid", "N", "owner of every file and folder (default: the mounting user)"},
    {"gid", "N", "group of every file and folder (default: the mounting user's)"},
    {"file_mode", "MODE", "octal mode of files (default 0444; 0644 where the namespace writes)"},
    {"dir_mode", "MODE", "octal mode of folders (default 0555; 0755 where the namespace writes)"},
    {"default_permissions", "", "the kernel checks those modes (always on)"},
    {"ro", "", "read-only, whatever the namespaces allow (default: rw when a namespace writes)"},
    {"rw", "", "read-write where the namespaces allow it (the default)"},
    {"fuse_descriptors", "N",
     "descriptors of the FUSE connection read in parallel (default 4; for measuring)"},
    {"nosplice", "", "copy cached bytes into FUSE replies instead of splicing (for measuring)"},
    {"readdirplus", "MODE",
     "which listed entries come with their attributes: adaptive (the default: whole folders once "
     "listed files are being looked up), always, never"},
    {"noresend", "",
     "on a takeover, answer EINTR to what the previous server left unanswered, as on a kernel "
     "before 6.9 (for tests)"},
    {"single_put_max", "SIZE",
     "files up to SIZE staged on disk go as one Put at close (an experiment; default off)"},
    {"upload_parts_per_step", "N", "upload parts per part-size step (for tests)"},
};

std::string Spelled(const MountOptionSpec& o) {
  return std::string(o.name) + (*o.value == '\0' ? "" : "=" + std::string(o.value));
}

Status ApplyOne(const std::string& opt, MountOptions* out) {
  size_t eq = opt.find('=');
  std::string name = opt.substr(0, eq);
  std::string value = eq == std::string::npos ? "" : opt.substr(eq + 1);
  if (name == "allow_other" && eq == std::string::npos) {
    out->fuse.allow_other = true;
  } else if (name == "default_permissions" && eq == std::string::npos) {
    out->fuse.default_permissions = true;
  } else if (name == "ro" && eq == std::string::npos) {
    out->fs.read_only = true;
  } else if (name == "rw" && eq == std::string::npos) {
    out->fs.read_only = false;
  } else if (name == "nosplice" && eq == std::string::npos) {
    out->fuse.splice = false;
  } else if (name == "noresend" && eq == std::string::npos) {
    out->fuse.kernel_resend = false;
  } else if (name == "readdirplus") {
    Result<ReaddirplusMode> mode = ParseReaddirplusMode(value);
    if (!mode.ok()) return Status::InvalidArgument("-o " + opt + ": " + mode.status().message());
    out->fuse.readdirplus = *mode;
  } else if (name == "fuse_descriptors") {
    LC_ASSIGN_OR_RETURN(uint32_t n, ParseNumber(opt, value, 10));
    if (n < 1 || n >= 64) return Status::InvalidArgument("-o " + opt + ": from 1 to 63");
    out->fuse_descriptors = static_cast<int>(n);
  } else if (name == "single_put_max") {
    Result<uint64_t> bytes = ParseByteSize(value);
    if (!bytes.ok()) return Status::InvalidArgument("-o " + opt + ": " + bytes.status().message());
    out->single_put_max = *bytes;
  } else if (name == "upload_parts_per_step") {
    LC_ASSIGN_OR_RETURN(out->upload_parts_per_step, ParseNumber(opt, value, 10));
    if (out->upload_parts_per_step == 0) {
      return Status::InvalidArgument("-o " + opt + ": at least 1");
    }
  } else if (name == "uid") {
    LC_ASSIGN_OR_RETURN(out->fs.uid, ParseNumber(opt, value, 10));
  } else if (name == "gid") {
    LC_ASSIGN_OR_RETURN(out->fs.gid, ParseNumber(opt, value, 10));
  } else if (name == "file_mode") {
    LC_ASSIGN_OR_RETURN(out->fs.file_mode, ParseNumber(opt, value, 8));
  } else if (name == "dir_mode") {
    LC_ASSIGN_OR_RETURN(out->fs.dir_mode, ParseNumber(opt, value, 8));
  } else {
    std::string expected;
    for (const MountOptionSpec& o : kMountOptions) expected += Spelled(o) + ", ";
    return Status::InvalidArgument("-o " + opt + ": unknown mount option (expected " + expected +
                                   "or a config override such as namespaces.NS.metadata_ttl=5m)");
  }
  return Status::Ok();
}

}  // namespace

Result<MountOptions> ParseMountOptions(const std::vector<std::string>& values) {
  MountOptions out;
  out.fs.uid = ::getuid();
  out.fs.gid = ::getgid();
  for (const std::string& value : values) {
    size_t eq = value.find('=');
    if (value.substr(0, eq).find('.') != std::string::npos) {  // a dotted config key
      out.config_overrides.push_back(value);
      continue;
    }
    size_t start = 0;
    while (start <= value.size()) {
      size_t comma = value.find(',', start);
      std::string opt =
          value.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (!opt.empty()) LC_RETURN_IF_ERROR(ApplyOne(opt, &out));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return out;
}

std::string MountOptionsHelp() {
  std::string out;
  for (const MountOptionSpec& o : kMountOptions) {
    std::string spelled = Spelled(o);
    out += "  " + spelled + std::string(spelled.size() < 21 ? 21 - spelled.size() : 1, ' ') +
           o.help + "\n";
  }
  out +=
      "  KEY=VALUE            a config override (a dotted key): namespaces.NS.metadata_ttl=5m,\n"
      "                       client.read_ahead_max=16MiB, cache.policy=lru\n";
  return out;
}

}  // namespace lakecache::cli
