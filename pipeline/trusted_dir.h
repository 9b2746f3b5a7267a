// The job's run folder (/tmp/vapipe-<job id>) holds its sockets, its stream table and its config's
// copy, which the stages and `vapipe reload` trust: in a folder every user may write (/tmp), one that
// another user made first, or swapped, would hand them that user's files (a stream added, a process
// signalled; found 2026-12-07). So it is this user's, which no other user may write, and is checked to
// be before it is used. (Others may still look in: `vapipe status` of another user says what it cannot
// read, its stream table being 0600.)
#pragma once

#include <string>

#include "pipeline/status.h"

namespace vapipe {

// Makes `path` a folder of this user that no other may write, or checks the one there: a folder, not a
// link, owned by this user; one of this user's that others may write loses their write permission. An
// error, naming `what` and the folder and its owner, for another's or a link.
Status make_trusted_dir(const std::string& path, const std::string& what);

// "" when `path` (not followed if a link) is this user's and no other user may write it; else why not,
// as "... is owned by uid 65534" or "... may be written by other users".
std::string not_this_users_own(const std::string& path);

}  // namespace vapipe
