#include "stages/publish/sink_marks.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/atomic_file.h"

namespace vapipe {

std::string sink_marks_path(const std::string& results_file) {
  const std::filesystem::path p(results_file);
  const std::string name = "." + p.filename().string() + ".sinks";
  return p.has_parent_path() ? (p.parent_path() / name).string() : name;
}

Result<SinkMarks> read_sink_marks(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return SinkMarks{};
  auto text = read_file_bytes(path);
  if (!text.ok()) return text.status();
  SinkMarks marks;
  try {
    const nlohmann::json j = nlohmann::json::parse(*text);
    marks.results_file = j.value("results_file", "");
    marks.run_id = j.value("run_id", "");
    for (const auto& [name, line] : j.at("settled").items()) marks.settled[name] = line.get<uint64_t>();
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(path + ": not a file of sinks' delivery marks (" + e.what() + ")");
  }
  return marks;
}

std::string sink_marks_text(const SinkMarks& marks) {
  nlohmann::json settled = nlohmann::json::object();
  for (const auto& [name, line] : marks.settled) settled[name] = line;
  return nlohmann::json{{"results_file", marks.results_file}, {"run_id", marks.run_id}, {"settled", settled}}.dump() +
         "\n";
}

Status write_sink_marks(const std::string& path, const SinkMarks& marks) {
  return write_file_atomically(path, sink_marks_text(marks), 0644);
}

Result<uint64_t> count_file_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(path + ": " + std::strerror(errno));
  std::vector<char> block(1 << 20);
  uint64_t lines = 0;
  while (in) {
    in.read(block.data(), static_cast<std::streamsize>(block.size()));
    lines += static_cast<uint64_t>(std::count(block.data(), block.data() + in.gcount(), '\n'));
  }
  if (in.bad()) return Unavailable(path + ": cannot be read");
  return lines;
}

}  // namespace vapipe
