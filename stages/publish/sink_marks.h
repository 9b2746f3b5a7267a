// An archive job's sinks' delivery marks: for each sink, the results file's line up to which it has
// dealt with every message (QueuedSink::settled_through). A restarted job (after a crash, or `vapipe
// run --resume` after a stop) sends each sink the lines after its mark first, so that a message the
// crashed publish held in a sink's queue is not lost: the file is the record, the marks say what each
// receiver has of it. Kept beside the results file (it outlives the run folder), a fresh run deletes it.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "pipeline/status.h"

namespace vapipe {

struct SinkMarks {
  std::string results_file;                  // the results file the lines are of
  std::string run_id;                        // random, made by the run that began the file (webhook keys)
  std::map<std::string, uint64_t> settled;   // by sink name ("publish.webhooks[0] (http://hooks:8080)")
};

// "/data/.results.jsonl.sinks" for "/data/results.jsonl".
std::string sink_marks_path(const std::string& results_file);

// The marks at `path`; none (empty) when there is no such file. An error names the file and why.
Result<SinkMarks> read_sink_marks(const std::string& path);
// Written whole (a temporary file renamed), readable by the job's user only as the results file's
// folder allows.
Status write_sink_marks(const std::string& path, const SinkMarks& marks);
std::string sink_marks_text(const SinkMarks& marks);

// The complete lines of a file (those ending in '\n'); an error names the file.
Result<uint64_t> count_file_lines(const std::string& path);

}  // namespace vapipe
