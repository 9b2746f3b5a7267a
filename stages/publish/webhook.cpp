#include "stages/publish/webhook.h"

#include <cstdint>
#include <httplib.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <strings.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <nlohmann/json.hpp>

#include "pipeline/atomic_file.h"
#include "pipeline/envelope.h"
#include "pipeline/json_fields.h"
#include "pipeline/logging.h"
#include "pipeline/recorded_at.h"
#include "pipeline/tcp_reachability.h"
#include "stages/publish/metrics.h"

namespace vapipe {
namespace {

using Clock = std::chrono::steady_clock;

double unix_now_s() { return static_cast<double>(wall_clock_ns()) / 1e9; }

// A receiver's words for a log line: one line, no control characters, at most 200 bytes.
std::string answer_excerpt(const std::string& body) {
  std::string out;
  for (unsigned char c : body) {
    if (out.size() >= 200) {
      out += "...";
      break;
    }
    out.push_back(c < 0x20 || c == 0x7f ? ' ' : static_cast<char>(c));
  }
  const auto last = out.find_last_not_of(' ');
  out.erase(last == std::string::npos ? 0 : last + 1);
  return out;
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

}  // namespace

std::string webhook_body(const std::string& topic, const std::string& payload_json) {
  return "{\"topic\":" + nlohmann::json(topic).dump() + ",\"payload\":" + payload_json + "}";
}

namespace {

// "2026-12-03 14:32:05" in this machine's local time, of ms since the Unix epoch.
std::string local_time(double unix_ms) { return local_time_text(static_cast<int64_t>(unix_ms * 1e6), false); }

std::string fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// A segment's time of `which` ("start", "end"): the camera's clock when the message has it.
std::optional<double> segment_time(const nlohmann::json& p, const std::string& which) {
  if (auto camera = number_field(p, (which + "_camera_unix_ms").c_str())) return camera;
  return number_field(p, (which + "_capture_unix_ms").c_str());
}

std::string at(std::optional<double> unix_ms) { return unix_ms ? " at " + local_time(*unix_ms) : std::string(); }

// One line: what the message text holds may not hold line breaks (a chat would show them, ntfy too).
std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  return text;
}

}  // namespace

std::string webhook_text(const std::string& topic, const nlohmann::json& p) {
  const std::string schema = text_field(p, "schema");
  const std::string stream = text_field(p, "stream_id");
  const std::string event = text_field(p, "event");
  const std::string label = text_field(p, "label");
  std::string line;
  if (schema == "vapipe.segment") {
    if (event == "began") {
      line = stream + ": " + label + " began" + at(segment_time(p, "start"));
      if (auto score = number_field(p, "best_score")) line += " (score " + fixed(*score, 2) + ")";
    } else if (event == "ended") {
      const auto start = segment_time(p, "start"), end = segment_time(p, "end");
      line = stream + ": " + label + " ended" + at(end);
      // How long it lasted in the video: by the camera's clock, else by the video's own time (a file's
      // results' capture times are when they were classified: 30 frames "after 0.1 s"), else by capture.
      const auto start_media = number_field(p, "start_ms"), end_media = number_field(p, "end_ms");
      const auto across = count_field(p, "reconnections");  // (each connection's pts_ms start over)
      const bool camera_clock = number_field(p, "start_camera_unix_ms") && number_field(p, "end_camera_unix_ms");
      if (!camera_clock && start_media && end_media && (!across || *across == 0)) {
        line += " after " + human_duration(std::max(0.0, (*end_media - *start_media) / 1000));
      } else if (start && end) {
        line += " after " + human_duration(std::max(0.0, (*end - *start) / 1000));
      }
      std::string detail;
      if (auto frames = count_field(p, "frames")) detail = std::to_string(*frames) + " frames";
      if (auto mean = number_field(p, "score_mean")) {
        detail += (detail.empty() ? "" : ", ") + std::string("mean score ") + fixed(*mean, 2);
      }
      // Frames decoded after lost packets: the scores of smears (a camera's network losing them).
      if (auto damaged = count_field(p, "damaged_frames"); damaged && *damaged > 0) {
        detail += (detail.empty() ? "" : ", ") + std::to_string(*damaged) + " damaged";
      }
      // A camera that was lost and came back within segments_reconnect_grace_s: what the outage hid.
      if (auto lost = count_field(p, "reconnections"); lost && *lost > 0) {
        detail += (detail.empty() ? "" : ", ") + std::string("across ") + std::to_string(*lost) +
                  (*lost == 1 ? " reconnection" : " reconnections");
      }
      if (!detail.empty()) line += " (" + detail + ")";
    } else if (event == "picture") {
      const std::string picture = text_field(p, "picture");
      if (picture.empty()) {
        line = stream + ": no picture of " + label + ": " + text_field(p, "error");
      } else {
        auto shown = number_field(p, "camera_unix_ms");
        if (!shown) shown = number_field(p, "capture_unix_ms");
        line = stream + ": picture of " + label + at(shown) + ": " + picture;
        const std::string served = text_field(p, "picture_url_path");
        if (!served.empty()) line += " (served at " + served + ")";
      }
    } else if (event == "clip") {
      const std::string clip = text_field(p, "clip");
      if (clip.empty()) {
        line = stream + ": no clip of " + label + ": " + text_field(p, "error");
      } else {
        line = stream + ": clip of " + label;
        if (auto seconds = number_field(p, "duration_s")) line += " (" + human_duration(*seconds) + ")";
        line += ": " + clip;
        const std::string served = text_field(p, "clip_url_path");
        if (!served.empty()) line += " (served at " + served + ")";
      }
    } else {
      line = stream + ": " + label + " " + event;
    }
  } else if (schema == "vapipe.event") {
    const std::string message = text_field(p, "message");
    const std::string attempt = count_field(p, "attempt") ? " (attempt " + std::to_string(*count_field(p, "attempt")) + ")" : "";
    if (event == "started") {
      line = stream + ": started (" + text_field(p, "uri") + ")";
    } else if (event == "eos") {
      line = stream + ": ended: " + message;
      if (const std::string warning = text_field(p, "warning"); !warning.empty()) line += "; " + warning;
    } else if (event == "error") {
      line = stream + ": FAILED: " + message;
    } else if (event == "reconnecting") {
      line = stream + ": reconnecting" + attempt + ": " + message;
    } else if (event == "resumed") {
      line = stream + ": resumed" + attempt;
    } else if (event == "changed") {
      line = stream + ": " + message + " (" + text_field(p, "uri") + ")";  // "a reload changed its uri (...)"
    } else {
      line = stream + ": " + event + (message.empty() ? "" : ": " + message);
    }
  } else if (schema == "vapipe.result") {
    line = stream + " #" + (count_field(p, "seq") ? std::to_string(*count_field(p, "seq")) : std::string("?")) + ": ";
    const std::string error = text_field(p, "error");
    if (!error.empty()) {
      line += "error: " + error;
    } else {
      line += label;
      if (auto score = number_field(p, "score")) line += " " + fixed(*score, 2);
    }
  } else if (schema == "vapipe.job_summary") {
    const size_t streams = p.is_object() && p.contains("streams") && p["streams"].is_array() ? p["streams"].size() : 0;
    line = "job '" + text_field(p, "job") + "' ended: " + std::to_string(streams) + " stream(s), " +
           std::to_string(count_field(p, "frames").value_or(0)) + " frames";
    if (auto failed = count_field(p, "failed_streams"); failed && *failed > 0) {
      line += ", " + std::to_string(*failed) + " FAILED";
    }
    if (auto unfinished = count_field(p, "unfinished_streams"); unfinished && *unfinished > 0) {
      line += ", " + std::to_string(*unfinished) + " unfinished";
    }
    if (auto wall = number_field(p, "wall_s")) line += ", in " + human_duration(*wall);
  } else {
    line = topic + ": " + p.dump();
  }
  return one_line(line);
}

WebhookRequestBody webhook_request_body(const std::string& format, const std::string& topic,
                                        const nlohmann::json& payload, const std::string& payload_json) {
  if (format == "text") return {webhook_text(topic, payload), "text/plain; charset=utf-8", ""};
  if (format == "slack") return {nlohmann::json{{"text", webhook_text(topic, payload)}}.dump(), "application/json", ""};
  if (format == "discord") {
    return {nlohmann::json{{"content", webhook_text(topic, payload)}}.dump(), "application/json", ""};
  }
  if (format == "teams") {
    // A Teams channel's workflow ("When a Teams webhook request is received", which replaced the
    // Office 365 connectors) posts the Adaptive Card of a message. The line is a TextRun, which Teams
    // shows as it is: a TextBlock's Markdown would read a redacted uri's "***" or an id's "_" as
    // emphasis.
    const nlohmann::json card = {
        {"$schema", "http://adaptivecards.io/schemas/adaptive-card.json"},
        {"type", "AdaptiveCard"},
        {"version", "1.4"},
        {"body", nlohmann::json::array({{{"type", "RichTextBlock"},
                                         {"inlines", nlohmann::json::array({{{"type", "TextRun"},
                                                                             {"text", webhook_text(topic, payload)}}})}}})}};
    const nlohmann::json message = {
        {"type", "message"},
        {"attachments", nlohmann::json::array({{{"contentType", "application/vnd.microsoft.card.adaptive"},
                                                {"contentUrl", nullptr},
                                                {"content", card}}})}};
    return {message.dump(), "application/json", ""};
  }
  // (telegram: the line; its chat is the webhook's own, added when it is sent)
  if (format == "telegram") return {webhook_text(topic, payload), "text/plain; charset=utf-8", ""};
  return {webhook_body(topic, payload_json), "application/json", ""};
}

WebhookRequestBody webhook_attachment_body(const std::string& format, bool pictures, bool clips,
                                           const nlohmann::json& payload, WebhookRequestBody body) {
  if (format != "json" && format != "text" && format != "telegram" && format != "discord") return body;
  if (text_field(payload, "schema") != "vapipe.segment") return body;
  const std::string event = text_field(payload, "event");
  const bool picture = pictures && event == "picture", clip = clips && event == "clip";
  if (!picture && !clip) return body;
  body.attachment = text_field(payload, picture ? "picture" : "clip");
  if (body.attachment.empty()) return body;  // none made: its message says why
  if (format == "text" || format == "telegram" || format == "discord") {
    // The line of a notification whose file is attached: its path says nothing to a phone.
    std::string line = text_field(payload, "stream_id") + ": " + text_field(payload, "label");
    if (picture) {
      auto shown = number_field(payload, "camera_unix_ms");
      if (!shown) shown = number_field(payload, "capture_unix_ms");
      line += at(shown);
    } else if (auto seconds = number_field(payload, "duration_s")) {
      line += ", " + human_duration(*seconds);
    }
    body.body = one_line(line);
    if (format == "discord") body.body = nlohmann::json{{"content", body.body}}.dump();
  }
  return body;
}

namespace {

// One part of a multipart/form-data body: a field, or a file when `filename` is set.
struct FormPart {
  std::string name, content_type, filename, content;
};

WebhookRequest multipart_form(const std::vector<FormPart>& parts) {
  // A boundary that cannot be mistaken for a JPEG's bytes in practice.
  std::random_device random;
  char boundary[64];
  std::snprintf(boundary, sizeof boundary, "vapipe-%08x%08x%08x", random(), random(), random());
  const std::string dash = std::string("--") + boundary;
  WebhookRequest request;
  for (const FormPart& part : parts) {
    request.body += dash + "\r\nContent-Disposition: form-data; name=\"" + part.name + "\"" +
                    (part.filename.empty() ? "" : "; filename=\"" + part.filename + "\"") + "\r\n" +
                    (part.content_type.empty() ? "" : "Content-Type: " + part.content_type + "\r\n") + "\r\n";
    request.body += part.content;
    request.body += "\r\n";
  }
  request.body += dash + "--\r\n";
  request.content_type = std::string("multipart/form-data; boundary=") + boundary;
  return request;
}

}  // namespace

WebhookRequest webhook_with_file(const WebhookConfig& config, const std::string& topic, const std::string& body,
                                 const std::string& path, const std::string& bytes) {
  const bool clip = is_clip_file(path);
  const char* type = attachment_content_type(path);
  // "<stream>_<its file's name>": gate_09-33-41.421_truck.jpg; nothing a header or a part's quotes mind.
  const size_t slash = topic.find('/');
  std::string filename = (slash == std::string::npos ? topic : topic.substr(slash + 1)) + "_" +
                         std::filesystem::path(path).filename().string();
  for (char& ch : filename) {
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' || ch == '_')) ch = '_';
  }
  if (config.format == "text") {
    // ntfy's attachment: the file is the body; the message and the file's name are headers (RFC 2047's
    // encoded word for a line that is not ASCII, which ntfy decodes).
    const bool ascii = std::all_of(body.begin(), body.end(), [](char ch) { return static_cast<unsigned char>(ch) < 0x80; });
    std::string encoded(4 * ((body.size() + 2) / 3) + 1, '\0');
    encoded.resize(static_cast<size_t>(EVP_EncodeBlock(reinterpret_cast<unsigned char*>(encoded.data()),
                                                       reinterpret_cast<const unsigned char*>(body.data()),
                                                       static_cast<int>(body.size()))));
    WebhookRequest request;
    request.headers = {{"X-Message", ascii ? body : "=?UTF-8?B?" + encoded + "?="}, {"X-Filename", filename}};
    request.body = bytes;
    request.content_type = type;
    return request;
  }
  if (config.format == "telegram") {
    // The Bot API's sendPhoto (sendVideo): the chat, the line as its caption, the file.
    if (clip) {
      return multipart_form({{"chat_id", "", "", config.telegram_chat_id},
                             {"caption", "text/plain; charset=utf-8", "", body},
                             {"supports_streaming", "", "", "true"},
                             {"video", type, filename, bytes}});
    }
    return multipart_form({{"chat_id", "", "", config.telegram_chat_id},
                           {"caption", "text/plain; charset=utf-8", "", body},
                           {"photo", type, filename, bytes}});
  }
  // json: the body and the file; discord: its execute-webhook form, {"content"} and the file as files[0].
  return multipart_form({{"payload_json", "application/json", "", body},
                         {config.format == "discord" ? "files[0]" : "file", type, filename, bytes}});
}

WebhookSender::WebhookSender(const WebhookConfig& config, size_t index, SinkPredecessors predecessors)
    : QueuedSink(config, "vapipe_webhook_messages_total", std::move(predecessors)), config_(config) {
  // The config was checked when it loaded: the URL parses.
  url_ = parse_http_url(config_.url).value();
  name_.set("publish.webhooks[" + std::to_string(index) + "] (" + url_.origin() + ")");
  stats_.name = name_.str();
  stats_.index = index;
  stats_.origin = url_.origin();
  token_ = config_.token;
  std::random_device random;
  key_prefix_ = fmt::format("{:08x}{:08x}-", random(), random());
  thread_ = std::thread([this] { run(); });
}

WebhookSender::~WebhookSender() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_now_ = true;
    if (active_client_) active_client_->stop();  // a request waiting for its answer ends now too
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void WebhookSender::set_retry_delays(std::chrono::milliseconds first, std::chrono::milliseconds longest) {
  std::lock_guard<std::mutex> lock(mutex_);
  first_retry_delay_ = first;
  longest_retry_delay_ = longest;
}

void WebhookSender::finish(std::chrono::milliseconds grace) {
  begin_finish(Clock::now() + grace);  // (a deadline given before stays)
  if (!thread_.joinable()) return;  // finished before
  {
    // A request still waiting for its answer at the deadline (a receiver that takes the connection and
    // never answers, with a timeout_s of minutes) is cut: the thread was joined until its timeout, and
    // publish, stuck closing, was aborted by its watchdog (found 2026-12-07: exit 2 after 124 s).
    std::unique_lock<std::mutex> lock(mutex_);
    while (!run_done_) {
      if (changed_.wait_until(lock, finish_by_ + kCutAfterDeadline) == std::cv_status::timeout && !run_done_) {
        stop_now_ = true;
        if (active_client_) active_client_->stop();
        break;
      }
    }
  }
  thread_.join();
  const WebhookStats s = stats();
  if (s.undelivered > 0) {
    VAPIPE_LOG_ERROR("{}: {} message(s) not delivered when {} ({})", name_, s.undelivered, stopped_by(),
                     s.failing ? "it was failing: " + (s.last_error.empty() ? std::string("no answer") : s.last_error)
                               : std::string("no time left: a stop gives what waits at most half of "
                                             "job.drain_timeout_s, 10 s at most"));
  }
  VAPIPE_LOG_INFO("{}: {} message(s) delivered, {} refused, {} dropped (queue full), {} undelivered{}", name_,
                  s.delivered, s.refused, s.dropped, s.undelivered,
                  s.cooled_down ? ", " + std::to_string(s.cooled_down) + " held back (cooldown_s)" : std::string());
}

WebhookStats WebhookSender::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  WebhookStats s = stats_;
  s.queued = queue_.size() + (in_flight_ ? 1 : 0);
  return s;
}

void WebhookSender::set_token(std::string token) {
  std::lock_guard<std::mutex> lock(mutex_);
  token_ = std::move(token);
  token_changed_ = true;
}

size_t attachment_limit_bytes(const WebhookConfig& config, bool clip) {
  constexpr double kMB = 1e6;
  double mb = config.attach_max_mb;
  if (mb <= 0) {
    mb = config.format == "telegram" ? (clip ? 50 : 10) : config.format == "discord" ? 10 : config.format == "text" ? 15 : 50;
  }
  return static_cast<size_t>(mb * kMB);
}

WebhookSender::Outcome WebhookSender::try_once(const Item& item, std::unique_ptr<httplib::ClientImpl>& client,
                                               bool attach) {
  std::string token;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    token = token_;
    if (token_changed_) client.reset();  // its requests carry the token before
    token_changed_ = false;
  }
  // A client per try would cost a TLS handshake per message: the thread's client keeps its connection.
  const bool kept = client != nullptr;
  if (!client) {
    if (url_.tls) {
      auto tls = std::make_unique<httplib::SSLClient>(url_.host, url_.port);
      tls->enable_server_certificate_verification(config_.tls_verify);
      if (!config_.ca_file.empty()) tls->set_ca_cert_path(config_.ca_file);
      client = std::move(tls);
    } else {
      client = std::make_unique<httplib::ClientImpl>(url_.host, url_.port);
    }
    const auto timeout = std::chrono::duration<double>(config_.timeout_s);
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(timeout);
    client->set_connection_timeout(us);
    client->set_read_timeout(us);
    client->set_write_timeout(us);
    client->set_keep_alive(true);
    client->set_tcp_nodelay(true);  // headers and body are two writes: Nagle held the body ~40 ms a message
    client->set_follow_location(false);  // a POST redirected is a GET in most clients: say where it went instead
    client->set_url_encode(false);       // the config's target is sent as written (checked: no blanks)
    if (!url_.user.empty() || !url_.password.empty()) client->set_basic_auth(url_.user, url_.password);
    if (!token.empty()) client->set_bearer_token_auth(token);
  }
  httplib::Headers headers{{"X-Vapipe-Topic", item.topic}};
  if (!item.key.empty()) headers.emplace("Idempotency-Key", "\"" + item.key + "\"");  // a structured-field string
  bool own_agent = false;  // the config's headers may name a User-Agent of their own
  for (const auto& [name, value] : config_.headers) {
    headers.emplace(name, value);
    own_agent = own_agent || strcasecmp(name.c_str(), "User-Agent") == 0;
  }
  if (!own_agent) headers.emplace("User-Agent", "vapipe");
  // attach_pictures, attach_clips: the file is read now (the queue holds its path); one that cannot be
  // read any more (deleted since), or is too large to attach, leaves the message as it is, without it.
  std::optional<WebhookRequest> with_picture;
  if (!item.attachment.empty() && attach) {
    const bool clip = is_clip_file(item.attachment);
    const char* what = clip ? "clip" : "picture";
    std::error_code size_error;
    const auto size = std::filesystem::file_size(item.attachment, size_error);
    if (const size_t most = attachment_limit_bytes(config_, clip); !size_error && size > most) {
      VAPIPE_LOG_WARN("{}: the message on {} goes without its {}: {} is {:.1f} MB, more than the {:g} MB it attaches "
                      "(attach_max_mb)",
                      name_, item.topic, what, item.attachment, static_cast<double>(size) / 1e6,
                      static_cast<double>(most) / 1e6);
    } else if (auto bytes = read_file_bytes(item.attachment); bytes.ok()) {
      with_picture = webhook_with_file(config_, item.topic, item.body, item.attachment, *bytes);
      for (const auto& [name, value] : with_picture->headers) headers.emplace(name, value);
    } else {
      VAPIPE_LOG_WARN("{}: the message on {} goes without its {}: {}", name_, item.topic, what, bytes.status().message());
    }
  }
  std::string target = url_.target, telegram_message;
  const std::string* body = with_picture ? &with_picture->body : &item.body;
  std::string content_type = with_picture ? with_picture->content_type : item.content_type;
  if (config_.format == "telegram") {
    // The Bot API's method is in the path; a line goes as sendMessage's JSON, to the webhook's chat.
    if (target.back() == '/') target.pop_back();
    target += !with_picture ? "/sendMessage" : is_clip_file(item.attachment) ? "/sendVideo" : "/sendPhoto";
    if (!with_picture) {
      telegram_message = nlohmann::json{{"chat_id", config_.telegram_chat_id}, {"text", item.body}}.dump();
      body = &telegram_message;
      content_type = "application/json";
    }
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stop_now_) {
      Outcome stopped;
      stopped.error = "publish stopped before it could be sent";
      return stopped;
    }
    active_client_ = client.get();  // finish() may cut it short (ClientImpl::stop shuts its socket down)
  }
  httplib::Result res = client->Post(target, headers, *body, content_type);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    active_client_ = nullptr;
  }
  Outcome o;
  if (!res) {
    const httplib::Error e = res.error();
    const std::string timeout = seconds_text(config_.timeout_s);
    switch (e) {
      case httplib::Error::Connection: {
        // httplib keeps no errno: a connection of our own says which cause (a name that does not
        // resolve, nothing listening, no route), bounded so that a stop does not wait on it.
        const auto within = std::min<std::chrono::milliseconds>(std::chrono::seconds(2), std::chrono::milliseconds(
            static_cast<int64_t>(config_.timeout_s * 1000)));
        o.error = tcp_connect_failure(url_.origin(), within);
        if (o.error.empty()) o.error = "cannot connect (yet one opened a moment later: the server may have been starting, or overloaded)";
        break;
      }
      case httplib::Error::ConnectionTimeout:
        o.error = "no connection within timeout_s (" + timeout + ")";
        break;
      case httplib::Error::Read:
        o.error = "no answer within timeout_s (" + timeout + "), or the connection closed before one";
        break;
      case httplib::Error::Write:
        o.error = "the connection closed while the message was sent";
        break;
      case httplib::Error::SSLConnection:
        o.error = "the TLS handshake failed (is it an https server?)";
        break;
      case httplib::Error::SSLLoadingCerts:
        o.error = "cannot load the certificate authorities" + (config_.ca_file.empty() ? "" : " of " + config_.ca_file);
        break;
      case httplib::Error::SSLServerVerification: {
        const long why = static_cast<httplib::SSLClient&>(*client).get_openssl_verify_result();
        o.error = std::string("its TLS certificate is refused (") +
                  (why != X509_V_OK ? X509_verify_cert_error_string(why) : "it is not made for the host " + url_.host) +
                  "): give the authority that signed it (or the certificate itself) in ca_file";
        break;
      }
      default:
        o.error = "the request failed (" + httplib::to_string(e) + ")";
    }
    client.reset();  // a connection in an unknown state: the next try opens a new one
    o.kind = Outcome::kRetry;
    o.on_kept_connection = kept;
    return o;
  }
  const int status = res->status;
  if (status >= 200 && status < 300) {
    o.kind = Outcome::kDelivered;
    return o;
  }
  const std::string said = answer_excerpt(res->body);
  o.error = "answered " + std::to_string(status) + (said.empty() ? "" : ": " + said);
  if (status == 408 || status == 425 || status == 429 || status >= 500) {
    o.kind = Outcome::kRetry;
    const std::string after = res->get_header_value("Retry-After");
    if (!after.empty() && after.find_first_not_of("0123456789") == std::string::npos && after.size() < 9) {
      o.retry_after = std::min(std::chrono::seconds(std::stol(after)), kLongestRetryAfter);
    } else if (status == 429) {
      // Without the header, the wait a chat's API puts in its JSON answer: Telegram's
      // {"parameters": {"retry_after": 30}}, Discord's {"retry_after": 1.5} (seconds).
      const nlohmann::json answer = nlohmann::json::parse(res->body, nullptr, /*allow_exceptions=*/false);
      const nlohmann::json* wait = nullptr;
      if (answer.is_object() && answer.contains("retry_after")) wait = &answer["retry_after"];
      if (answer.is_object() && answer.contains("parameters") && answer["parameters"].is_object() &&
          answer["parameters"].contains("retry_after")) {
        wait = &answer["parameters"]["retry_after"];
      }
      if (wait && wait->is_number() && wait->get<double>() >= 0) {
        const double seconds = std::min(std::ceil(wait->get<double>()), static_cast<double>(kLongestRetryAfter.count()));
        o.retry_after = std::chrono::seconds(static_cast<int64_t>(seconds));
      }
    }
  } else if (status >= 300 && status < 400) {
    o.kind = Outcome::kRefused;
    auto moved = parse_http_url(res->get_header_value("Location"));
    o.error += std::string(" (a redirection") + (moved.ok() ? " to " + moved->origin() + "/..." : "") +
               ": give the url it redirects to)";
  } else {
    o.kind = Outcome::kRefused;
    o.too_large = status == 413 && with_picture.has_value();
  }
  return o;
}

void WebhookSender::note_refused(const Item& item, const std::string& error) {
  const auto now = Clock::now();
  if (refusals_logged_at_ != Clock::time_point{} && now - refusals_logged_at_ < std::chrono::minutes(1)) {
    ++refusals_unlogged_;
    return;
  }
  const std::string more =
      refusals_unlogged_ > 0 ? " (and " + std::to_string(refusals_unlogged_) + " more refused since the last said)" : "";
  VAPIPE_LOG_ERROR("{}: refused the message on {}: {}; it is dropped, not tried again{}", name_, item.topic, error,
                   more);
  refusals_logged_at_ = now;
  refusals_unlogged_ = 0;
}

void WebhookSender::run() {
  std::optional<Item> item;
  std::unique_ptr<httplib::ClientImpl> client;
  Clock::time_point still_failing_logged_at{};
  std::chrono::milliseconds delay{0};
  wait_for_predecessors();
  std::unique_lock<std::mutex> lock(mutex_);
  delay = first_retry_delay_;
  auto time_is_up = [&] { return stop_now_ || (stopping_ && Clock::now() >= finish_by_); };
  for (;;) {
    if (!item) {
      changed_.wait(lock, [&] { return stop_now_ || stopping_ || !queue_.empty(); });
      if (time_is_up() || queue_.empty()) break;  // (stopping with nothing left)
      item = std::move(queue_.front());
      queue_.pop_front();
      in_flight_ = true;
      changed_.notify_all();  // room for a blocked post()
    }
    lock.unlock();
    Outcome o = try_once(*item, client);
    if (o.kind == Outcome::kRetry && o.on_kept_connection) o = try_once(*item, client);
    if (o.too_large) {
      // The receiver takes no file that large (a limit below the format's, a self-hosted ntfy's): the
      // message goes at once with its line alone rather than not at all.
      VAPIPE_LOG_WARN("{}: the message on {} goes without its {}: the receiver {} (set attach_max_mb below its "
                      "size, {:.1f} MB, to send such messages without it at once)",
                      name_, item->topic, is_clip_file(item->attachment) ? "clip" : "picture", o.error,
                      [&] {
                        std::error_code ec;
                        const auto size = std::filesystem::file_size(item->attachment, ec);
                        return ec ? 0.0 : static_cast<double>(size) / 1e6;
                      }());
      o = try_once(*item, client, /*attach=*/false);
    }
    lock.lock();
    const auto now = Clock::now();
    if (o.kind == Outcome::kRetry) {
      ++stats_.retries;
      stats_.last_error = o.error;
      if (!stats_.failing) {
        stats_.failing = true;
        stats_.failing_since_unix_s = unix_now_s();
        still_failing_logged_at = now;
        VAPIPE_LOG_WARN("{}: cannot deliver the message on {}: {}; it is kept and tried again in {} ms, then less "
                        "often (up to every {} s), and those after it wait ({} now)",
                        name_, item->topic, o.error,
                        o.retry_after ? std::chrono::duration_cast<std::chrono::milliseconds>(*o.retry_after).count()
                                      : delay.count(),
                        std::chrono::duration_cast<std::chrono::seconds>(longest_retry_delay_).count(),
                        queue_.size() + 1);
      } else if (now - still_failing_logged_at >= kStillFailingLogPeriod) {
        still_failing_logged_at = now;
        VAPIPE_LOG_WARN("{}: still cannot deliver, for {}: {}; {} message(s) wait, {} dropped (queue full)", name_,
                        human_duration(unix_now_s() - stats_.failing_since_unix_s), o.error, queue_.size() + 1,
                        stats_.dropped);
      }
      const auto wait = o.retry_after ? std::chrono::duration_cast<std::chrono::milliseconds>(*o.retry_after) : delay;
      delay = std::min(delay * 2, longest_retry_delay_);
      const auto until = now + wait;
      while (!time_is_up() && Clock::now() < until) {
        changed_.wait_until(lock, stopping_ ? std::min(until, finish_by_) : until);
      }
      if (time_is_up()) break;
      continue;
    }
    if (stats_.failing) {
      VAPIPE_LOG_INFO("{}: reached again after {} ({} message(s) wait, {} dropped meanwhile)", name_,
                      human_duration(unix_now_s() - stats_.failing_since_unix_s), queue_.size(), stats_.dropped);
      stats_.failing = false;
      stats_.failing_since_unix_s = 0;
    }
    delay = first_retry_delay_;
    if (o.kind == Outcome::kDelivered) {
      ++stats_.delivered;
      stats_.last_delivered_unix_s = unix_now_s();
      // Said again once the backlog is gone, not at each delivery (a slow receiver, kept full, had the
      // warning every few messages: twice in 0.3 s, found 2026-12-07).
      if (queue_.empty()) drop_logged_ = false;
    } else {
      ++stats_.refused;
      stats_.last_error = o.error;
      note_refused(*item, o.error);
    }
    settle_line_locked(item->file_line);
    item.reset();
    in_flight_ = false;
    changed_.notify_all();
  }
  stats_.undelivered += queue_.size() + (item ? 1 : 0);
  queue_.clear();
  in_flight_ = false;
  if (refusals_unlogged_ > 0) {
    VAPIPE_LOG_ERROR("{}: {} more message(s) refused since the last said", name_, refusals_unlogged_);
    refusals_unlogged_ = 0;
  }
  run_done_ = true;
  changed_.notify_all();
}

}  // namespace vapipe
