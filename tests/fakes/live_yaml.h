// A live job's config text for tests of reloads: streams of endless test patterns.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace vapipe::testing {

// A live job's config text with these streams (id, test pattern), and `extra` appended.
inline std::string live_yaml(const std::vector<std::pair<std::string, std::string>>& streams,
                             const std::string& extra = "") {
  std::string yaml = "job: {mode: live}\nstreams:\n";
  for (const auto& [id, pattern] : streams) {
    yaml += "  - {id: " + id + ", uri: \"test://" + pattern + "?frames=0&live=true\"}\n";
  }
  return yaml + "infer: {model: m.pt, labels: m.txt}\n" + extra;
}

}  // namespace vapipe::testing
