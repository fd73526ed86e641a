// analyzer/store/evidence_json: a finding's typed evidence (findings/finding_evidence.hpp) as the
// JSON object that `commtap analyze --json`, the Perfetto export and the findings store's
// `evidence` column print: the one place it is made. Keys are sorted (nlohmann::json objects);
// counts print as integers, measures as floating point numbers.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "analyzer/findings/finding.hpp"

namespace commtap::analyzer {

nlohmann::json evidence_json(const FindingEvidence& evidence);

// A finding's test against chance (its evidence's "test").
nlohmann::json evidence_test_json(const EvidenceTest& test);

// evidence_json as one line, invalid UTF-8 in trace strings replaced: the store's column.
std::string evidence_text(const FindingEvidence& evidence);

}  // namespace commtap::analyzer
