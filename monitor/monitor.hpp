// monitor: what commtap records about a rank and how it reaches the trace database. One header
// per topic; this one includes them all:
//   monitor/clock.hpp          the clock and offsets between ranks' clocks
//   monitor/call_counters.hpp  per-thread statistics, activity, record rings (the hot path)
//   monitor/call_sites.hpp     where the application called
//   monitor/sampling.hpp       which instances are recorded
//   monitor/trace_writer.hpp   rank facts, window snapshots and the writer thread
//   monitor/trace_budget.hpp   the bound on a trace's bytes per hour (thinning, merging)
//   monitor/shared_fs.hpp      shared filesystems and the snapshot layout's local copies
//   monitor/trace_schema.hpp   the schema and the row types readers share (a leaf)
#pragma once

#include "monitor/call_counters.hpp"
#include "monitor/call_sites.hpp"
#include "monitor/clock.hpp"
#include "monitor/sampling.hpp"
#include "monitor/shared_fs.hpp"
#include "monitor/trace_budget.hpp"
#include "monitor/trace_schema.hpp"
#include "monitor/trace_writer.hpp"
