// The job config (YAML). Every key is validated at start-up; an error names the file, line, key and
// what was expected, and unknown keys are errors. docs/config.md is the reference.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/bounded_queue.h"
#include "pipeline/curve.h"
#include "pipeline/envelope.h"
#include "pipeline/message.h"
#include "pipeline/recorded_at.h"
#include "pipeline/status.h"
#include "pipeline/stream_uri.h"

namespace vapipe {

enum class JobMode { kArchive, kLive };
enum class TransportMode { kShm, kTcp };

// streams[].rotate (degrees clockwise: 0, 90, 180, 270) and mirror (left to right, before turning), as
// an orientation.
Orientation orientation_from_rotation(uint32_t degrees, bool mirror);

// A time in a video's own timeline, as streams[].from and to give it: seconds ("90", "5400.5") or
// "[H:]MM:SS[.fff]" ("1:30:00", "12:05.5"); nanoseconds.
Result<int64_t> parse_media_time(const std::string& text);
// streams[].tls_fingerprint as openssl prints it ("sha256 Fingerprint=AB:CD:...", "AB:CD:...", or 64
// hex digits, any case): "AB:CD:..." (32 bytes, upper case, colons).
Result<std::string> parse_tls_fingerprint(const std::string& text);
// "1:30:00.000", "12:05.500": a media time as parse_media_time reads it.
std::string media_time_text(int64_t ns);

// streams[].tls_ca_file and tls_verify: how a camera's TLS certificate is checked (rtsps://, https://).
struct SourceTls {
  std::string ca_file;  // PEM certificates trusted instead of this machine's authorities; empty: those
  bool verify = true;   // false: not checked at all (encrypted, but anyone on the path can pose as it)
  // The one certificate trusted, by its SHA-256 fingerprint ("AB:CD:...", as openssl writes it),
  // whatever its name or issuer; empty: none (pinned: ca_file and verify are not used).
  std::string fingerprint = "";
  bool operator==(const SourceTls& o) const {
    return ca_file == o.ca_file && verify == o.verify && fingerprint == o.fingerprint;
  }
  bool operator!=(const SourceTls& o) const { return !(*this == o); }
};

// A field added here also goes into StreamTableEntry (pipeline/stream_table.h) and into what a reload's
// settings change of a running reader (StreamReader::Impl::take_waiting_settings).
struct StreamConfig {
  std::string id;
  std::string uri;  // normalised (plain paths become file://)
  ParsedUri parsed;
  int line = 0;     // where the stream is declared, for error messages
  // Where its uri is written ("streams[2].uri" on line 14), for an error of the uri found after the
  // config loaded (a scheme no GStreamer source here reads); 0 and "" for a glob's files.
  int uri_line = 0;
  std::string uri_key;
  double max_fps = -1;  // streams[].max_fps: this stream's ingest.max_fps; -1: the job's
  // streams[].keyframes_only: this stream's ingest.keyframes_only; unset: the job's.
  std::optional<bool> keyframes_only = std::nullopt;
  // streams[].rtsp_latency_ms: this camera's ingest.rtsp_latency_ms; unset: the job's.
  std::optional<uint32_t> rtsp_latency_ms = std::nullopt;
  // streams[].roi: the region of each frame that is classified, [x, y, width, height] as fractions
  // of the upright picture.
  std::array<double, 4> roi{0, 0, 1, 1};
  // streams[].rotate and mirror: how this camera's (or file's) frames are turned to show them upright
  // (a camera mounted upside down, or on its side for a corridor); over its file's own orientation
  // tag. Unset: the file's tag (ingest.orientation).
  std::optional<Orientation> turn = std::nullopt;
  SourceTls tls;
  // streams[].recorded_at: when this file's recording started (given, from its name, or from its
  // container), so that its frames' camera_unix_ms say the time of day they show. Files only.
  RecordingStart recorded;
  // streams[].from and to: the part of a file that is classified, in its own time (as pts_ms): frames
  // at or after from_ns and before to_ns (-1: its end). Files only; the reader seeks to from_ns.
  int64_t from_ns = 0;
  int64_t to_ns = -1;
  bool whole_file() const { return from_ns == 0 && to_ns < 0; }
  // streams[].loop: a live job's file read again from its start (or from) at its end (or to), without
  // end: a recorded clip as an endless camera. Files in live jobs only.
  bool loop = false;
  // streams[].source: the id of another stream whose decoded frames this one classifies too (another
  // region of the same camera or file, decoded once); it then has the source's uri and decoding
  // settings. Empty: the stream reads its own uri.
  std::string source;
  bool is_member() const { return !source.empty(); }
  bool whole_frame() const { return roi[0] == 0 && roi[1] == 0 && roi[2] == 1 && roi[3] == 1; }
};

struct JobConfig {
  std::string name = "vapipe";
  JobMode mode = JobMode::kArchive;
  double price_per_gpu_hour = 0.0;  // for the job summary's cost line
  std::string summary_path;         // optional JSON file written at the end of an archive job
  double drain_timeout_s = 10.0;    // on SIGINT/SIGTERM: how long stages may drain before being killed
  // A stage that fails once it has opened (a crash) is restarted, at most this many times in a row: in
  // a live job its lane (or publish) alone, an archive job whole, going on from publish.jsonl_path
  // (and not restarted without it).
  uint32_t max_restarts = 3;
  // A stage stuck this long in its own work (one message, a deadline, closing) aborts itself, so
  // that it is restarted (pipeline/stage_watchdog.h); 0: never.
  double stage_timeout_s = 120.0;
};

struct IngestConfig {
  std::string decoder = "auto";  // auto | cpu | nvdec
  int decoder_line = 0;          // where it is set, for placement errors (0: not set)
  // Decoded frames buffered per stream; default: 4 in archive mode (back-pressure holds the decoder
  // anyway, and each 1080p frame held is 3 MB per stream: 16 files at once, 8 -> 4 took ingest's
  // memory from 1,140 to 951 MB at the same speed), 8 in live mode (what a burst may queue before the
  // oldest is dropped).
  uint32_t queue_capacity = 8;
  QueuePolicy queue_policy = QueuePolicy::kBlock;  // default: block in archive mode, drop_oldest live
  // Live mode, network streams: one that fails, ends or stalls is reconnected after a delay that
  // doubles from reconnect_delay_s up to reconnect_max_delay_s; reconnect_attempts in a row without a
  // frame end it as failed (0: never give up). A stream with no frame for stall_timeout_s has stalled
  // (0: never). An archive file with no frame for 3 x stall_timeout_s is said (a share that hangs).
  bool reconnect = true;
  double reconnect_delay_s = 1.0;
  double reconnect_max_delay_s = 30.0;
  uint32_t reconnect_attempts = 0;
  double stall_timeout_s = 10.0;
  // Files: how long one may go with no video stream found and no error said before it ends with one
  // (decodebin drops some demuxers' errors); a slow network file system needs longer.
  double file_open_timeout_s = 60.0;
  // RTSP sources (rtspsrc): how long the jitter buffer waits for a late or lost packet, in ms.
  uint32_t rtsp_latency_ms = 200;
  // Frames classified per second of each stream's own timeline, at most (the first frame of each
  // 1/max_fps period); the rest are decoded and left out before they are copied. 0: every frame.
  double max_fps = 0;
  // Only key frames are decoded (and classified): the others are left out before the decoder, so a
  // stream costs a fraction of its decoding (a key frame every 2 s of 30 fps video: 1 frame in 60).
  bool keyframes_only = false;
  // Archive jobs: each lane (ingest process) reads at most this many streams at once (a stream with
  // `source` members counts once); the others wait their turn in config order and open as those end.
  // Each open stream costs decoder threads, open files and frame slots, so a folder of thousands of
  // files must not open at once. 0: all at once. Live jobs open every stream.
  uint32_t max_open_streams = 64;
  // Threads each CPU decoder (libav, libvpx, dav1d) may use. 0 (auto): the lane's CPUs shared among
  // the streams it reads at once (at least 1, at most 16). A decoder's own default is one thread per
  // CPU of the machine, each holding its own frames: with many streams that buys no speed (the
  // streams already keep every CPU busy) and costs memory (a 1080p H.264 decoder: 88 MB with one
  // thread, 291 MB with 16). NVDEC has no threads.
  uint32_t decoder_threads = 0;
  // orientation: upright (default) turns each frame as its file says it is shown (a phone's portrait
  // video is stored sideways with a rotation in its MP4/MOV header, which players and OpenCV apply):
  // the classifier, and an roi, see the picture as people do. as_stored: frames as the decoder gives
  // them. CPU-decoded frames only: NVDEC frames are classified as stored (said once per stream).
  bool upright = true;
  // deinterlace: first_field (default) classifies an interlaced frame (broadcast TV, an analogue
  // camera's DVR: two fields 1/50 or 1/60 s apart woven row by row, so whatever moves is combed) from
  // the field taken first alone: preprocessing reads every other row, nothing is copied. off: the
  // frame as decoded, both fields. Progressive frames are read whole either way.
  bool first_field = true;
  bool keyframes_only_for(const StreamConfig& s) const { return s.keyframes_only.value_or(keyframes_only); }
  uint32_t rtsp_latency_ms_for(const StreamConfig& s) const { return s.rtsp_latency_ms.value_or(rtsp_latency_ms); }
};

struct PreprocessConfig {
  std::string device = "auto";  // auto (cuda when the lane has a GPU) | cpu | cuda
  int device_line = 0;          // where it is set, for placement errors (0: not set)
  uint32_t width = 224;
  uint32_t height = 224;
  std::array<float, 3> mean{0.485f, 0.456f, 0.406f};
  std::array<float, 3> std{0.229f, 0.224f, 0.225f};
  DType dtype = DType::kFloat32;
  uint32_t threads = 1;  // CPU preprocessing: frames converted at once (0: every CPU)
  // The model's input channels: rgb (torchvision, timm) or bgr (a model trained on OpenCV's images, or
  // Caffe's: DeepStream's model-color-format 1). mean and std are in this order.
  std::string channel_order = "rgb";
  // stretch: the whole frame (or roi) resized to width x height, its shape not kept (DeepStream's
  // default). center_crop: the largest centred region of the tensor's shape, the rest left out
  // (torchvision's Resize + CenterCrop at the full shorter side): shapes as the model was trained on.
  // letterbox: the whole frame (or roi) scaled to fit inside width x height, its shape kept, centred,
  // the margins pad_color: nothing left out, shapes kept (what detectors such as YOLO are fed).
  std::string resize = "stretch";
  std::array<uint32_t, 3> pad_color{0, 0, 0};  // letterbox's margins: R, G, B, 0..255
};

struct BatchConfig {
  uint32_t max_batch_size = 16;  // with auto_size: auto_limit until infer has measured
  double max_delay_ms = 10.0;
  // max_batch_size: auto. Infer measures the model at batch sizes 1, 2, 4, ... up to auto_limit (and
  // what free GPU memory allows) and hands the choice to its lane's batch stage.
  bool auto_size = false;
  uint32_t auto_limit = 256;
};

struct InferConfig {
  std::string model;       // TorchScript file (absolute after loading)
  std::string labels;      // one label per line
  int model_line = 0, labels_line = 0;  // where they are set, for "cannot be opened" (0: not known)
  std::string model_name;  // defaults to the model file's stem
  std::string device = "auto";  // auto | cpu | cuda | cuda:N
  int device_line = 0;          // where it is set, for placement errors (0: not set)
  uint32_t top_k = 3;
  uint32_t warmup_batches = 3;
  uint32_t threads = 0;    // intra-op threads; 0 = every CPU of the machine
  bool optimize = true;    // freeze the model for inference (torch.jit.optimize_for_inference)
  DType precision = DType::kFloat32;  // fp16: the model's weights and inputs in half precision (CUDA only)
  bool channels_last = true;          // NHWC memory format on CUDA (faster convolutions with cuDNN)
  bool jit_optimize = false;  // TorchScript's run-time re-optimisation (profiling executor), per batch shape
  // exact: each batch runs at its own size. padded: at the next of a fixed set of sizes (1, 2, 3, 4, 6,
  // 8, 12, ... up to the batch size), zero rows appended, each size warmed up at start: a model on CUDA
  // pays for every new input shape (cuDNN execution plans) while frames wait. auto: padded on CUDA,
  // exact on the CPU (where padding costs its full share of compute and new shapes cost little).
  std::string batch_shapes = "auto";
  // Each padded batch size's forward pass recorded once as a CUDA graph and replayed: one launch per
  // batch instead of one per layer (the interpreter's CPU cost per batch). auto: on CUDA with padded
  // batch shapes, falling back to plain runs (with a warning) if capture fails; on: the same, but a
  // failed capture is an error; off: never.
  std::string cuda_graphs = "auto";
  // What the model's rows are: logits (scores are their softmax), probabilities (a model exported with
  // its own softmax or, multi-label, its sigmoid: scores are the rows), multi_label_logits (a
  // multi-label model's logits: scores are their sigmoids), or auto: probabilities when the model's
  // output is a sigmoid's or the warm-up's rows are distributions, else logits.
  std::string output = "auto";
};

// Which GPUs the job uses: one lane of stages (ingest, preprocess, batch, infer) per GPU.
struct GpuSelection {
  enum class Kind { kAll, kNone, kList };
  Kind kind = Kind::kAll;
  std::vector<int> list;  // kList: device indices, in order
  int line = 0;           // where `gpus` is set, for placement errors (0: not set)
};

// What a sink of publish's own (a webhook, an MQTT broker) takes of the messages published, and what it
// keeps while its receiver cannot take them (stages/publish/message_filter.h).
struct MessageSinkConfig {
  std::vector<std::string> topics{"segments/"};  // topic prefixes, as a bus subscription's
  // Only the segments and results of these labels (an alert for "person" and "truck", not for each
  // label the scene takes); events and the summary go whatever their labels. Empty: every label.
  std::vector<std::string> labels;
  int labels_line = 0;
  // A segment of a stream's label that begins within this many seconds of the last one of that
  // stream and label that was sent (by the stream's own time: start_ms) is not sent, nor its picture and
  // end: a person walking in and out of view is one alert, not one a minute. 0: every segment.
  double cooldown_s = 0;
  std::string ca_file;  // TLS: the authorities to trust instead of this machine's
  bool tls_verify = true;
  double timeout_s = 10;  // to connect, and for the receiver's answer
  // Messages kept while the receiver cannot be reached (or is slower than they come): past this,
  // drop_oldest drops the oldest and counts it; block holds publish (and so the job) until there is room.
  uint32_t max_queued = 10000;
  QueuePolicy queue_policy = QueuePolicy::kDropOldest;
  // What is sent: json, the message (a webhook: as a results file's line, {"topic": ..., "payload": ...};
  // MQTT: its payload, the topic being MQTT's); text, a line a person reads ("gate: truck began at
  // 14:32:05 (score 0.93)"); slack (webhooks), that line as {"text": ...}.
  std::string format = "json";
  int line = 0;  // of the config, for log lines
};

// publish.webhooks[]: each message published on a topic that starts with one of `topics` is also
// POSTed to `url`, in order, from a thread of its own, so that an alert reaches a receiver (Home
// Assistant, n8n, a chat's incoming webhook (format slack), ntfy (format text)) without a subscriber of
// one's own (stages/publish/webhook.h).
struct WebhookConfig : MessageSinkConfig {
  std::string url;  // http:// or https://; its path and query (often the secret) are never logged
  std::vector<std::pair<std::string, std::string>> headers;  // sent with each request; values never logged
  std::string token_file;  // Authorization: Bearer <its first line>, read at load
  std::string token;
  // A segment's `picture` message carries the JPEG itself (publish.segments_pictures_dir), read when
  // sent, in the request its format makes (stages/publish/webhook.h: webhook_with_file).
  bool attach_pictures = false;
  // A segment's `clip` message carries the MP4 itself (publish.segments_clips), as a picture does
  // (Telegram's sendVideo); one larger than the webhook's limit goes without.
  bool attach_clips = false;
  // The largest file attached, in MB; 0: the format's (stages/publish/webhook.h: attachment_limit_bytes).
  double attach_max_mb = 0;
  // format telegram: the chat the bot writes to ("123456789", "-1001234567890", "@channel"); the url is
  // the bot's (https://api.telegram.org/bot<TOKEN>), to which /sendMessage or /sendPhoto is added.
  std::string telegram_chat_id;
};

// publish.mqtt[]: each message published on a topic that starts with one of `topics` is also published
// to an MQTT broker (Mosquitto, EMQX, HiveMQ, Home Assistant's add-on) on topic_prefix + its bus topic
// ("vapipe/nightly/segments/gate"), in order, from a thread of its own (stages/publish/mqtt_publisher.h):
// what Frigate and DeepStream's msgbroker give the home-automation and IoT tools that speak MQTT.
struct MqttConfig : MessageSinkConfig {
  std::string url;           // mqtt://[user[:password]@]host[:1883] or mqtts://...[:8883]
  std::string topic_prefix;  // default "vapipe/<job.name>/"
  uint32_t qos = 1;          // 0: at most once; 1: at least once (the broker acknowledges each); 2: exactly once
  bool retain = false;       // the broker keeps each topic's last message for subscribers that come later
  std::string client_id;     // empty: vapipe-<job.name>-<host name>-<pid>
  std::string username;      // (or the url's user)
  std::string password_file;  // its first line is the password, read at load; never logged
  std::string password;
  std::string cert_file, key_file;  // mqtts: a client certificate and its key (AWS IoT, a broker that asks)
  uint32_t keepalive_s = 30;
  // "online" while connected, "offline" (the broker's last will, or said at the stop), retained, at
  // qos 1: Home Assistant's availability topic. Default topic_prefix + "status"; empty: none.
  std::string status_topic;
  // Home Assistant: each stream's `labels` are binary sensors, ON while a segment of that label is open
  // (topic_prefix + "state/<stream>/<label id>", retained), announced through MQTT discovery under
  // discovery_prefix, one device per stream.
  bool home_assistant = false;
  std::string discovery_prefix = "homeassistant";
  // The JPEG of each stream's latest segment picture of a label (publish.segments_pictures_dir), as
  // the message's bytes, retained, on topic_prefix + "picture/<stream>/<label id>": what Home Assistant
  // shows as an MQTT camera (announced with home_assistant), and a subscriber on another host gets
  // without the job's files. Default: on with home_assistant and segments_pictures_dir.
  bool pictures = false;
  // A picture larger than this is not published (its topic is cleared, with a warning): a broker
  // disconnects a client whose message is larger than it takes (EMQX's default 1 MB, AWS IoT Core's
  // 128 KB), and the pictures in force go out again on each new connection, so one too large would
  // keep the connection from ever staying up.
  uint32_t pictures_max_kb = 1000;
};

// publish.redis[]: each message published on a topic that starts with one of `topics` is also added
// to a Redis stream (XADD key_prefix + topic, "vapipe:nightly:segments/gate"), in order, from a thread
// of its own (stages/publish/redis_streams.h): unlike the bus, a stream keeps the messages for a
// consumer that was down or comes later (XREAD from an id, consumer groups), as DeepStream's and
// Savant's Redis adapters give theirs. At least once: a reply lost with a connection sends it again.
struct RedisConfig : MessageSinkConfig {
  // redis://[user[:password]@]host[:6379][/db], or rediss://... (TLS); or, for a master that Redis
  // Sentinel watches, redis+sentinel://[user[:password]@]host[:26379][,host...]/<master name>[/db]
  std::string url;
  uint32_t db = 0;         // the url's /db (SELECT)
  std::string key_prefix;  // default "vapipe:<job.name>:"
  // Each stream is trimmed to about this many entries (XADD MAXLEN ~): a day of one camera's results
  // at 30 frames/s is 2.6 million. 0: never trimmed (the server's memory is the limit).
  uint64_t maxlen = 100000;
  std::string username;       // Redis 6 ACL user (or the url's user); empty: AUTH with the password alone
  std::string password_file;  // its first line is the password, read at load; never logged
  std::string password;
  std::string cert_file, key_file;  // rediss: a client certificate and its key (Redis's tls-auth-clients)
  // redis+sentinel://: the sentinels' own password (their requirepass), when they have one; never logged
  std::string sentinel_password_file;
  std::string sentinel_password;
};

// publish.kafka[]: each message published on a topic that starts with one of `topics` is also
// produced to a Kafka cluster (Apache Kafka, Redpanda, Amazon MSK, Confluent Cloud), from a thread of
// its own (stages/publish/kafka_publisher.h): on the topic topic_prefix + the bus topic's kind
// ("vapipe.nightly.results", ".events", ".segments", ".job"), keyed by its stream's id (a stream's
// messages stay in order in one partition), the bus topic in the header "vapipe-topic". What
// DeepStream's msgbroker gives a data platform; the cluster keeps the messages for consumers that come
// later. At least once, in order per stream (an idempotent producer, acks from all in-sync replicas).
struct KafkaConfig : MessageSinkConfig {
  // kafka://[user[:password]@]host[:9092][,host...] or kafkas://... (TLS); the user is SASL's
  std::string url;
  std::string topic_prefix;  // default "vapipe.<job.name>." (the name in Kafka's topic letters)
  // all: every in-sync replica has it before it counts delivered (with idempotence: no duplicate
  // from a retry, the order kept); leader: the partition's leader alone (faster, lost if it fails).
  std::string acks = "all";
  bool idempotence = true;  // needs acks: all (and, before Kafka 2.8, the IdempotentWrite permission)
  std::string compression = "lz4";  // none | gzip | snappy | lz4 | zstd
  std::string client_id;            // default "vapipe-<job.name>"
  // SASL: plain | scram-sha-256 | scram-sha-512 (as the cluster's listener has it), with a user
  std::string sasl_mechanism;
  std::string username;       // (or the url's user)
  std::string password_file;  // its first line is the password, read at load; never logged
  std::string password;
  std::string cert_file, key_file;  // kafkas: a client certificate and its key (mutual TLS)
};

// A name as Home Assistant's ids and discovery topics take it: lower-case ASCII letters, digits and
// '_' ("Fire truck" -> "fire_truck", "cam-1.north" -> "cam_1_north"); "x" when nothing is left.
std::string home_assistant_id(const std::string& name);

struct PublishConfig {
  std::string endpoint = "tcp://127.0.0.1:5560";
  // HOST:PORT for GET /metrics (Prometheus) and GET /healthz; empty: none.
  std::string metrics_address;
  // A file holding a bearer token: then /metrics, POST /-/reload and /healthz's details need
  // `Authorization: Bearer TOKEN`. The token itself is read at load and never logged.
  std::string metrics_token_file;
  std::string metrics_token;
  // PEM certificate (chain) and private key: then the metrics address serves HTTPS only (the bearer
  // token no longer crosses the network in clear). Both or neither; read when publish starts.
  std::string metrics_tls_cert_file;
  std::string metrics_tls_key_file;
  std::string metrics_tls_client_ca_file;  // mutual TLS: clients need a certificate one of its CAs signed
  std::string jsonl_path;             // optional JSON-lines sink (archive jobs)
  // jsonl_path named by the time (a live job's file a day): how many of its files to keep, the one
  // written now included; older ones the job named are deleted as a new one starts. 0: all.
  uint32_t jsonl_keep = 0;
  // segments/<id>: "began" once a label has been every stream frame's top-1 for this many frames in a
  // row, "ended" when another label has (or the stream ends); 0: no segments topic.
  uint32_t segments_min_frames = 0;
  // A frame whose top-1 score is below this names no label for segments: N such frames in a row end
  // the segment as another label would (a truck that left, the street behind it unsure); 0: every frame's.
  double segments_min_score = 0.0;
  // Labels with a minimum score of their own (a multi-label model's operating point per class: smoke
  // at 0.3, person at 0.7), over segments_min_score; by label, with the config line that named it.
  struct LabelScore {
    double min_score = 0.0;
    int line = 0;
  };
  std::map<std::string, LabelScore> segments_min_score_by_label;
  // The minimum score that counts `label` on a frame for segments: its own, or segments_min_score.
  double segment_min_score(const std::string& label) const {
    auto it = segments_min_score_by_label.find(label);
    return it != segments_min_score_by_label.end() ? it->second.min_score : segments_min_score;
  }
  // Which labels have segments: top1, a frame's top-1 label (one segment at a time per stream); or
  // each, every label of its top_k whose score reaches its minimum (segment_min_score; a multi-label model's:
  // "person" and "smoke" at once), a segment of its own each, ended by min_frames frames in a row
  // without it.
  std::string segments_labels = "top1";
  // A frame decoded from damaged data (Envelope::damaged: after a packet lost on its way, up to the next
  // key frame) counts for segments as an error result does: it neither begins nor ends one.
  bool segments_skip_damaged = false;
  // Live jobs: a camera lost mid-segment (its `reconnecting` event, or its lane's restart) keeps the
  // segment open this long: one whose label goes on when the camera is back goes on (a Wi-Fi camera's
  // blip raises no second alert, a Home Assistant sensor no OFF and ON), and it ends, at its last frame
  // before the loss, when the camera is not back by then or another label begins after it. 0: the loss
  // ends it at once.
  double segments_reconnect_grace_s = 0;
  // Live jobs: a JPEG of a frame of each segment as it began (upright, its roi), written under this
  // folder (DIR/<stream>/<date>/<time>_<label>.jpg) and said on segments/<id> as a "picture" message.
  // Empty: none.
  std::string segments_pictures_dir;
  // Which frame: best, the highest-scoring of the segments_min_frames it began with; or first, its
  // first. Decoded again from what ingest keeps of its recent frames; a frame no longer kept (older
  // than that by more than a few seconds) gives way to the next frame ingest decodes.
  std::string segments_picture_frame = "best";
  // Its day folders older than this many days (today's included) are deleted; 0: all are kept.
  uint32_t segments_pictures_keep_days = 0;
  // Live jobs: a video clip of each segment beside its picture (<time>_<label>.mp4), said on
  // segments/<id> as a "clip" message once written: the camera's compressed frames as they came (no
  // encoding), from the key frame at or before segments_clip_pre_s ahead of its first frame to
  // segments_clip_post_s after its last, cut at segments_clip_max_s. Needs segments_pictures_dir.
  bool segments_clips = false;
  double segments_clip_pre_s = 5;
  double segments_clip_post_s = 5;
  double segments_clip_max_s = 300;
  uint32_t wait_for_subscribers = 0;  // archive jobs: hold results until this many subscribers joined
  double wait_timeout_s = 30.0;
  // CURVE on the result bus: the bus's secret key file (`vapipe keygen`); subscribers need its public
  // key. With an authorized-keys file only the subscribers listed there get in. Both read at load.
  std::string curve_secret_key;
  std::string curve_authorized_keys;
  CurveKeyPair curve_keys;                  // empty: no CURVE
  std::vector<std::string> curve_clients;  // empty: any subscriber that knows the public key
  std::vector<WebhookConfig> webhooks;
  std::vector<MqttConfig> mqtt;
  std::vector<RedisConfig> redis;
  std::vector<KafkaConfig> kafka;
};

struct TransportConfig {
  TransportMode mode = TransportMode::kShm;
  uint32_t frame_slots = 0;   // 0 = 2 per stream of the lane, at least 32
  // 0: a 1920x1080 RGB frame in host memory (6,220,800 bytes); in GPU memory (device pools, where
  // NVDEC's frames go), a 3840x2160 NV12 frame (12,441,600: a 4K camera; NVDEC's frames are not scaled
  // to fit, CPU-decoded ones are).
  uint64_t frame_slot_bytes = 0;
  uint64_t effective_frame_slot_bytes(bool in_gpu_memory) const {
    if (frame_slot_bytes) return frame_slot_bytes;
    return in_gpu_memory ? 3840ull * 2160 * 3 / 2 : 1920ull * 1080 * 3;
  }
  uint32_t tensor_slots = 0;  // 0 = 4 x batch.max_batch_size (2 x batch.auto_limit with auto)
  bool device_pools = true;   // shm mode: frames and tensors of GPU stages in GPU memory (CUDA IPC)
  // Where each stage's input binds (the upstream stage connects). Empty: chosen by the supervisor
  // (ipc:// sockets in a per-job folder for mode shm).
  std::map<StageKind, std::string> endpoints;
  int endpoints_line = 0;  // for the placement's error (0: not given)
  // mode tcp: CURVE on every edge with this job key (every stage of the job holds the same secret key
  // file; an input admits only senders with that key). Read at load.
  std::string curve_secret_key;
  CurveKeyPair curve_keys;  // empty: no CURVE
  // ZeroMQ I/O threads per stage process; 0: 1, or with CURVE half the CPUs (1 to 4): one thread
  // encrypts about 500 MB/s (docs/benchmarks.md).
  uint32_t io_threads = 0;
  uint32_t effective_io_threads(unsigned cpus) const {
    if (io_threads) return io_threads;
    return curve_keys.empty() ? 1 : std::clamp<uint32_t>(cpus / 2, 1, 4);
  }
  // Every stream can have a frame in flight while preprocess holds others (its batch at once).
  uint32_t effective_frame_slots(size_t lane_streams) const {
    return frame_slots ? frame_slots : std::max<uint32_t>(32, static_cast<uint32_t>(2 * lane_streams));
  }
  uint32_t effective_tensor_slots(const BatchConfig& b) const {
    if (tensor_slots) return tensor_slots;
    return b.auto_size ? 2 * b.auto_limit : 4 * b.max_batch_size;
  }
};

struct LogConfig {
  std::string level = "info";
};

// A `glob:` entry with `watch_s`: an archive folder that is looked at again while the job runs, so
// that each file a recorder (or a person) adds to it is classified, once, as it settles. What the
// entry says of each file's stream is kept to make the streams of files found later.
struct FolderWatch {
  std::string where;         // "streams[2]", for messages
  int line = 0;
  std::string pattern;       // absolute
  std::string id_prefix;
  double settle_s = 0;       // files modified more recently are left for a later look
  double watch_s = 0;        // seconds between looks
  StreamConfig each;         // max_fps, keyframes_only, roi, turn, recorded_at, from/to of every file
  std::optional<int64_t> part_from_unix_ns, part_to_unix_ns;  // from/to as times of day
};

// A watched folder's settle_s when none is given: a file copied in (cp, rsync, over SMB) is read once
// it has not changed for this long, not halfway through its copy.
inline constexpr double kWatchedFolderSettleS = 10;

// The files a glob entry matches now, each made a stream as the config's load makes them.
struct GlobFiles {
  std::vector<StreamConfig> streams;   // settled files (ids and URIs made), in name order
  std::vector<std::string> unsettled;  // names of files modified in the last settle_s
  std::vector<std::string> undated;    // names recorded_at: name:... reads no time from
  std::vector<std::string> after_part; // names recorded at or after a time-of-day part's end
  // Files that cannot be a stream (their id, or their path as a URI), with why: a config's load fails
  // on the first; a watch logs each and leaves it out.
  std::vector<std::pair<std::string, std::string>> refused;
  size_t matched = 0;                  // files the pattern matched (settled or not)
  size_t settled = 0;                  // of them, not modified in the last settle_s
  size_t hidden = 0;                   // names starting with '.' left out
  std::vector<std::string> unreadable; // folders under the pattern's base that could not be listed, with why
};
Result<GlobFiles> glob_files(const FolderWatch& watch);
// The words for GlobFiles::unreadable: "2 folders under the pattern could not be listed: ...: the files in
// them are not in the job (...)". A config's note with them is a warning in the job's log.
inline constexpr const char* kCouldNotBeListed = " under the pattern could not be listed: ";
std::string unlisted_folders_text(const std::vector<std::string>& folders);

struct Config {
  std::string source;    // file the config came from ("<embedded demo>" for the default)
  std::string base_dir;  // relative paths resolve against this
  JobConfig job;
  std::vector<StreamConfig> streams;
  GpuSelection gpus;
  // Lanes (ingest, preprocess, batch, infer processes) per GPU, or on the CPU when there is none:
  // more than one when one process per stage cannot keep a device busy.
  uint32_t lanes_per_device = 1;
  IngestConfig ingest;
  PreprocessConfig preprocess;
  BatchConfig batch;
  InferConfig infer;
  PublishConfig publish;
  TransportConfig transport;
  LogConfig log;
  // Said when the job starts (`vapipe run`'s log, `vapipe validate`): files a glob left for a later run.
  std::vector<std::string> notes;
  // The `glob:` entries with `watch_s`, in config order. A job with one does not end when its streams
  // have: it classifies each file added to the folder until it is stopped (an archive job only).
  std::vector<FolderWatch> watches;
  bool watches_folders() const { return !watches.empty(); }
};

// String values of a config may take parts from the environment, so that secrets (a camera's
// password) stay out of the file: ${NAME}, or ${NAME:-default} when NAME is unset or empty; $${ is a
// literal ${. An unset NAME without a default is an error that names the variable, never a value.
Result<std::string> expand_environment(const std::string& text);

// "HOST:PORT" (an IPv6 host in brackets; port 0: any free port) split in two; the error says what was
// expected.
Status split_host_port(const std::string& address, std::string* host, int* port);

// publish.metrics_token_file: its first line, without surrounding blanks: a token of 16 to 4096
// printable characters (e.g. `head -c 32 /dev/urandom | base64 > metrics.token`). Errors name the file,
// never the token.
Result<std::string> read_metrics_token_file(const std::string& path);

// How a config is read.
struct ConfigLoadOptions {
  // false: a `glob:` entry's files are not looked for (none is a stream; a watched one is still in
  // Config::watches). For the stages `vapipe run` starts: they take the job's streams from its stream
  // table (the files the supervisor found), and a folder on a share that has stopped answering would
  // hold up their start.
  bool expand_globs = true;
  // Not null: the file's text, read before (vapipe run's copy of the config it started with, for the
  // stages it starts: pipeline/job_layout.h, kConfigAsStartedEnv); the file itself is not read.
  // Errors still name the file, and relative paths resolve against its folder.
  const std::string* file_text = nullptr;
};

// `text`, if given, receives the file's text (what was parsed).
Result<Config> load_config_file(const std::string& path, std::string* text = nullptr,
                                const ConfigLoadOptions& options = {});
// `source_name` appears in error messages; relative paths resolve against `base_dir`.
Result<Config> load_config_string(const std::string& yaml, const std::string& source_name,
                                  const std::string& base_dir, const ConfigLoadOptions& options = {});

// The shipped demo config (configs/demo.yaml, embedded at build time) with its paths resolved
// against the source tree or the install prefix.
Result<Config> load_demo_config(const ConfigLoadOptions& options = {});
std::string demo_config_text();

}  // namespace vapipe
