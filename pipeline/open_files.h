// Open files (file descriptors) of a vapipe process. GStreamer holds about 20 for each RTSP camera (its
// RTP and RTCP sockets, the sockets and wake-up descriptors of its polls) and about 9 for each file
// being read, so an ingest lane of 64 cameras needs some 1,300: past the 1,024 a shell or a systemd
// service allows by default (the soft limit). Past its limit GStreamer aborts the whole process. Any
// process may raise its soft limit up to its hard limit, which is large almost everywhere (Debian:
// 524,288 for services, 1,048,576 in a login session or a container), so vapipe does at start.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace vapipe {

struct OpenFileLimit {
  uint64_t soft = 0;    // in force
  uint64_t hard = 0;    // the most it may be raised to without privilege
  uint64_t before = 0;  // the soft limit before raise_open_file_limit()
};

// Raises the soft RLIMIT_NOFILE to the hard limit (at most 1,048,576: the kernel's usual nr_open).
OpenFileLimit raise_open_file_limit();
OpenFileLimit open_file_limit();

// Descriptors an ingest lane needs, measured (docs/benchmarks.md, "Many streams in one lane") with some
// room: per network stream (a camera), per other stream (a file, a test source), and for the process.
inline constexpr uint64_t kOpenFilesPerNetworkStream = 24;
inline constexpr uint64_t kOpenFilesPerOtherStream = 12;
inline constexpr uint64_t kOpenFilesPerProcess = 64;
uint64_t open_files_needed(size_t network_streams, size_t other_streams);

// "" when `limit` has room for `needed`; otherwise what to do, for a log line: "N open files are
// needed ..., but this process may have M (RLIMIT_NOFILE) ...: raise it ...".
std::string open_file_shortfall(uint64_t needed, const OpenFileLimit& limit, const std::string& what);

}  // namespace vapipe
