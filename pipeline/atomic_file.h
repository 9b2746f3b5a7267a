// Small state files other processes of the job read while it runs (the stream table, stage
// statistics): written whole to a temporary file and renamed, so a reader never sees half of one.
#pragma once

#include <sys/types.h>

#include <string>

#include "pipeline/status.h"

namespace vapipe {

Status write_file_atomically(const std::string& path, const std::string& text, mode_t mode);

}  // namespace vapipe
