// "Has this file changed since it was read?" for the files a running job re-reads (the metrics TLS
// certificate and key, the metrics token, the CURVE subscriber keys): where it is (device and inode:
// a Kubernetes Secret swaps a symlink to a new folder), its size, and its modification and change
// times to the nanosecond (an in-place rewrite within the same second). stat(2) follows symlinks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace vapipe {

// Equal strings: the same file, unchanged as far as stat(2) can tell. A file that cannot be
// stat'ed has an identity that says why ("missing 2"), so that it reappearing is a change too.
std::string file_identity(const std::string& path);

// "Is this still the recording that was read?" for an archive's video files (--resume, `vapipe
// segments`): a hash of their first kFileHeadBytes bytes (FNV-1a, 64 bits, as 16 hex digits), which a
// file appended to keeps and another recording put under its name does not (its container's header and
// first frames differ). "" when it cannot be read. A file compared with its hash from when it held
// fewer bytes than that is hashed over as many (head_bytes_then: min(its size then, kFileHeadBytes)).
inline constexpr size_t kFileHeadBytes = 64 * 1024;
std::string file_head_hash(const std::string& path, size_t max_bytes = kFileHeadBytes);
size_t head_bytes_then(int64_t file_bytes_then);

}  // namespace vapipe
