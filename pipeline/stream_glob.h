// Streams from a file pattern: an archive of hundreds of files is one `glob:` entry in `streams`
// instead of hundreds of entries.
#pragma once

#include <string>
#include <vector>

#include "pipeline/status.h"

namespace vapipe {

// Regular files whose path matches `pattern` (absolute): `*`, `?` and `[...]` match within one path
// component, `**` any number of folders (none included). Sorted, so that a job's streams, and their
// order, are the same each time the config loads. As in a shell, a file or folder whose name starts
// with '.' is matched only by a pattern that names a '.'-component itself ("._clip.mp4", the
// metadata a Mac leaves beside each file it copies, is not a video; nor is ".Trash/"); `hidden`, if
// given, is set to how many such files the pattern would otherwise have matched. Folders linked to are
// followed (each folder once). Folders under the pattern's base that cannot be listed are added to
// `unreadable`, if given, with why ("/a/day2 (Permission denied)"); the base itself is an error.
Result<std::vector<std::string>> expand_file_glob(const std::string& pattern, size_t* hidden = nullptr,
                                                  std::vector<std::string>* unreadable = nullptr);

// The folder a pattern's wildcards start under (its leading components without a wildcard).
std::string glob_base_dir(const std::string& pattern);

// A stream id for a file a glob found: `prefix` and the file's path under `base_dir` without its
// extension, each character outside A-Z a-z 0-9 _ - . as '-' (folders too: "2026/cam1.mp4" ->
// "2026-cam1"). Longer than 64 characters: the end of it, after an 8-digit hash of the whole.
std::string stream_id_for_file(const std::string& base_dir, const std::string& file, const std::string& prefix);

}  // namespace vapipe
