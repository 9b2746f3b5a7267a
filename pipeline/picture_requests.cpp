#include "pipeline/picture_requests.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "pipeline/envelope.h"
#include "pipeline/logging.h"
#include "pipeline/transport.h"

namespace vapipe {

std::string encode_picture_request(const PictureRequest& r) {
  nlohmann::json j{{"stream_id", r.stream_id}, {"label", r.label}, {"segment_start_seq", r.segment_start_seq},
                   {"path", r.path}, {"frame_seq", r.frame_seq}, {"frame_pts_ns", r.frame_pts_ns}};
  if (r.kind == PictureRequest::Kind::kClipStart) j["kind"] = "clip_start";
  if (r.kind == PictureRequest::Kind::kClipEnd) j["kind"] = "clip_end";
  if (r.kind == PictureRequest::Kind::kClipGoesOn) j["kind"] = "clip_goes_on";
  if (r.kind == PictureRequest::Kind::kClipsBefore) {
    j["kind"] = "clips_before";
    j["before_unix_ns"] = r.before_unix_ns;
  }
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<PictureRequest> decode_picture_request(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  PictureRequest r;
  if (!j.is_discarded() && j.is_object() && j.contains("kind")) {
    const std::string kind = j["kind"].is_string() ? j["kind"].get<std::string>() : "";
    if (kind == "clip_start") {
      r.kind = PictureRequest::Kind::kClipStart;
    } else if (kind == "clip_end") {
      r.kind = PictureRequest::Kind::kClipEnd;
    } else if (kind == "clip_goes_on") {
      r.kind = PictureRequest::Kind::kClipGoesOn;
    } else if (kind == "clips_before" && j.contains("before_unix_ns") && j["before_unix_ns"].is_number_integer()) {
      r.kind = PictureRequest::Kind::kClipsBefore;
      r.before_unix_ns = j["before_unix_ns"].get<int64_t>();
    } else {
      return InvalidArgument("a picture request of an unknown kind: " + text.substr(0, 200));
    }
  }
  const bool needs_path = r.kind == PictureRequest::Kind::kPicture || r.kind == PictureRequest::Kind::kClipStart;
  if (j.is_discarded() || !j.is_object() || !j.contains("stream_id") || !j["stream_id"].is_string() ||
      (needs_path && (!j.contains("path") || !j["path"].is_string() || j["path"].get<std::string>().empty()))) {
    return InvalidArgument("a picture request that is not one: " + text.substr(0, 200));
  }
  r.stream_id = j["stream_id"].get<std::string>();
  if (j.contains("path") && j["path"].is_string()) r.path = j["path"].get<std::string>();
  if (j.contains("label") && j["label"].is_string()) r.label = j["label"].get<std::string>();
  if (j.contains("segment_start_seq") && j["segment_start_seq"].is_number_unsigned()) {
    r.segment_start_seq = j["segment_start_seq"].get<uint64_t>();
  }
  for (auto [key, to] : {std::pair{"frame_seq", &r.frame_seq}, std::pair{"frame_pts_ns", &r.frame_pts_ns}}) {
    if (j.contains(key) && j[key].is_number_integer()) *to = std::max<int64_t>(-1, j[key].get<int64_t>());
  }
  return r;
}

std::string label_for_file_name(const std::string& label) {
  std::string out = label;
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    const bool kept = std::isalnum(u) || c == '-' || c == '.' || c == '_' || u >= 0x80;  // UTF-8 letters kept
    if (!kept) c = '_';
  }
  return out;
}

std::string stream_for_file_name(const std::string& stream_id) {
  if (validate_stream_id(stream_id).ok()) return stream_id;
  std::string out = label_for_file_name(stream_id);
  if (out.empty() || out == "." || out == "..") out = "_" + out;
  return out;
}

std::string segment_picture_path(const std::string& dir, const std::string& stream_id, const std::string& label,
                                 double unix_ms) {
  const auto ms = static_cast<long long>(std::llround(std::max(0.0, unix_ms)));
  const std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm local{};
  localtime_r(&seconds, &local);
  char day[16], when[32];
  std::strftime(day, sizeof day, "%Y-%m-%d", &local);
  std::snprintf(when, sizeof when, "%02d-%02d-%02d.%03lld", local.tm_hour, local.tm_min, local.tm_sec, ms % 1000);
  return (std::filesystem::path(dir) / stream_for_file_name(stream_id) / day /
          (std::string(when) + "_" + label_for_file_name(label) + ".jpg"))
      .string();
}

std::string segment_clip_path(const std::string& picture_path) {
  return std::filesystem::path(picture_path).replace_extension(".mp4").string();
}

std::vector<std::string> prune_segment_pictures(const std::string& dir, uint32_t keep_days, std::time_t now) {
  std::vector<std::string> removed;
  if (keep_days == 0 || dir.empty()) return removed;
  // The oldest day kept, as its folder is named: ISO dates sort as their text does.
  const std::time_t oldest = now - static_cast<std::time_t>(keep_days - 1) * 86400;
  std::tm local{};
  localtime_r(&oldest, &local);
  char cutoff[16];
  std::strftime(cutoff, sizeof cutoff, "%Y-%m-%d", &local);
  auto is_day = [](const std::string& name) {
    if (name.size() != 10 || name[4] != '-' || name[7] != '-') return false;
    for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9}) {
      if (!std::isdigit(static_cast<unsigned char>(name[i]))) return false;
    }
    return true;
  };
  // Iterated with increment(ec): a range-for's ++ throws on a read error (a folder removed meanwhile).
  std::error_code ec;
  for (std::filesystem::directory_iterator stream(dir, ec), end; !ec && stream != end; stream.increment(ec)) {
    std::error_code not_a_folder;
    if (!stream->is_directory(not_a_folder)) continue;
    std::error_code unreadable;
    for (std::filesystem::directory_iterator day(stream->path(), unreadable); !unreadable && day != end;
         day.increment(unreadable)) {
      const std::string name = day->path().filename().string();
      std::error_code kind;
      if (!day->is_directory(kind) || !is_day(name) || name >= cutoff) continue;
      std::error_code gone;
      std::filesystem::remove_all(day->path(), gone);
      if (!gone) removed.push_back(day->path().string());
    }
  }
  std::sort(removed.begin(), removed.end());
  return removed;
}

Result<std::unique_ptr<PictureRequestSender>> PictureRequestSender::bind(const std::string& endpoint) {
  try {
    zmq::socket_t socket(zmq_context(), zmq::socket_type::pub);
    socket.set(zmq::sockopt::linger, 0);
    socket.set(zmq::sockopt::sndhwm, 1000);
    socket.bind(endpoint);
    return std::unique_ptr<PictureRequestSender>(new PictureRequestSender(std::move(socket)));
  } catch (const zmq::error_t& e) {
    return Unavailable("picture requests on " + endpoint + ": cannot bind: " + e.what());
  }
}

Status PictureRequestSender::send(const PictureRequest& request) {
  const std::string text = encode_picture_request(request);
  try {
    socket_.send(zmq::buffer(text), zmq::send_flags::dontwait);  // PUB drops rather than block
  } catch (const zmq::error_t& e) {
    return Unavailable(std::string("picture request: ") + e.what());
  }
  return Status::Ok();
}

Result<std::unique_ptr<PictureRequestReceiver>> PictureRequestReceiver::connect(const std::string& endpoint) {
  try {
    zmq::socket_t socket(zmq_context(), zmq::socket_type::sub);
    socket.set(zmq::sockopt::linger, 0);
    socket.set(zmq::sockopt::subscribe, "");
    socket.connect(endpoint);
    return std::unique_ptr<PictureRequestReceiver>(new PictureRequestReceiver(std::move(socket)));
  } catch (const zmq::error_t& e) {
    return Unavailable("picture requests on " + endpoint + ": cannot connect: " + e.what());
  }
}

std::vector<PictureRequest> PictureRequestReceiver::poll() {
  std::vector<PictureRequest> out;
  while (true) {
    zmq::message_t msg;
    zmq::recv_result_t got;
    try {
      got = socket_.recv(msg, zmq::recv_flags::dontwait);
    } catch (const zmq::error_t& e) {
      VAPIPE_LOG_WARN("picture requests: {}", e.what());
      break;
    }
    if (!got) break;
    auto request = decode_picture_request(msg.to_string());
    if (!request.ok()) {
      VAPIPE_LOG_WARN("{}", request.status().message());
      continue;
    }
    out.push_back(std::move(request).value());
  }
  return out;
}

}  // namespace vapipe
