#include "cli/command_line.h"
#include "cli/commands.h"

namespace lakecache::cli {

std::vector<Subcommand> AddObjectCommands(CLI::App& app) {
  struct State {
    std::string uri, range;
    bool recursive = false;
    AdminCommand stat_cmd;
  };
  auto s = std::make_shared<State>();
  CLI::App* ls = app.add_subcommand("ls", "List objects and folders under a URI, like `aws s3 ls`");
  ls->add_option("uri", s->uri, "s3://bucket/prefix, oss://bucket/prefix or file:///dir")
      ->required();
  ls->add_flag("-R,--recursive", s->recursive, "List every key under the prefix");
  CLI::App* stat = app.add_subcommand(
      "stat", "Size, ETag and modification time; for a cached path also its cached blocks");
  stat->add_option("path", s->stat_cmd.path,
                   "s3://bucket/key (the store), a path in a lakecache mount, or /NAMESPACE/PATH "
                   "of the cluster at --master")
      ->required();
  AddAdminFlags(stat, s->stat_cmd);
  CLI::App* cat = app.add_subcommand("cat", "Write an object (or a byte range of it) to stdout");
  cat->add_option("uri", s->uri, "s3://bucket/key")->required();
  cat->add_option("--range", s->range, "Inclusive byte range FIRST-LAST or FIRST-, as in HTTP");
  return {
      {ls,
       [s](const GlobalFlags& flags) { return RunLs(CliContext(flags), s->uri, s->recursive); }},
      {stat,
       [s](const GlobalFlags& flags) {
         if (s->stat_cmd.path.find("://") == std::string::npos) {
           s->stat_cmd.timeout = flags.timeout;
           return RunPathStat(s->stat_cmd);
         }
         return RunStat(CliContext(flags), s->stat_cmd.path);
       }},
      {cat, [s](const GlobalFlags& flags) { return RunCat(CliContext(flags), s->uri, s->range); }},
  };
}

std::vector<Subcommand> AddAdminCommands(CLI::App& app) {
  struct State {
    LoadCommand load_cmd;
    AdminCommand report_cmd, free_cmd;
  };
  auto s = std::make_shared<State>();
  CLI::App* load = app.add_subcommand(
      "load", "Preload a file or folder into the cache: listings, attributes and data");
  load->add_option("path", s->load_cmd.path,
                   "A path in a lakecache mount, or /NAMESPACE/PATH of the cluster at --master")
      ->required();
  AddAdminFlags(load, s->load_cmd);
  load->add_flag("-R,--recursive", s->load_cmd.recursive, "The whole tree below the folder");
  load->add_flag("--metadata-only", s->load_cmd.metadata_only,
                 "Cache the listings and attributes only, no data");
  load->add_option("--replicas,--replica", s->load_cmd.replicas,
                   "Copies of each block, on the first N workers in placement order (for data "
                   "every host is about to read: a checkpoint, a model)")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  CLI::App* report = app.add_subcommand(
      "report", "Workers, capacity and use per tier, hit ratio, cached bytes per namespace");
  report->add_option("path", s->report_cmd.path,
                     "A path in a lakecache mount (default: the cluster)");
  AddAdminFlags(report, s->report_cmd);
  CLI::App* free_path = app.add_subcommand("free", "Evict a file or folder from the cache");
  free_path
      ->add_option("path", s->free_cmd.path,
                   "A path in a lakecache mount, or /NAMESPACE/PATH of the cluster at --master")
      ->required();
  AddAdminFlags(free_path, s->free_cmd);
  free_path->add_flag("-R,--recursive", s->free_cmd.recursive, "The whole tree below the folder");

  return {
      {load,
       [s](const GlobalFlags& flags) {
         s->load_cmd.timeout = flags.timeout;
         return RunLoad(s->load_cmd);
       }},
      {report,
       [s](const GlobalFlags& flags) {
         s->report_cmd.timeout = flags.timeout;
         return RunReport(s->report_cmd);
       }},
      {free_path,
       [s](const GlobalFlags& flags) {
         s->free_cmd.timeout = flags.timeout;
         return RunFree(s->free_cmd);
       }},
  };
}

}  // namespace lakecache::cli
