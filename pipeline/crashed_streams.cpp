#include "pipeline/crashed_streams.h"

#include <sstream>

#include "pipeline/atomic_file.h"

namespace vapipe {

void StreamsBeingRead::add(const std::string& id) {
  if (path_.empty()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  ids_.insert(id);
  write_locked();
}

void StreamsBeingRead::remove(const std::string& id) {
  if (path_.empty()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = ids_.find(id);
  if (it == ids_.end()) return;
  ids_.erase(it);
  write_locked();
}

void StreamsBeingRead::write_locked() {
  std::string text;
  for (const std::string& id : ids_) text += id + "\n";
  (void)write_file_atomically(path_, text, 0644);  // (a run folder that is gone: nothing to tell)
}

std::string streams_being_read_path(const JobLayout& layout) {
  return layout.run_dir + "/reading-" + std::to_string(layout.lane);
}

std::vector<std::string> streams_being_read(const JobLayout& layout) {
  std::vector<std::string> ids;
  auto text = read_file_bytes(streams_being_read_path(layout));
  if (!text.ok()) return ids;
  std::istringstream in(*text);
  std::set<std::string> seen;
  for (std::string id; std::getline(in, id);) {
    if (!id.empty() && seen.insert(id).second) ids.push_back(id);
  }
  return ids;
}

std::string crashed_streams_path(const JobLayout& layout) { return layout.run_dir + "/crashed-streams"; }

std::map<std::string, std::string> crashed_streams(const JobLayout& layout) {
  std::map<std::string, std::string> crashed;
  auto text = read_file_bytes(crashed_streams_path(layout));
  if (!text.ok()) return crashed;
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) {
    const size_t tab = line.find('\t');
    if (tab != std::string::npos && tab > 0) crashed[line.substr(0, tab)] = line.substr(tab + 1);
  }
  return crashed;
}

Status add_crashed_stream(const JobLayout& layout, const std::string& id, const std::string& why) {
  std::map<std::string, std::string> crashed = crashed_streams(layout);
  crashed[id] = why;
  std::string text;
  for (const auto& [stream, reason] : crashed) text += stream + "\t" + reason + "\n";
  return write_file_atomically(crashed_streams_path(layout), text, 0644);
}

std::string one_at_a_time_mark(const JobLayout& layout) { return layout.run_dir + "/one-stream-at-a-time"; }

std::string crashed_stream_message(const std::string& why) {
  return "ingest crashed while reading it (" + why + "): GStreamer's decoder (or demuxer) fails on this file; it is "
         "left out so that the job's other streams go on (`gst-launch-1.0 uridecodebin uri=file://... ! fakesink` "
         "shows the crash; convert the file, e.g. with ffmpeg, to classify it)";
}

}  // namespace vapipe
