// A test's piece run in a forked child (under limits or a user the test process should not take on:
// an address-space limit, user nobody), its words brought back to the test.
#pragma once

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <string>

namespace vapipe::testing {

struct ChildOutcome {
  bool ran = false;     // forked, and exited by itself with status 0
  int status = 0;       // waitpid's
  std::string said;     // what `body` returned
};

// Runs `body` in a child process and returns what it said. The child exits at once after (no static
// destructors, no test framework teardown of its own).
inline ChildOutcome said_by_child(const std::function<std::string()>& body) {
  ChildOutcome outcome;
  int to_parent[2];
  if (pipe(to_parent) != 0) return outcome;
  const pid_t child = fork();
  if (child < 0) {
    close(to_parent[0]);
    close(to_parent[1]);
    return outcome;
  }
  if (child == 0) {
    close(to_parent[0]);
    const std::string said = body();
    const bool written = write(to_parent[1], said.data(), said.size()) == static_cast<ssize_t>(said.size());
    _exit(written ? 0 : 3);
  }
  close(to_parent[1]);
  char buf[512];
  for (ssize_t n; (n = read(to_parent[0], buf, sizeof buf)) > 0;) outcome.said.append(buf, static_cast<size_t>(n));
  close(to_parent[0]);
  waitpid(child, &outcome.status, 0);
  outcome.ran = WIFEXITED(outcome.status) && WEXITSTATUS(outcome.status) == 0;
  return outcome;
}

// Becomes user nobody when the test runs as root (who may read anything); false if it could not.
inline bool become_nobody_if_root() { return geteuid() != 0 || (setgid(65534) == 0 && setuid(65534) == 0); }

}  // namespace vapipe::testing
