// "Has this file changed since it was read?" for the files a running job re-reads (the metrics TLS
// certificate and key, the metrics token, the CURVE subscriber keys): where it is (device and inode:
// a Kubernetes Secret swaps a symlink to a new folder), its size, and its modification and change
// times to the nanosecond (an in-place rewrite within the same second). stat(2) follows symlinks.
#pragma once

#include <string>

namespace vapipe {

// Equal strings: the same file, unchanged as far as stat(2) can tell. A file that cannot be
// stat'ed has an identity that says why ("missing 2"), so that it reappearing is a change too.
std::string file_identity(const std::string& path);

}  // namespace vapipe
