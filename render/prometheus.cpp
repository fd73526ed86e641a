#include "render/prometheus.hpp"

#include <cmath>
#include <cstdio>
#include <map>

#include "analyzer/trace/untrusted_input.hpp"

namespace commtap::render {

using namespace commtap::analyzer;

namespace {

// Label values must be valid UTF-8 (promtool and node_exporter reject the whole file otherwise).
std::string label_value(const std::string& raw) {
  const std::string text = clean_text(raw, /*keep_newlines=*/true);
  std::string out;
  for (char c : text) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char text[32];
  std::snprintf(text, sizeof text, "%.15g", value);  // Unix times to the microsecond
  return text;
}

class Exposition {
 public:
  // One metric family: its HELP and TYPE lines, then its samples together, as the format wants.
  void family(const char* name, const char* help) {
    name_ = name;
    out_ += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " gauge\n";
  }
  void sample(const std::vector<std::pair<const char*, std::string>>& labels, double value) {
    out_ += name_;
    if (!labels.empty()) {
      out_ += '{';
      for (std::size_t i = 0; i < labels.size(); ++i)
        out_ += std::string(i ? "," : "") + labels[i].first + "=\"" +
                label_value(labels[i].second) + "\"";
      out_ += '}';
    }
    out_ += " " + number(value) + "\n";
  }
  const std::string& text() const { return out_; }

 private:
  std::string name_, out_;
};

}  // namespace

std::string prometheus_text(const AnalysisRun& run) {
  Exposition e;
  // Jobs are told apart by path too: a job id can repeat (a fixed COMMTAP_JOB_ID).
  auto job_labels = [](const JobHealth& job) {
    return std::vector<std::pair<const char*, std::string>>{{"job_id", job.job_id},
                                                            {"path", job.path}};
  };
  e.family("commtap_finding",
           "An active finding of commtap analyze (1), by job, kind, subject and severity.");
  for (const JobHealth& job : run.jobs)
    for (const Finding& f : job.findings) {
      auto labels = job_labels(job);
      labels.insert(
          labels.end(),
          {{"kind", f.kind}, {"subject", f.subject}, {"severity", severity_name(f.severity)}});
      e.sample(labels, 1);
    }
  e.family("commtap_finding_first_seen_timestamp_seconds",
           "When the evidence of an active finding begins (Unix time).");
  for (const JobHealth& job : run.jobs)
    for (const Finding& f : job.findings) {
      auto labels = job_labels(job);
      labels.insert(labels.end(), {{"kind", f.kind}, {"subject", f.subject}});
      e.sample(labels, static_cast<double>(f.first_seen_ns) / 1e9);
    }
  e.family("commtap_job_findings", "Active findings of a job, by severity.");
  for (const JobHealth& job : run.jobs)
    for (Severity s : {Severity::info, Severity::warning, Severity::error, Severity::critical}) {
      int count = 0;
      for (const Finding& f : job.findings) count += f.severity == s;
      auto labels = job_labels(job);
      labels.emplace_back("severity", severity_name(s));
      e.sample(labels, count);
    }
  struct PerJob {
    const char* name;
    const char* help;
    double (*value)(const JobHealth&);
  };
  static const PerJob per_job[] = {
      {"commtap_job_ranks", "Ranks of the job.",
       [](const JobHealth& j) { return static_cast<double>(j.ranks); }},
      {"commtap_job_hosts", "Hosts of the job.",
       [](const JobHealth& j) { return static_cast<double>(j.hosts); }},
      {"commtap_job_running", "1 while some rank of the job has not ended.",
       [](const JobHealth& j) { return j.running ? 1.0 : 0.0; }},
      {"commtap_job_last_heartbeat_timestamp_seconds",
       "The job's newest heartbeat (Unix time): the analysis' now.",
       [](const JobHealth& j) { return static_cast<double>(j.now_ns) / 1e9; }},
      {"commtap_job_collective_instances", "Collective instances compared across ranks.",
       [](const JobHealth& j) { return static_cast<double>(j.instances); }},
      {"commtap_job_messages", "Point-to-point messages joined sender to receiver.",
       [](const JobHealth& j) { return static_cast<double>(j.messages); }},
  };
  for (const PerJob& metric : per_job) {
    e.family(metric.name, metric.help);
    for (const JobHealth& job : run.jobs) e.sample(job_labels(job), metric.value(job));
  }
  e.family("commtap_job_analysis_seconds", "Time commtap analyze took for the job.");
  for (std::size_t i = 0; i < run.jobs.size(); ++i)
    e.sample(job_labels(run.jobs[i]),
             i < run.analysis_seconds.size() ? run.analysis_seconds[i] : 0.0);
  e.family("commtap_analyze_jobs", "Jobs analyzed by the last run.");
  e.sample({}, static_cast<double>(run.jobs.size()));
  e.family("commtap_job_unreadable",
           "1 for each input of the last run that could not be analyzed (why: its stderr).");
  for (const std::string& path : run.unreadable) e.sample({{"path", path}}, 1);
  e.family("commtap_analyze_unreadable_inputs",
           "Inputs of the last run that could not be analyzed (see its stderr).");
  e.sample({}, static_cast<double>(run.unreadable.size()));
  e.family("commtap_analyze_duration_seconds", "Time the last run took.");
  e.sample({}, run.seconds);
  e.family("commtap_analyze_last_run_timestamp_seconds", "When the last run finished (Unix time).");
  e.sample({}, run.finished_unix_s);
  return e.text();
}

}  // namespace commtap::render
