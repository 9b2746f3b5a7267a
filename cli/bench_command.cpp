#include <cstdio>

#include "cli/commands.h"

namespace vapipe::cli {
int bench_command(const std::vector<std::string>&) {
  std::fprintf(stderr, "bench: TODO\n");
  return 1;
}
}  // namespace vapipe::cli
