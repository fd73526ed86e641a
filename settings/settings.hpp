// settings: the COMMTAP_* settings. Each module declares its own (<module>/settings.def) and is
// given them as its own struct (settings/module_settings.hpp); settings/all.def gathers the
// tables, and Settings holds every module's. Parsed once at MPI_Init by the library, read as
// they are by the `commtap` command (which needs neither MPI nor the library for it). A leaf:
// no MPI.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "settings/module_settings.hpp"

namespace commtap {

enum class SettingKind { flag, flag_or_auto, integer, text };

struct SettingSpec {
  const char* variable;  // e.g. "COMMTAP_YIELD"
  const char* field;     // e.g. "yield"
  SettingKind kind;
  const char* default_text;
  long min;
  long max;
  bool agreed;  // rank 0's value is used on every rank (the `scope` column)
  const char* description;
};

// Every module's settings, in the order of settings/all.def. Each module's start function takes
// its own base (a Settings converts to any of them).
struct Settings : InterposeSettings,
                  MonitorSettings,
                  DatatypeSettings,
                  CollectivesSettings,
                  ProbeSettings {};

struct ParsedSettings {
  Settings settings;
  // One line per rejected value, naming the variable, the value and what is accepted.
  std::vector<std::string> problems;
};

std::span<const SettingSpec> setting_specs();

// A setting's value as a message may echo it: at most its first 80 bytes, then "...(N bytes)"
// where it is longer, control characters as '?' (a 100 KB value is not printed back whole, once
// per rank).
std::string shown_value(std::string_view value);

// Reads every setting through `lookup` (getenv in production, a map in tests). Unset or empty
// variables take the default; invalid ones take the default and add a problem line.
ParsedSettings parse_settings(const std::function<const char*(const char*)>& lookup);

// The values in force, as (variable, text) pairs, for the trace database.
std::vector<std::pair<std::string, std::string>> describe(const Settings& settings);

// The declarations as a JSON array (for `commtap run` and `commtap settings`).
std::string settings_json();

// The agreed settings (scope `agreed`) are rank 0's on every rank. Agreeing takes two steps
// around one broadcast, which the caller makes (this library has no MPI):
// the agreed settings' values, as one text for rank 0 to send to every rank;
std::string agreed_values(const Settings& settings);
// then, on every rank, rank 0's values (`rank_0`, from agreed_values on rank 0) replace this
// rank's. Returns one "COMMTAP_X=this rank's (rank 0: rank 0's)" for each that differed.
std::vector<std::string> adopt_agreed_values(Settings& settings, std::string_view rank_0);

// The reference table of docs/settings.md: one Markdown row per setting (variable, `commtap run`
// flag, kind, default, description), as `commtap settings --markdown` prints it.
std::string settings_markdown_table();

}  // namespace commtap
