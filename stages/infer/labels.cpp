#include "stages/infer/labels.h"

#include <fstream>

#include "pipeline/utf8.h"

namespace vapipe {

Result<std::vector<std::string>> load_labels(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("labels file " + path + ": cannot be opened");
  std::vector<std::string> labels;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    // A byte order mark, as Windows editors write at the start of a UTF-8 file: not part of the label.
    if (number == 1 && line.compare(0, 3, "\xEF\xBB\xBF") == 0) line.erase(0, 3);
    // Labels go into every result's JSON, which must be UTF-8: a file in Latin-1 or a Windows code page
    // would fail each result it names, so it is refused here.
    if (const size_t bad = first_invalid_utf8(line); bad != std::string::npos) {
      return InvalidArgument("labels file " + path + ":" + std::to_string(number) + ": " +
                             not_utf8_text(static_cast<unsigned char>(line[bad]), bad + 1));
    }
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
