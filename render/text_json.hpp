// render/text_json: the analysis as text (for people and cron mail) and as JSON (the schema is
// in docs/analyzer.md).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "analyzer/health.hpp"

namespace commtap::render {

std::string health_text(const std::vector<analyzer::JobHealth>& jobs);
// `unreadable` (inputs that could not be analyzed) is listed under "unreadable".
nlohmann::json health_json(const std::vector<analyzer::JobHealth>& jobs,
                           const std::vector<analyzer::UnreadableInput>& unreadable = {});

}  // namespace commtap::render
