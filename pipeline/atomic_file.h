// Small state files other processes of the job read while it runs (the stream table, stage
// statistics): written whole to a temporary file and renamed, so a reader never sees half of one. And
// such a file (a segment's picture, written that way by ingest) read whole.
#pragma once

#include <sys/types.h>

#include <string>

#include "pipeline/status.h"

namespace vapipe {

Status write_file_atomically(const std::string& path, const std::string& text, mode_t mode);

// The file's bytes; an error naming it and why ("No such file or directory": deleted since).
Result<std::string> read_file_bytes(const std::string& path);

}  // namespace vapipe
