// commtap_settings_doc: prints docs/settings.md, made from the settings tables (settings/all.def):
// the prose below, the list of the settings that are rank 0's (the `scope` column) and the
// reference table. The test settings.docs_current fails when the file differs from this output.
#include <cstdio>
#include <string>
#include <vector>

#include "settings/settings.hpp"

namespace {

constexpr const char* kIntroduction = R"(# Settings

<!-- Generated from the settings tables by commtap_settings_doc (settings/settings_doc.cpp); edit
     those and run `commtap_settings_doc >docs/settings.md`. The test settings.docs_current
     fails when this file differs from what they generate. -->

Every setting is an environment variable read once, at `MPI_Init`. `commtap run` sets them from
its flags (`commtap run --help` lists them too). Unset or empty means the default; an invalid
value is reported by rank 0 in one line (variable, value, what is accepted) and the default is
used.

## Rank 0's settings

Some settings are rank 0's on every rank: those that decide which collective calls commtap makes
on its private communicators or which instances every rank records, and those that rank 0 alone
reads for all (the job id, the cost model file, the hosts to avoid). An MPMD launch can give
ranks different environments, and a rank with other values would wait for the rest forever; the
lowest rank that had other values says so in one line. They are
)";

constexpr const char* kDeclarations = R"(
`COMMTAP_DISABLE` cannot be agreed on (a disabled rank makes no call at all) and must be equal on
all ranks. Every other setting is each rank's own.

## Where settings are declared

Each module declares its own settings in a table (`interpose/`, `monitor/`, `datatypes/`,
`collectives/`, `probes/settings.def`, whose `scope` column says which are rank 0's) and is given
them as a struct of its own; `settings/all.def` gathers the tables into the one list that the
library parses and the `commtap` command is linked with.

## Reference

The table is also what `commtap settings --markdown` prints.

<!-- settings:begin -->
)";

constexpr const char* kEnd = "<!-- settings:end -->\n";

// "`A`, `B` and `C`."
std::string agreed_list() {
  std::vector<std::string> names;
  for (const commtap::SettingSpec& spec : commtap::setting_specs())
    if (spec.agreed) names.push_back(std::string("`") + spec.variable + "`");
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return out + ".\n";
}

}  // namespace

int main() {
  const std::string document = std::string(kIntroduction) + agreed_list() + kDeclarations +
                               commtap::settings_markdown_table() + kEnd;
  return std::fputs(document.c_str(), stdout) < 0 ? 1 : 0;
}
