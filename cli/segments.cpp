#include "cli/segments.h"

#include <cstdint>
#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "pipeline/config.h"
#include "pipeline/json_fields.h"

namespace vapipe::cli {

namespace {

// How a reload's changed event begins (ingest's say_retune); a looping file's read again says "looped:".
constexpr const char* kReloadChangedPrefix = "a reload changed its ";

void say_unmatched(const SegmentOptions& options, const std::string& text) {
  if (options.unmatched) {
    options.unmatched(text);
  } else if (options.note) {
    options.note(text);
  }
}

// One result as segments read it.
struct FrameFacts {
  uint64_t seq = 0;
  double pts = -1, capture_ms = -1, camera_ms = -1;
  std::vector<std::pair<std::string, double>> labels;  // those on the frame, with their scores
  bool damaged = false;  // its result's "damaged": decoded after a lost packet, maybe smeared
};

// Whether a frame (`damaged`, `score`) stands for its segment better than its best so far: a whole
// picture before a damaged one, then the higher score (the first of equals).
bool better_best(bool damaged, double score, bool best_damaged, double best_score) {
  return (best_damaged && !damaged) || (damaged == best_damaged && score > best_score);
}

// A --join's files' frames, held until every input has been read: a day of a camera is a million of
// them, so each is kept small (labels by number, in one list per file).
struct HeldFrames {
  struct Frame {
    uint64_t seq;
    double pts, capture_ms, camera_ms;
    uint32_t first_label;  // its labels are labels[first_label, next frame's first_label)
    bool damaged;
  };
  std::vector<Frame> frames;
  std::vector<std::pair<uint32_t, double>> labels;  // (label number, score)

  void add(const FrameFacts& f, std::map<std::string, uint32_t>& label_numbers, std::vector<std::string>& names) {
    frames.push_back({f.seq, f.pts, f.capture_ms, f.camera_ms, static_cast<uint32_t>(labels.size()), f.damaged});
    for (const auto& [label, score] : f.labels) {
      auto [it, added] = label_numbers.emplace(label, static_cast<uint32_t>(names.size()));
      if (added) names.push_back(label);
      labels.emplace_back(it->second, score);
    }
  }
  FrameFacts at(size_t i, const std::vector<std::string>& names) const {
    const Frame& h = frames[i];
    FrameFacts f{h.seq, h.pts, h.capture_ms, h.camera_ms, {}, h.damaged};
    const size_t end = i + 1 < frames.size() ? frames[i + 1].first_label : labels.size();
    for (size_t l = h.first_label; l < end; ++l) f.labels.emplace_back(names[labels[l].first], labels[l].second);
    return f;
  }
};

}  // namespace

Result<std::vector<Segment>> read_segments(std::istream& in, const std::string& name, const SegmentOptions& options,
                                           uint64_t* incomplete_lines) {
  std::vector<Segment> done;
  VAPIPE_RETURN_IF_ERROR(
      for_each_segment(in, name, options, [&](const Segment& s) { done.push_back(s); }, incomplete_lines));
  return done;
}

Status for_each_segment(std::istream& in, const std::string& name, const SegmentOptions& options,
                        const std::function<void(const Segment&)>& on_segment, uint64_t* incomplete_lines) {
  return for_each_segment({SegmentInput{&in, name}}, options, on_segment, incomplete_lines);
}

Status for_each_segment(const std::vector<SegmentInput>& inputs, const SegmentOptions& options,
                        const std::function<void(const Segment&)>& on_segment, uint64_t* incomplete_lines) {
  // By stream, by label: the segments its last result belongs to (one at most unless each_label).
  std::map<std::string, std::map<std::string, Segment>> open;
  // bridge: by stream (each_label: by stream and label), the last long run, until the next one.
  std::map<std::string, Segment> held;
  // By stream: its uri, as its latest event said, and its roi and turn, as its latest started (or
  // changed) event said.
  struct StreamView {
    std::string uri;
    int64_t bytes = -1;  // its file's, as its started event says
    std::string head;    // and its beginning's hash
    bool media_times = false;  // its started event has no edit_list_ms: its pts_ms are media times
    std::array<double, 4> roi{0, 0, 1, 1};
    std::string turn;
  };
  std::map<std::string, StreamView> views;
  std::set<std::string> seen_streams, seen_labels;  // with options.note: what the results have
  // By stream: the pictures its live job took as segments began (label, the segment's first seq, path).
  struct LivePicture {
    std::string label;
    uint64_t start_seq = 0;
    std::string path;
  };
  std::map<std::string, std::vector<LivePicture>> live_pictures;
  auto take_picture = [&](const std::string& topic, const nlohmann::json& g) {
    if (text_field(g, "event") == "picture" && g.contains("picture") && g["picture"].is_string() &&
        g.contains("label") && g["label"].is_string() && g.contains("start_seq") && g["start_seq"].is_number_unsigned()) {
      live_pictures[topic.substr(9)].push_back(
          {g["label"].get<std::string>(), g["start_seq"].get<uint64_t>(), g["picture"].get<std::string>()});
    }
  };
  std::map<std::string, double> timeline_restarts;  // by stream: its eos event's timeline_restart_ms
  auto take_restart = [&](const nlohmann::json& e) {
    if (text_field(e, "event") == "eos" && e.contains("timeline_restart_ms") && e["timeline_restart_ms"].is_number() &&
        e.contains("stream_id") && e["stream_id"].is_string()) {
      const double at = e["timeline_restart_ms"].get<double>();
      auto [it, added] = timeline_restarts.emplace(e["stream_id"].get<std::string>(), at);
      if (!added) it->second = std::min(it->second, at);
    }
  };
  if (options.read_events_first) {
    for (const auto& [stream, name] : inputs) {
      const std::streampos start = stream->tellg();
      if (start == std::streampos(-1)) continue;  // a pipe: its pictures are taken as they come
      std::string line;
      while (std::getline(*stream, line)) {
        if (line.find("\"timeline_restart_ms\":") != std::string::npos &&
            line.find("\"timeline_restart_ms\":null") == std::string::npos) {
          const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
          if (j.is_object() && j.contains("payload") && j["payload"].is_object()) take_restart(j["payload"]);
          continue;
        }
        if (line.find("\"picture\"") == std::string::npos || line.find("\"segments/") == std::string::npos) continue;
        const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (j.is_object() && j.contains("topic") && j["topic"].is_string() && j.contains("payload") &&
            j["topic"].get<std::string>().rfind("segments/", 0) == 0) {
          take_picture(j["topic"].get<std::string>(), j["payload"]);
        }
      }
      stream->clear();
      stream->seekg(start);
    }
  }
  auto restart_of = [&](const std::string& stream_id) {
    auto it = timeline_restarts.find(stream_id);
    return it == timeline_restarts.end() ? -1.0 : it->second;
  };
  auto emit = [&](const Segment& found) {
    if (!options.labels.empty() && !options.labels.count(found.label)) return;
    Segment s = found;
    s.timeline_restart_ms = restart_of(s.start_stream.empty() ? s.stream_id : s.start_stream);
    s.best_timeline_restart_ms = restart_of(s.best_stream.empty() ? s.stream_id : s.best_stream);
    auto it = live_pictures.find(s.stream_id);
    if (it == live_pictures.end()) return on_segment(s);
    Segment with = s;
    for (const LivePicture& p : it->second) {
      if (p.label == s.label && p.start_seq >= s.start_seq && p.start_seq <= s.end_seq) {
        with.live_picture = p.path;  // the first: a bridged segment's own beginning
        break;
      }
    }
    on_segment(with);
  };
  auto close = [&](Segment& s) {
    if (!options.bridge) {
      if (s.frames >= options.min_frames) emit(s);
    } else {
      Segment& h = held[options.each_label ? s.stream_id + '\n' + s.label : s.stream_id];
      // What came between the two runs, in frames (seq counts every frame: results, errors, drops).
      if (h.frames > 0 && h.label == s.label && s.start_pos - h.end_pos - 1 < options.min_frames) {
        h.end_ms = s.end_ms;  // a continuation, however short
        h.end_seq = s.end_seq;
        h.end_pos = s.end_pos;
        h.end_stream = s.end_stream;
        h.end_capture_ms = s.end_capture_ms;
        h.end_camera_ms = s.end_camera_ms;
        h.frames += s.frames;
        h.score_sum += s.score_sum;
        h.damaged_frames += s.damaged_frames;
        h.reconnections = s.reconnects_before + s.reconnections - h.reconnects_before;
        if (better_best(s.best_damaged, s.best_score, h.best_damaged, h.best_score)) {
          h.best_seq = s.best_seq;
          h.best_ms = s.best_ms;
          h.best_score = s.best_score;
          h.best_damaged = s.best_damaged;
          h.best_capture_ms = s.best_capture_ms;
          h.best_stream = s.best_stream;
          h.best_uri = s.best_uri;
          h.best_file_bytes = s.best_file_bytes;
          h.best_file_head = s.best_file_head;
          h.best_pts_media_times = s.best_pts_media_times;
        }
      } else if (s.frames >= options.min_frames) {
        if (h.frames > 0) emit(h);
        h = s;
      }  // else: a flicker, left out
    }
    s = Segment{};
  };
  // A frame of stream `id`, at `pos` among its frames (its seq; a join's place across its files), from
  // the join member `member` ("" when not joined).
  // Per stream: its camera's lost connections that its segments went on across (--reconnect-grace).
  std::map<std::string, uint64_t> reconnects_within_grace;
  auto add_frame = [&](const std::string& id, const std::string& member, uint64_t pos, const FrameFacts& f) {
    std::map<std::string, Segment>& stream_open = open[id];
    for (auto it = stream_open.begin(); it != stream_open.end();) {  // a label gone, or a frame missing
      const bool still_on = std::any_of(f.labels.begin(), f.labels.end(),
                                        [&](const auto& l) { return l.first == it->first; });
      if (still_on && pos == it->second.end_pos + 1) {
        ++it;
      } else {
        close(it->second);
        it = stream_open.erase(it);
      }
    }
    const StreamView* view = nullptr;
    if (auto v = views.find(member.empty() ? id : member); v != views.end()) view = &v->second;
    for (const auto& [label, score] : f.labels) {
      Segment& s = stream_open[label];
      if (s.frames == 0) {
        s.stream_id = id;
        s.label = label;
        if (view) {
          s.uri = view->uri;
          s.file_bytes = view->bytes;
          s.file_head = view->head;
          s.pts_media_times = view->media_times;
          s.roi = view->roi;
          s.turn = view->turn;
        }
        s.start_ms = f.pts;
        s.start_seq = f.seq;
        s.start_pos = pos;
        s.start_stream = member;
        s.start_capture_ms = f.capture_ms;
        s.start_camera_ms = f.camera_ms;
        s.reconnects_before = reconnects_within_grace[id];
      }
      s.reconnections = reconnects_within_grace[id] - s.reconnects_before;
      s.end_ms = f.pts;
      s.end_seq = f.seq;
      s.end_pos = pos;
      s.end_stream = member;
      s.end_capture_ms = f.capture_ms;
      s.end_camera_ms = f.camera_ms;
      if (s.frames == 0 || better_best(f.damaged, score, s.best_damaged, s.best_score)) {
        s.best_seq = f.seq;
        s.best_ms = f.pts;
        s.best_score = score;
        s.best_damaged = f.damaged;
        s.best_capture_ms = f.capture_ms;
        s.best_stream = member;
        s.best_uri = member.empty() || !view ? std::string() : view->uri;
        s.best_file_bytes = member.empty() || !view ? -1 : view->bytes;
        s.best_file_head = member.empty() || !view ? std::string() : view->head;
        s.best_pts_media_times = !member.empty() && view && view->media_times;
      }
      ++s.frames;
      s.score_sum += score;
      if (f.damaged) ++s.damaged_frames;
    }
  };
  // --join: which join a stream is a file of (nullptr: none), found once per stream.
  std::set<std::string> join_names;
  for (const JoinedStreams& j : options.joins) join_names.insert(j.name);
  std::map<std::string, const JoinedStreams*> join_by_stream;
  auto join_of = [&](const std::string& id) -> const JoinedStreams* {
    if (options.joins.empty()) return nullptr;
    auto [it, added] = join_by_stream.emplace(id, nullptr);
    if (added) {
      for (const JoinedStreams& j : options.joins) {
        if (fnmatch(j.pattern.c_str(), id.c_str(), 0) == 0) {
          it->second = &j;
          break;
        }
      }
    }
    return it->second;
  };
  // A stream's open and bridged segments end now (not joins: their files are put in order later).
  auto end_segments_of = [&](const std::string& stream_id) {
    if (auto o = open.find(stream_id); o != open.end()) {
      for (auto& [label, seg] : o->second) close(seg);
      open.erase(o);
    }
    for (auto h = held.begin(); h != held.end();) {
      if (h->first != stream_id && h->first.rfind(stream_id + '\n', 0) != 0) {
        ++h;
        continue;
      }
      if (h->second.frames > 0) emit(h->second);
      h = held.erase(h);
    }
  };
  std::set<std::string> lane_restarted;     // streams whose lane restarted, until their next frame
  std::map<std::string, double> lost_at;    // reconnect_grace_s: streams lost, when, until their next frame
  std::map<std::string, double> last_pts;  // each stream's latest frame's pts_ms (not joins')
  // By join, by file (stream): its frames, in their order, until every input has been read.
  std::map<std::string, std::map<std::string, HeldFrames>> joined_frames;
  std::map<std::string, uint32_t> label_numbers;  // their labels, by number
  std::vector<std::string> label_names;
  for (const auto& [stream, name] : inputs) {
    std::istream& in = *stream;
    std::string line;
    uint64_t number = 0;
    while (std::getline(in, line)) {
      ++number;
      const bool complete = !in.eof();  // getline stopped at a newline
      if (line.empty()) continue;
      nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded() || !j.is_object() || !j.contains("topic") || !j["topic"].is_string() ||
          !j.contains("payload") || !j["payload"].is_object()) {
        if (!complete) {
          if (incomplete_lines) ++*incomplete_lines;
          break;
        }
        return InvalidArgument(name + ":" + std::to_string(number) +
                               ": not a line of a vapipe results file ({\"topic\": ..., \"payload\": ...}; from `vapipe "
                               "sub`, give it --with-topic)");
      }
      const std::string topic = j["topic"].get<std::string>();
      if (topic.rfind("events/", 0) == 0) {
        const nlohmann::json& e = j["payload"];
        const std::string stream_id = topic.substr(7);
        StreamView& view = views[stream_id];
        const StreamView before = view;  // (a changed event of the sampling only leaves segments open)
        if (e.contains("uri") && e["uri"].is_string()) view.uri = e["uri"].get<std::string>();
        take_restart(e);  // (again if read first; from a pipe, for the segments that end with the stream)
        // A reload's changed event says them again, for the frames after it.
        if (text_field(e, "event") == "started") {
          view.bytes = e.contains("bytes") && e["bytes"].is_number_integer() ? e["bytes"].get<int64_t>() : -1;
          view.head = text_field(e, "head_hash");
          view.media_times = view.bytes >= 0 && !e.contains("edit_list_ms");
        }
        if (const std::string event = text_field(e, "event"); event == "started" || event == "changed") {
          view.roi = {0, 0, 1, 1};
          const nlohmann::json* roi = e.contains("roi") ? &e["roi"] : nullptr;
          if (roi && roi->is_array() && roi->size() == 4 &&
              std::all_of(roi->begin(), roi->end(), [](const nlohmann::json& v) { return v.is_number(); })) {
            for (size_t i = 0; i < 4; ++i) view.roi[i] = (*roi)[i].get<double>();
          }
          view.turn = e.contains("turn") && e["turn"].is_string() ? e["turn"].get<std::string>() : "";
          // Another camera, region or turn from here on: no segment runs across the change, nor is one
          // bridged over it (as publish's live segments end there); a change of the sampling only
          // (max_fps, keyframes_only) leaves them open, as publish does since 2026-12-07.
          const bool reframed = text_field(e, "message").rfind(kReloadChangedPrefix, 0) != 0 || before.uri.empty() ||
                                before.uri != view.uri || before.roi != view.roi || before.turn != view.turn;
          if (event == "changed" && reframed && !join_of(stream_id)) end_segments_of(stream_id);
        }
        if (text_field(e, "event") == "reconnecting" && !join_of(stream_id)) {
          // A live camera lost (only live jobs reconnect): what came until it resumed was not seen, and
          // its frames come on a new timeline, so no segment runs across the outage (as publish's live
          // segments end there). A restart of its lane (attempt 0) may go on where it was (an archive
          // job's file does): its segments end only if its next frame's pts_ms goes back. With
          // reconnect_grace_s, they end only if its next frame comes later than that after the loss.
          const std::optional<uint64_t> attempt = count_field(e, "attempt");
          const double at_ms = e.contains("time_unix_ms") && e["time_unix_ms"].is_number() ? e["time_unix_ms"].get<double>() : -1;
          if (options.reconnect_grace_s > 0 && at_ms >= 0) {
            lost_at.emplace(stream_id, at_ms);  // (from the first of its attempts)
          } else if (attempt && *attempt > 0) {
            end_segments_of(stream_id);
          } else {
            lane_restarted.insert(stream_id);
          }
        }
        continue;
      }
      if (topic.rfind("segments/", 0) == 0) {
        take_picture(topic, j["payload"]);  // again if read first: the first match is taken
        continue;
      }
      if (topic.rfind("results/", 0) != 0) continue;
      const std::string id = topic.substr(8);
      const JoinedStreams* join = join_of(id);
      if (!join && join_names.count(id)) {
        return InvalidArgument(name + ":" + std::to_string(number) + ": --join " + id +
                               ": the results have a stream of that name already; give the join another name");
      }
      const std::string& shown_id = join ? join->name : id;
      if (options.note) seen_streams.insert(shown_id);
      if (!options.stream_ids.empty() && !options.stream_ids.count(shown_id)) continue;
      const nlohmann::json& p = j["payload"];
      const bool damaged = p.contains("damaged") && p["damaged"].is_boolean() && p["damaged"].get<bool>();
      const bool failed = (p.contains("error") && !p["error"].is_null()) || (damaged && options.skip_damaged);
      // The labels on this frame, with their scores: its top-1 (or each_label, every one of its top_k)
      // whose score reaches min_score; none for an error result (or an unsure one).
      if (options.note) {  // every label a result names, for the --label and --min-score that name none
        if (p.contains("label") && p["label"].is_string()) seen_labels.insert(p["label"].get<std::string>());
        if (p.contains("top_k") && p["top_k"].is_array()) {
          for (const nlohmann::json& c : p["top_k"]) {
            if (c.is_object() && c.contains("label") && c["label"].is_string()) seen_labels.insert(c["label"].get<std::string>());
          }
        }
      }
      FrameFacts f;
      if (!failed && options.each_label && p.contains("top_k") && p["top_k"].is_array()) {
        for (const nlohmann::json& c : p["top_k"]) {
          if (!c.is_object() || !c.contains("label") || !c["label"].is_string() || !c.contains("score") ||
              !c["score"].is_number() || c["score"].get<double>() < options.min_score_for(c["label"].get<std::string>())) {
            continue;
          }
          const std::string label = c["label"].get<std::string>();
          // A label named twice counts once, with its first score (top_k is a few entries: no set).
          if (std::none_of(f.labels.begin(), f.labels.end(), [&](const auto& l) { return l.first == label; })) {
            f.labels.emplace_back(label, c["score"].get<double>());
          }
        }
      } else if (!failed && !options.each_label && p.contains("label") && p["label"].is_string()) {
        const double score = p.contains("score") && p["score"].is_number() ? p["score"].get<double>() : 0;
        const std::string label = p["label"].get<std::string>();
        if (score >= options.min_score_for(label)) f.labels.emplace_back(label, score);
      }
      const std::optional<uint64_t> frame = count_field(p, "seq");
      if (!frame) {
        return InvalidArgument(name + ":" + std::to_string(number) + ": a result without its frame number (seq)");
      }
      f.seq = *frame;
      f.pts = p.contains("pts_ms") && p["pts_ms"].is_number() ? p["pts_ms"].get<double>() : -1;
      auto number = [&](const char* key) { return p.contains(key) && p[key].is_number() ? p[key].get<double>() : -1.0; };
      f.capture_ms = number("capture_unix_ms");
      f.camera_ms = number("camera_unix_ms");
      f.damaged = damaged;
      if (join) {
        joined_frames[join->name][id].add(f, label_numbers, label_names);  // taken in order once all is read
      } else {
        if (lane_restarted.erase(id) > 0 && f.pts >= 0 && last_pts.count(id) && f.pts < last_pts[id]) {
          end_segments_of(id);  // its restarted lane's frames came on a new timeline
        }
        if (auto lost = lost_at.find(id); lost != lost_at.end()) {
          if (f.capture_ms < 0 || f.capture_ms - lost->second > options.reconnect_grace_s * 1000) {
            end_segments_of(id);
          } else {
            ++reconnects_within_grace[id];
          }
          lost_at.erase(lost);  // (back in time: its segments go on as its labels do)
        }
        if (f.pts >= 0) last_pts[id] = f.pts;
        add_frame(id, "", f.seq, f);
      }
    }
  }
  // The joins: each one's files in the order of their camera clock, as one stream.
  for (const JoinedStreams& join : options.joins) {
    auto members = joined_frames.find(join.name);
    if (members == joined_frames.end()) {
      if (options.stream_ids.empty()) {
        say_unmatched(options, "--join " + join.name + "=" + join.pattern + ": no stream of the results matches " +
                                   join.pattern);
      }
      continue;
    }
    struct Member {
      const std::string* id;
      const HeldFrames* held;
    };
    std::vector<Member> order;
    for (const auto& [member, frames] : members->second) {
      if (frames.frames.front().camera_ms < 0 || frames.frames.back().camera_ms < 0) {
        return InvalidArgument("--join " + join.name + ": stream '" + member +
                               "' has no camera clock in the results (camera_unix_ms): its files need "
                               "streams[].recorded_at, so that they can be put in order and their gaps seen");
      }
      order.push_back({&member, &frames});
    }
    std::sort(order.begin(), order.end(), [](const Member& a, const Member& b) {
      const double x = a.held->frames.front().camera_ms, y = b.held->frames.front().camera_ms;
      return x != y ? x < y : *a.id < *b.id;
    });
    uint64_t next_pos = 0;  // the place the next file's first frame takes when it follows on
    for (size_t k = 0; k < order.size(); ++k) {
      const std::vector<HeldFrames::Frame>& frames = order[k].held->frames;
      uint64_t base = next_pos;
      if (k > 0) {
        const HeldFrames::Frame& last = order[k - 1].held->frames.back();
        const double gap = frames.front().camera_ms - last.camera_ms;
        if (gap > options.join_gap_ms || gap < -options.join_gap_ms) ++base;  // a missing frame between them
        if (gap < -options.join_gap_ms && options.note) {
          options.note("--join " + join.name + ": '" + *order[k].id + "' begins at " +
                       clock_time_text(frames.front().camera_ms) + ", before '" + *order[k - 1].id + "' ends at " +
                       clock_time_text(last.camera_ms) + ": files that overlap (two cameras' files?) are not joined there");
        }
      }
      // Within a file its own numbers say which frames follow on (a gap in them is a missing frame).
      const uint64_t first_seq = frames.front().seq;
      for (size_t i = 0; i < frames.size(); ++i) {
        const FrameFacts f = order[k].held->at(i, label_names);
        const uint64_t pos = base + (f.seq > first_seq ? f.seq - first_seq : 0);
        add_frame(join.name, *order[k].id, pos, f);
        next_pos = std::max(next_pos, pos + 1);
      }
    }
  }
  for (auto& [id, stream_open] : open) {
    for (auto& [label, s] : stream_open) close(s);
  }
  for (const auto& [id, h] : held) {
    if (h.frames > 0) emit(h);
  }
  // A name given that the results never had (a typo: "bleu" for "blue") gave nothing: said, with the
  // names they have, rather than an empty table that reads as "never seen".
  if (options.note || options.unmatched) {
    auto listed = [](const std::set<std::string>& names) {
      std::string text;
      size_t shown = 0;
      for (const std::string& n : names) {
        if (++shown > 20) return text + ", ... (" + std::to_string(names.size()) + " in all)";
        text += (text.empty() ? "'" : ", '") + n + "'";
      }
      return text.empty() ? std::string("none") : text;
    };
    for (const std::string& id : options.stream_ids) {
      if (!seen_streams.count(id)) {
        say_unmatched(options, "--stream " + id + ": no result of the results is of it (their streams: " +
                                   listed(seen_streams) + ")");
      }
    }
    std::set<std::string> asked = options.labels;
    for (const auto& [label, score] : options.min_score_by_label) asked.insert(label);
    for (const std::string& label : asked) {
      if (seen_labels.count(label)) continue;
      const bool as_label = options.labels.count(label) > 0;
      say_unmatched(options, std::string(as_label ? "--label " : "--min-score ") + label + (as_label ? "" : "=...") +
                                 ": no result names that label (their labels: " + listed(seen_labels) + ")");
    }
  }
  return Status::Ok();
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + '"';
}

std::string segment_csv_header() {
  return "stream_id,label,from,to,frames,score_mean,start_ms,end_ms,start_seq,end_seq,best_seq,best_ms,best_score,"
         "best_capture_unix_ms,damaged_frames,reconnections,start_capture_unix_ms,end_capture_unix_ms,start_camera_unix_ms,"
         "end_camera_unix_ms,"
         "start_stream_id,end_stream_id,best_stream_id,picture";
}

std::string segment_csv_row(const Segment& s, const std::string& from, const std::string& to,
                            const std::string& picture) {
  // Milliseconds as written in the results (to the microsecond), without trailing zeros; empty: unknown.
  auto ms = [](double v) -> std::string {
    if (v < 0) return "";
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.3f", v);
    std::string t = buf;
    while (t.back() == '0') t.pop_back();
    if (t.back() == '.') t.pop_back();
    return t;
  };
  auto score = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4f", v);
    return std::string(buf);
  };
  const std::vector<std::string> fields = {
      s.stream_id, s.label, from == "-" ? "" : from, to == "-" ? "" : to, std::to_string(s.frames),
      score(s.score_mean()), ms(s.start_ms), ms(s.end_ms), std::to_string(s.start_seq), std::to_string(s.end_seq),
      std::to_string(s.best_seq), ms(s.best_ms), s.best_score < 0 ? "" : score(s.best_score), ms(s.best_capture_ms),
      std::to_string(s.damaged_frames), std::to_string(s.reconnections), ms(s.start_capture_ms), ms(s.end_capture_ms), ms(s.start_camera_ms), ms(s.end_camera_ms), s.start_stream,
      s.end_stream, s.best_stream, picture};
  std::string line;
  for (size_t i = 0; i < fields.size(); ++i) line += (i ? "," : "") + csv_field(fields[i]);
  return line;
}

std::string clock_time_text(double unix_ms) {
  if (unix_ms < 0) return "-";
  const auto total = static_cast<long long>(std::llround(unix_ms));
  const time_t seconds = static_cast<time_t>(total / 1000);
  std::tm local{};
  if (!localtime_r(&seconds, &local)) return "-";
  char date[32], buf[40];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S", &local);
  std::snprintf(buf, sizeof buf, "%s.%03lld", date, total % 1000);
  return buf;
}

std::string media_time_text(double ms) {
  return ms < 0 ? "-" : vapipe::media_time_text(static_cast<int64_t>(std::llround(ms * 1e6)));  // streams[].from's
}

}  // namespace vapipe::cli
