// render/report_html: `commtap report`'s page, one self-contained HTML file (inline SVG, no
// scripts, no network) for one job.
#pragma once

#include <string>

#include "analyzer/health.hpp"
#include "analyzer/trace/report_inputs.hpp"

namespace commtap::render {

std::string health_html(const analyzer::JobHealth& job, const analyzer::ReportInputs& inputs);

}  // namespace commtap::render
