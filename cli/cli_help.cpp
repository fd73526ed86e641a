// Help a person reads in a terminal: option descriptions wrapped to the terminal's width, the
// settings' descriptions cut to their first sentence for `commtap run --help`, and the nearest
// subcommand to a misspelt one.
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <sstream>

#include "cli/cli.hpp"

namespace commtap::cli {

std::size_t terminal_width() {
  std::size_t width = 100;
  if (const char* columns = std::getenv("COLUMNS"); columns && *columns) {
    const long value = std::strtol(columns, nullptr, 10);
    if (value > 0) width = static_cast<std::size_t>(value);
  } else if (winsize size{}; isatty(STDOUT_FILENO) &&
                             ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) {
    width = size.ws_col;
  }
  return std::clamp<std::size_t>(width, 60, 100);
}

std::string wrap_text(const std::string& text, std::size_t width, std::size_t indent) {
  std::string out, line;
  const std::string pad(indent, ' ');
  std::istringstream words(text);
  std::string word;
  const std::size_t room = width > indent + 20 ? width - indent : 20;
  while (words >> word) {
    if (!line.empty() && line.size() + 1 + word.size() > room) {
      out += (out.empty() ? "" : "\n") + pad + line;
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty()) out += (out.empty() ? "" : "\n") + pad + line;
  return out;
}

std::string summarize(const std::string& description, bool flag, std::size_t limit) {
  std::string text = description;
  // A flag's description reads "1 turns ...": as an option, the flag is the 1.
  if (flag && text.rfind("1 ", 0) == 0) {
    text = text.substr(2);
    if (!text.empty())
      text[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(text[0])));
  }
  // The first sentence: a ". " outside parentheses, not after "e.g" or "i.e".
  int depth = 0;
  for (std::size_t i = 0; i + 1 < text.size(); ++i) {
    depth += text[i] == '(' ? 1 : text[i] == ')' ? -1 : 0;
    if (depth == 0 && text[i] == '.' && text[i + 1] == ' ' &&
        !(i >= 3 && (text.compare(i - 3, 3, "e.g") == 0 || text.compare(i - 3, 3, "i.e") == 0))) {
      text.resize(i + 1);
      break;
    }
  }
  if (text.size() <= limit) return text;
  // Too long: cut at the last clause boundary that fits, else at a word.
  std::size_t cut = std::string::npos;
  depth = 0;
  for (std::size_t i = 0; i + 1 < limit; ++i) {
    depth += text[i] == '(' ? 1 : text[i] == ')' ? -1 : 0;
    if (depth == 0 && (text[i] == ';' || text[i] == ':' || text[i] == ',') && text[i + 1] == ' ' &&
        i > limit / 3)
      cut = i;
  }
  if (cut == std::string::npos) {
    cut = text.rfind(' ', limit - 4);
    if (cut == std::string::npos) cut = limit - 4;
  }
  text.resize(cut);
  return text + " ...";
}

namespace {

// Optimal string alignment distance: "qeury" is one step from "query".
std::size_t edit_distance(const std::string& a, const std::string& b) {
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i)
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[n][m];
}

}  // namespace

std::string nearest_name(const std::string& word, const std::vector<std::string>& names) {
  std::string lower = word;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(2, lower.size() / 3) + 1;
  for (const std::string& name : names) {
    std::string candidate = name;
    std::transform(candidate.begin(), candidate.end(), candidate.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    // A prefix ("an", "exp") names the command it begins.
    const std::size_t distance =
        lower.size() >= 2 && candidate.rfind(lower, 0) == 0 ? 0 : edit_distance(lower, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = name;
    }
  }
  return best;
}

std::string HelpFormatter::make_option_desc(const CLI::Option* option) const {
  const std::string text = CLI::Formatter::make_option_desc(option);
  const std::size_t width = terminal_width(), column = get_column_width();
  return wrap_text(text, width > column + 30 ? width - column : 30, 0);
}

std::string HelpFormatter::make_subcommand(const CLI::App* sub) const {
  std::stringstream out;
  const std::size_t width = terminal_width(), column = get_column_width();
  CLI::detail::format_help(
      out, sub->get_display_name(),
      wrap_text(sub->get_description(), width > column + 30 ? width - column : 30, 0), column);
  return out.str();
}

std::string HelpFormatter::make_footer(const CLI::App* app) const {
  const std::string footer = app->get_footer();
  if (footer.empty()) return "";
  std::string out, line;
  std::istringstream lines(footer);
  while (std::getline(lines, line)) out += wrap_text(line, terminal_width(), 0) + "\n";
  return "\n" + out;
}

std::string HelpFormatter::make_usage(const CLI::App* app, std::string name) const {
  if (!usage_line_.empty()) return "Usage: " + usage_line_ + "\n";
  return CLI::Formatter::make_usage(app, std::move(name));
}

}  // namespace commtap::cli
