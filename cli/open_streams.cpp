#include "cli/open_streams.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "pipeline/crash_report.h"

#include "pipeline/signals.h"
#include "stages/ingest/network_reachability.h"
#include "stages/ingest/stream_reader.h"

namespace vapipe::cli {

std::vector<OpenedStream> open_each_stream(const std::vector<StreamConfig>& all, const IngestConfig& ingest,
                                           std::chrono::seconds timeout, size_t parallel) {
  std::vector<const StreamConfig*> streams;
  for (const StreamConfig& s : all) {
    if (!s.is_member()) streams.push_back(&s);
  }
  std::vector<OpenedStream> opened(streams.size());
  std::atomic<size_t> next{0};
  // The streams being opened, for a crash report: a file that crashes GStreamer's decoder is named.
  std::mutex opening_mutex;
  std::set<size_t> opening;
  auto say_opening = [&] {
    std::string text;
    for (const size_t k : opening) {
      text += (text.empty() ? "opening " : ", ") + ("'" + streams[k]->id + "' (" + streams[k]->uri + ")");
    }
    if (!text.empty()) text += ": one of these crashes GStreamer's decoder (`vapipe run` leaves such a file out)";
    set_crash_context(text);
  };
  auto open_one = [&](size_t i) {
    const StreamConfig& s = *streams[i];
    OpenedStream& o = opened[i];
    o.id = s.id;
    {
      std::lock_guard<std::mutex> lock(opening_mutex);
      opening.insert(i);
      say_opening();
    }
    struct Opened {
      std::mutex& mutex;
      std::set<size_t>& opening;
      size_t i;
      std::function<void()> say;
      ~Opened() {
        std::lock_guard<std::mutex> lock(mutex);
        opening.erase(i);
        say();
      }
    } opened_one{opening_mutex, opening, i, say_opening};
    const auto start = std::chrono::steady_clock::now();
    auto reader = StreamReader::create(s, static_cast<uint32_t>(i), ingest, ReaderOptions{});
    if (!reader.ok()) {
      o.what = reader.status().message();
      return;
    }
    // Stops the reader at its first frame; keeps its end or error.
    class FirstFrame final : public Emitter {
     public:
      FirstFrame(ShutdownFlags& flags, OpenedStream& o, std::chrono::steady_clock::time_point start)
          : flags_(flags), o_(o), start_(start) {}
      Status emit(Message&& m) override {
        if (m.kind == MessageKind::kFrame && !o_.ok) {
          char text[160];
          std::snprintf(text, sizeof text, "%ux%u %s, first frame after %.2f s", m.frame.width, m.frame.height,
                        pixel_format_name(m.frame.format),
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
          o_.ok = true;
          o_.what = text;
          flags_.stop = true;
        } else if (m.kind == MessageKind::kStreamError && !o_.ok) {
          o_.what = m.event.message;
        } else if (m.kind == MessageKind::kStreamEnd && !o_.ok && o_.what.empty()) {
          o_.what = "ended before its first frame: " + m.event.message;
        }
        return Status::Ok();
      }
      Result<Payload> allocate(size_t bytes) override { return Payload::heap(bytes); }

     private:
      ShutdownFlags& flags_;
      OpenedStream& o_;
      std::chrono::steady_clock::time_point start_;
    };
    ShutdownFlags flags;
    FirstFrame out(flags, o, start);
    std::atomic<bool> done{false};
    std::thread watch([&] {
      while (!done && std::chrono::steady_clock::now() - start < timeout) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      flags.stop = true;
    });
    if (Status run = (*reader)->run(out, flags); !run.ok() && !o.ok) o.what = run.message();
    done = true;
    watch.join();
    if (!o.ok && (o.what.empty() || o.what == kStoppedReason || o.what == "ended before its first frame: stopped")) {
      o.what = "no frame within " + std::to_string(timeout.count()) + " s";
      if (s.parsed.kind == UriKind::kNetwork) {  // a camera off, or one that answers and sends nothing
        const std::string why = tcp_connect_failure(s.uri, std::chrono::seconds(2));
        o.what += why.empty() ? " (its server accepts connections, but no picture came)" : ": " + why;
      }
    }
  };
  std::vector<std::thread> workers;
  for (size_t w = 0; w < std::min(parallel, streams.size()); ++w) {
    workers.emplace_back([&] {
      for (size_t i = next++; i < streams.size(); i = next++) open_one(i);
    });
  }
  for (std::thread& t : workers) t.join();
  return opened;
}

}  // namespace vapipe::cli
