#include "pipeline/folder_watch.h"

#include <cstdint>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "pipeline/atomic_file.h"
#include "pipeline/envelope.h"
#include "pipeline/logging.h"
#include "pipeline/stream_uri.h"
#include "pipeline/utf8.h"

namespace vapipe {
namespace {

// A look that takes this long is said once: the new files of a folder on a network share listed this
// slowly join the job that much later (the supervisor's own work goes on meanwhile: FolderLooker).
constexpr double kSlowLookS = 1.0;

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}

}  // namespace

std::string folder_watch_status_path(const std::string& run_dir) { return run_dir + "/watched-folders.json"; }

Status write_folder_watch_status(const std::vector<FolderWatchStatus>& status, const std::string& path) {
  nlohmann::json folders = nlohmann::json::array();
  for (const FolderWatchStatus& f : status) {
    folders.push_back({{"where", f.where},
                       {"pattern", f.pattern},
                       {"watch_s", f.watch_s},
                       {"looks", f.looks},
                       {"files_added", f.files_added},
                       {"files_settling", f.files_settling},
                       {"last_look_unix_s", f.last_look_unix_s},
                       {"last_look_s", f.last_look_s},
                       {"last_file_unix_s", f.last_file_unix_s},
                       {"error", f.error},
                       {"looking_since_unix_s", f.looking_since_unix_s}});
  }
  // Paths may hold any byte: replaced, not refused (the log names them exactly).
  return write_file_atomically(path, folders.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), 0600);
}

std::vector<FolderWatchStatus> read_folder_watch_status(const std::string& path) {
  std::vector<FolderWatchStatus> status;
  std::ifstream in(path);
  if (!in) return status;
  try {
    for (const nlohmann::json& f : nlohmann::json::parse(in)) {
      status.push_back(FolderWatchStatus{f.at("where").get<std::string>(), f.at("pattern").get<std::string>(),
                                         f.at("watch_s").get<double>(), f.at("looks").get<uint64_t>(),
                                         f.at("files_added").get<uint64_t>(), f.at("files_settling").get<uint64_t>(),
                                         f.at("last_look_unix_s").get<double>(), f.at("last_look_s").get<double>(),
                                         f.at("last_file_unix_s").get<double>(), f.at("error").get<std::string>(),
                                         f.value("looking_since_unix_s", 0.0)});
    }
  } catch (const nlohmann::json::exception&) {
    status.clear();  // written whole and renamed, so only a file of another version
  }
  return status;
}

FolderWatcher::FolderWatcher(std::vector<FolderWatch> watches, Clock::time_point now) {
  const double start_unix_s = static_cast<double>(wall_clock_ns()) / 1e9;
  for (FolderWatch& w : watches) {
    FolderWatchStatus status;
    status.where = w.where;
    status.pattern = w.pattern;
    status.watch_s = w.watch_s;
    status.last_file_unix_s = start_unix_s;
    Watched watched;
    watched.due = now + seconds(w.watch_s);
    watched.watch = std::move(w);
    watched.status = std::move(status);
    watched_.push_back(std::move(watched));
  }
}

void FolderWatcher::check_unchanged(const FolderWatch& watch, const StreamConfig& stream,
                                    const std::map<std::string, uintmax_t>& bytes_of) {
  auto read = bytes_of.find(stream.uri);
  if (read == bytes_of.end()) return;
  const uintmax_t bytes = read->second;
  const std::string path = file_uri_path(stream.uri);
  auto [seen, first] = size_of_.emplace(stream.uri, bytes);
  if (first || seen->second == bytes || !said_.insert("changed:" + stream.uri).second) return;
  // A file replaced (an NVR's export made again) or still written to after it settled: it is not
  // classified again (a file is a stream once), as --resume says of such a file too.
  VAPIPE_LOG_WARN("{}.glob: {} (stream '{}') has changed since the job took it ({} bytes then, {} now): what it "
                  "holds now is not classified again (a recorder still writing it? a larger settle_s waits for "
                  "it); give it a new name to classify it again", watch.where, escape_invalid_utf8(path), stream.id,
                  seen->second, bytes);
}

void FolderWatcher::look_at(Clock::time_point now) {
  for (Watched& w : watched_) {
    if (w.reading_since) {
      w.again = true;
    } else {
      w.due = std::min(w.due, now);
    }
  }
}

std::vector<FolderWatchStatus> FolderWatcher::status() const {
  std::vector<FolderWatchStatus> out;
  for (const Watched& w : watched_) out.push_back(w.status);
  return out;
}

void FolderWatcher::took(const std::vector<StreamConfig>& files) {
  if (files.empty()) return;
  const double now_unix_s = static_cast<double>(wall_clock_ns()) / 1e9;
  for (const StreamConfig& f : files) {
    auto from = found_in_.find(f.id);
    if (from == found_in_.end()) continue;
    FolderWatchStatus& status = watched_[from->second].status;
    ++status.files_added;
    status.last_file_unix_s = now_unix_s;
  }
  found_in_.clear();
}

FolderWatcher::Clock::time_point FolderWatcher::next_look() const {
  Clock::time_point next = Clock::time_point::max();
  for (const Watched& w : watched_) {
    if (!w.reading_since) next = std::min(next, w.due);
  }
  return next;
}

std::vector<FolderReading> read_folders(const std::vector<FolderWatch>& watches, const std::vector<size_t>& due) {
  std::vector<FolderReading> readings;
  for (size_t k : due) {
    if (k >= watches.size()) continue;
    FolderReading r;
    r.folder = k;
    const auto began = std::chrono::steady_clock::now();
    r.files = glob_files(watches[k]);
    if (r.files.ok()) {
      for (const StreamConfig& s : r.files->streams) {
        std::error_code ec;
        const uintmax_t bytes = std::filesystem::file_size(file_uri_path(s.uri), ec);
        if (!ec) r.bytes_of.emplace(s.uri, bytes);
      }
    }
    r.took_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    readings.push_back(std::move(r));
  }
  return readings;
}

std::vector<size_t> FolderWatcher::start_look(Clock::time_point now) {
  std::vector<size_t> due;
  const double now_unix_s = static_cast<double>(wall_clock_ns()) / 1e9;
  for (size_t k = 0; k < watched_.size(); ++k) {
    Watched& w = watched_[k];
    if (w.reading_since || now < w.due) continue;
    w.reading_since = now;
    w.said_hung = false;
    w.status.looking_since_unix_s = now_unix_s;
    due.push_back(k);
  }
  return due;
}

std::vector<FolderWatch> FolderWatcher::watches() const {
  std::vector<FolderWatch> out;
  for (const Watched& w : watched_) out.push_back(w.watch);
  return out;
}

void FolderWatcher::check_reads(Clock::time_point now) {
  for (Watched& w : watched_) {
    if (!w.reading_since || w.said_hung) continue;
    const double running_s = std::chrono::duration<double>(now - *w.reading_since).count();
    if (running_s < kHungLookS) continue;
    w.said_hung = true;
    VAPIPE_LOG_WARN("{}.glob: looking at '{}' for new files has not ended after {:.0f} s (a network share that does "
                    "not answer?): the job goes on, without new files from it until the look ends",
                    w.watch.where, escape_invalid_utf8(w.watch.pattern), running_s);
  }
}

std::vector<StreamConfig> FolderWatcher::look(const StreamTable& table, const std::set<std::string>& earlier_ids,
                                              Clock::time_point now) {
  const std::vector<size_t> due = start_look(now);
  if (due.empty()) return {};
  return take(read_folders(watches(), due), table, earlier_ids);
}

std::vector<StreamConfig> FolderWatcher::take(std::vector<FolderReading> readings, const StreamTable& table,
                                              const std::set<std::string>& earlier_ids) {
  std::vector<StreamConfig> found;
  found_in_.clear();
  std::map<std::string, std::string> uri_of;  // the table's streams, and the files found in this look
  for (const StreamTableEntry& e : table.entries) uri_of.emplace(e.id, e.uri);
  for (FolderReading& reading : readings) {
    if (reading.folder >= watched_.size()) continue;
    const size_t k = reading.folder;
    Watched& w = watched_[k];
    auto& files = reading.files;
    const double took = reading.took_s;
    ++looks_;
    longest_look_s_ = std::max(longest_look_s_, took);
    ++w.status.looks;
    w.status.last_look_unix_s = static_cast<double>(wall_clock_ns()) / 1e9;
    w.status.last_look_s = took;
    w.status.looking_since_unix_s = 0;
    w.status.error = files.ok() ? std::string() : files.status().message();
    w.status.files_settling = files.ok() ? files->unsettled.size() : 0;
    if (w.said_hung && w.reading_since) {
      VAPIPE_LOG_INFO("{}.glob: the look at '{}' has ended, after {:.0f} s", w.watch.where,
                      escape_invalid_utf8(w.watch.pattern),
                      std::chrono::duration<double>(Clock::now() - *w.reading_since).count());
    }
    w.reading_since.reset();
    w.said_hung = false;
    // The next look counts from this one's end: a slow share is not looked at back to back.
    w.due = w.again ? Clock::now() : Clock::now() + seconds(w.watch.watch_s);
    w.again = false;
    if (took > kSlowLookS && !said_slow_) {
      said_slow_ = true;
      VAPIPE_LOG_WARN("{}.glob: looking at '{}' for new files took {:.1f} s (every {} s, {}.watch_s): the new files "
                      "of a folder that large, or on a share that slow, join the job that much later; a larger "
                      "watch_s, or a pattern of fewer folders (a day's), looks less often or at less", w.watch.where,
                      escape_invalid_utf8(w.watch.pattern), took, w.watch.watch_s, w.watch.where);
    }
    if (!files.ok()) {
      // A folder that is gone (unmounted, renamed) is said once; the job goes on and looks again.
      if (said_.insert(w.watch.pattern).second) {
        VAPIPE_LOG_ERROR("{}.glob: {}: looking again every {} s", w.watch.where, files.status().message(),
                         w.watch.watch_s);
      }
      continue;
    }
    if (said_.erase(w.watch.pattern)) {
      VAPIPE_LOG_INFO("{}.glob: '{}' can be looked at again", w.watch.where, escape_invalid_utf8(w.watch.pattern));
    }
    // (Said once for the same folders; again when they change.)
    if (const std::string unlisted = files->unreadable.empty() ? "" : unlisted_folders_text(files->unreadable);
        !unlisted.empty() && said_.insert(w.watch.pattern + "\n" + unlisted).second) {
      VAPIPE_LOG_WARN("{}.glob: {}", w.watch.where, unlisted);
    }
    for (const auto& [file, why] : files->refused) {
      if (said_.insert(file).second) {
        VAPIPE_LOG_ERROR("{}.glob: {}: {}; left out", w.watch.where, escape_invalid_utf8(file),
                         why.substr(why.find(':') + 2));
      }
    }
    for (StreamConfig& s : files->streams) {
      auto known = uri_of.find(s.id);
      if (known != uri_of.end()) {
        // The same file (a stream since the start, or added by an earlier look), or another file that
        // makes the same id: that one is said once and left out.
        if (known->second != s.uri && said_.insert(s.uri).second) {
          VAPIPE_LOG_ERROR("{}.glob: {} makes the stream id '{}', as {} does (an id keeps only letters, digits, '_', "
                           "'-' and '.'): left out; rename it, or give that folder an entry with an id_prefix of its "
                           "own", w.watch.where, escape_invalid_utf8(file_uri_path(s.uri)), s.id,
                           escape_invalid_utf8(file_uri_path(known->second)));
        }
        if (known->second == s.uri) check_unchanged(w.watch, s, reading.bytes_of);
        continue;
      }
      if (earlier_ids.count(s.id)) {
        // In the results file from an earlier run (it left the folder then, and is back): its results
        // are there already, as --resume would have it.
        if (said_.insert(s.uri).second) {
          VAPIPE_LOG_INFO("{}.glob: {} (stream '{}') has results from an earlier run already: not classified again",
                          w.watch.where, escape_invalid_utf8(file_uri_path(s.uri)), s.id);
        }
        continue;
      }
      uri_of.emplace(s.id, s.uri);
      check_unchanged(w.watch, s, reading.bytes_of);  // its size as it is taken
      found_in_[s.id] = k;
      found.push_back(std::move(s));
    }
  }
  return found;
}

FolderLooker::FolderLooker(std::vector<FolderWatch> watches)
    : reader_([watches = std::move(watches)](const std::vector<size_t>& folders) {
        return read_folders(watches, folders);
      }) {}

bool FolderLooker::start(std::vector<size_t> folders) {
  // The task owns copies of what it reads with, so that it may outlive the looker.
  return task_.start([reader = reader_, folders] { return reader(folders); },
                     [folders](const std::string& what) {
                       // Each folder's look is then an error, looked at again.
                       std::vector<FolderReading> readings;
                       for (size_t k : folders) {
                         FolderReading r;
                         r.folder = k;
                         r.files = Unavailable("cannot look at it: " + what);
                         readings.push_back(std::move(r));
                       }
                       return readings;
                     });
}

StreamReload add_watched_files(StreamTable& table, const std::vector<StreamConfig>& files, size_t lanes) {
  StreamReload change;
  std::vector<size_t> per_lane(std::max<size_t>(lanes, 1), 0);
  for (const StreamTableEntry& e : table.entries) {
    if (!e.removed && e.source.empty() && e.lane < per_lane.size()) ++per_lane[e.lane];
  }
  for (const StreamConfig& s : files) {
    uint32_t lane = 0;
    for (uint32_t l = 1; l < per_lane.size(); ++l) {
      if (per_lane[l] < per_lane[lane]) lane = l;
    }
    ++per_lane[lane];
    table.entries.push_back(table_entry_of(s, static_cast<uint32_t>(table.entries.size()), lane));
    change.added.push_back(s.id);
    change.added_lanes.push_back(lane);
  }
  if (change.changed()) ++table.version;
  return change;
}

size_t add_watched_streams(Config& config, const std::vector<StreamConfig>& files) {
  std::set<std::string> ids;
  for (const StreamConfig& s : config.streams) ids.insert(s.id);
  size_t added = 0;
  for (const StreamConfig& s : files) {
    if (!ids.insert(s.id).second) continue;
    config.streams.push_back(s);
    ++added;
  }
  return added;
}

}  // namespace vapipe
