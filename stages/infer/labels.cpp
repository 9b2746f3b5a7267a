#include "stages/infer/labels.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <tuple>

#include "pipeline/utf8.h"

namespace vapipe {

Result<std::vector<std::string>> load_labels(const std::string& path) {
  // (a folder opens as a stream that reads nothing)
  if (std::error_code ec; std::filesystem::is_directory(path, ec)) {
    return NotFound("labels file " + path + ": cannot be opened (it is a folder)");
  }
  std::ifstream in(path);
  if (!in) {
    const int why = errno;  // (what open(2) said: no such file, permission denied)
    return NotFound("labels file " + path + ": cannot be opened" + (why ? std::string(" (") + std::strerror(why) + ")" : ""));
  }
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

Status check_labels_the_config_names(const Config& config, const std::vector<std::string>& labels) {
  // (line, key, label) of each label the config names.
  std::vector<std::tuple<int, std::string, std::string>> named;
  for (const auto& [label, by_label] : config.publish.segments_min_score_by_label) {
    named.emplace_back(by_label.line, "publish.segments_min_score_by_label", label);
  }
  for (size_t i = 0; i < config.publish.webhooks.size(); ++i) {
    for (const std::string& label : config.publish.webhooks[i].labels) {
      named.emplace_back(config.publish.webhooks[i].labels_line, "publish.webhooks[" + std::to_string(i) + "].labels",
                         label);
    }
  }
  for (size_t i = 0; i < config.publish.mqtt.size(); ++i) {
    for (const std::string& label : config.publish.mqtt[i].labels) {
      named.emplace_back(config.publish.mqtt[i].labels_line, "publish.mqtt[" + std::to_string(i) + "].labels", label);
    }
  }
  for (const auto& [line, key, label] : named) {
    if (std::find(labels.begin(), labels.end(), label) != labels.end()) continue;
    std::string some;  // the first few, to show how its labels are spelled
    for (size_t i = 0; i < labels.size() && i < 8; ++i) some += (i ? ", " : "") + labels[i];
    if (labels.size() > 8) some += ", ...";
    return InvalidArgument(config.source + ":" + std::to_string(line) + ": " + key + ": '" + label +
                           "' is not a label of " + config.infer.labels + " (its " + std::to_string(labels.size()) +
                           " labels: " + some + ")");
  }
  return Status::Ok();
}

}  // namespace vapipe
