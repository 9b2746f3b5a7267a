// publish.jsonl_path named by the time: "results-%Y-%m-%d.jsonl" writes a live job's results into one
// file a day (or an hour: "%Y%m%d-%H"), as its local clock turns, so that a camera job that runs for
// months keeps files an operator can archive or delete by date, none written to after its period.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/status.h"

namespace vapipe {

// Whether the path holds strftime conversions ('%' followed by a letter; "%%" is a literal '%').
bool results_path_is_timed(const std::string& path);

// The path's conversions checked: those that name a date or time (Y y m d e j H I M p U W V G g u w F
// T R a A b B h), nothing that changes faster than a minute (S s) or says nothing of the date (n t c x
// X z Z...), and at least one. OK, or what is wrong.
Status check_timed_results_path(const std::string& path);

// The file a timed path names at `unix_s`, in this machine's local time (TZ).
std::string results_file_at(const std::string& path, int64_t unix_s);

// What the job's lock (pipeline/file_lock.h) is taken on for a timed path: a hidden file in the
// folder of its first conversion, named after the pattern (".results-%Y-%m-%d.jsonl.lock" with each
// '%' and '/' made '_'). A path without conversions: the path itself.
std::string results_lock_path(const std::string& path);

// The files a timed path has named that exist, oldest first: every file below the folder of its first
// conversion whose path the pattern reads whole (strptime) and names again from the time it reads
// (strftime): a file the job did not name, or named otherwise ("2026-12-1"), is never among them.
struct TimedResultsFile {
  int64_t unix_s;  // the start of its period, local time
  std::string path;
};
std::vector<TimedResultsFile> timed_results_files(const std::string& path);

}  // namespace vapipe
