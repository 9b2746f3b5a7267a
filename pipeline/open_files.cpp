#include "pipeline/open_files.h"

#include <cstdint>
#include <sys/resource.h>

#include <algorithm>

namespace vapipe {
namespace {

constexpr uint64_t kHighestSoftLimit = 1u << 20;

uint64_t as_count(rlim_t v) { return v == RLIM_INFINITY ? UINT64_MAX : static_cast<uint64_t>(v); }

}  // namespace

OpenFileLimit open_file_limit() {
  OpenFileLimit out;
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return out;
  out.soft = out.before = as_count(rl.rlim_cur);
  out.hard = as_count(rl.rlim_max);
  return out;
}

OpenFileLimit raise_open_file_limit() {
  OpenFileLimit out = open_file_limit();
  const uint64_t target = std::min(out.hard, kHighestSoftLimit);
  if (out.soft >= target) return out;
  rlimit rl{};
  rl.rlim_cur = static_cast<rlim_t>(target);
  rl.rlim_max = out.hard == UINT64_MAX ? RLIM_INFINITY : static_cast<rlim_t>(out.hard);
  if (setrlimit(RLIMIT_NOFILE, &rl) == 0) out.soft = target;
  return out;
}

uint64_t open_files_needed(size_t network_streams, size_t other_streams) {
  return kOpenFilesPerProcess + kOpenFilesPerNetworkStream * network_streams + kOpenFilesPerOtherStream * other_streams;
}

std::string open_file_shortfall(uint64_t needed, const OpenFileLimit& limit, const std::string& what) {
  if (limit.soft == 0 || needed <= limit.soft) return "";
  return what + " need about " + std::to_string(needed) + " open files, but this process may have " +
         std::to_string(limit.soft) + " (RLIMIT_NOFILE, hard limit " +
         (limit.hard == UINT64_MAX ? std::string("unlimited") : std::to_string(limit.hard)) +
         "): streams past that fail to start, or the lane crashes; raise the limit before `vapipe run` "
         "(`ulimit -Hn " + std::to_string(needed) + "` as root, LimitNOFILE= in a systemd unit, `--ulimit nofile=" +
         std::to_string(needed) + "` for docker), or spread the streams over more lanes (lanes_per_device)";
}

}  // namespace vapipe
