// The settings reference as a Markdown table, one row per setting of settings/all.def: what
// docs/settings.md lists between its markers (commtap_settings_doc) and `commtap settings
// --markdown` prints.
#include <algorithm>
#include <string>

#include "settings/settings.hpp"

namespace commtap {

namespace {

// `commtap run`'s flag for a setting: the field with dashes; settings that are not flags take a
// value.
std::string run_flag(const SettingSpec& spec) {
  std::string name = spec.field;
  std::replace(name.begin(), name.end(), '_', '-');
  const bool takes_value = spec.kind != SettingKind::flag && spec.kind != SettingKind::flag_or_auto;
  return "--" + name + (takes_value ? " VALUE" : "");
}

std::string kind_text(const SettingSpec& spec) {
  switch (spec.kind) {
    case SettingKind::flag:
      return "flag";
    case SettingKind::flag_or_auto:
      return "flag or `auto`";
    case SettingKind::integer:
      return "integer " + std::to_string(spec.min) + ".." + std::to_string(spec.max);
    case SettingKind::text:
      return "text";
  }
  return "?";
}

}  // namespace

std::string settings_markdown_table() {
  std::string out =
      "| Variable | `commtap run` flag | Kind | Default | Description |\n"
      "|---|---|---|---|---|\n";
  for (const SettingSpec& spec : setting_specs()) {
    const std::string default_text = spec.default_text;
    out += "| `" + std::string(spec.variable) + "` | `" + run_flag(spec) + "` | " +
           kind_text(spec) + " | " + (default_text.empty() ? "(empty)" : "`" + default_text + "`") +
           " | " + spec.description + " |\n";
  }
  return out;
}

}  // namespace commtap
