// What every subcommand that reads job directories shares: input options and error lines.
#include <cstdio>

#include "analyzer/trace/untrusted_input.hpp"
#include "cli/cli.hpp"

namespace commtap::cli {

using namespace commtap::analyzer;

void add_input_options(CLI::App* command, double& timeout_s, const std::string& timeout_flag,
                       const std::string& timeout_help, const std::string& group) {
  command
      ->add_flag_callback(
          "--follow-symlinks", [] { set_follow_symlinks(true); },
          "Also read symbolic links to rank files and job directories (as root: only where the "
          "target has the link's owner)")
      ->group(group);
  command->add_option(timeout_flag, timeout_s, timeout_help)->capture_default_str()->group(group);
}

void print_error(const std::string& message) {
  std::fprintf(stderr, "commtap: %s\n", clean_text(message).c_str());
}

void print_warning(const std::string& message) {
  std::fprintf(stderr, "commtap: warning: %s\n", clean_text(message).c_str());
}

std::string dump_json(const nlohmann::json& value) {
  return value.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace commtap::cli
