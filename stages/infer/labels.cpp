#include "stages/infer/labels.h"

#include <fstream>

namespace vapipe {

Result<std::vector<std::string>> load_labels(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("labels file " + path + ": cannot be opened");
  std::vector<std::string> labels;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
    if (line.empty()) {
      // A final newline is fine; an empty line in the middle is not.
      if (in.peek() == EOF) break;
      return InvalidArgument("labels file " + path + ":" + std::to_string(number) + ": empty label");
    }
    labels.push_back(line);
  }
  if (labels.empty()) return InvalidArgument("labels file " + path + " has no labels");
  return labels;
}

}  // namespace vapipe
