// The `lakecache` command line: each group of subcommands adds its flags to the app, bound to
// state its runners own, and returns the runners; main.cc parses and runs the one chosen. The
// groups are added in the order `--help` lists them.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

#include "cli/cli_context.h"
#include "cli/commands.h"
#include "common/status.h"

namespace lakecache::cli {

// A subcommand and what runs it once the command line is parsed, if it was chosen (`*app`): it
// gets the global flags, --timeout parsed.
struct Subcommand {
  CLI::App* app;
  std::function<int(const GlobalFlags&)> run;
};

// ls, stat, cat: objects in a store (stat also a cached path).
std::vector<Subcommand> AddObjectCommands(CLI::App& app);
// mount; `argv` is the whole command line, for the servers a holder starts.
std::vector<Subcommand> AddMountCommand(CLI::App& app, int argc, char** argv);
// master, worker, cluster up/down/status.
std::vector<Subcommand> AddServerCommands(CLI::App& app);
// load, report, free.
std::vector<Subcommand> AddAdminCommands(CLI::App& app);
// cert, health, holder, umount, config show.
std::vector<Subcommand> AddToolCommands(CLI::App& app);

// The flags every command takes; --timeout is parsed later (ParseTimeout).
void AddGlobalFlags(CLI::App& app, GlobalFlags& f, std::string& timeout);
// --timeout: a duration above zero.
Status ParseTimeout(const std::string& text, Duration* out);
// Values given on the command line show in `ps`; secrets must come from a file or the environment.
Status RejectSecretOverrides(const std::vector<std::string>& overrides);

// Flags several commands share.
void AddCredentialsFlag(CLI::App* cmd, std::string& dir, const std::string& what);
void AddAdminFlags(CLI::App* cmd, AdminCommand& c);
void AddHealthSocketFlag(CLI::App* cmd, std::string& path);
void AddMetricsFlag(CLI::App* cmd, std::string& listen, const std::string& extra);
// --insecure and --advertise, the same on the master and the workers.
void AddExposureFlags(CLI::App* cmd, bool& insecure, std::string& advertise,
                      const std::string& who);

}  // namespace lakecache::cli
