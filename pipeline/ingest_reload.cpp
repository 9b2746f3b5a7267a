#include "pipeline/ingest_reload.h"

#include <algorithm>
#include <type_traits>

#include "pipeline/config_sections.h"

namespace vapipe {

namespace {

// The settings a reload changes in the running ingest: how each is read from the running config's
// text, taken, and compared. `decoding`: a stream takes it with a new connection.
struct ReloadableIngestKey {
  const char* key;
  bool decoding;
  bool (*read)(const YAML::Node& value, IngestConfig& to);
  void (*take)(const IngestConfig& from, IngestConfig& to);
  bool (*differs)(const IngestConfig& a, const IngestConfig& b);
};
template <auto Member>
ReloadableIngestKey reloadable(const char* key, bool decoding) {
  return {key, decoding,
          [](const YAML::Node& value, IngestConfig& to) {
            // As the config reader takes a value: ${NAME} from the environment (the same as the job's).
            using Value = std::remove_reference_t<decltype(to.*Member)>;
            if (!value.IsScalar()) return false;
            auto expanded = expand_environment(value.Scalar());
            return expanded.ok() && YAML::convert<Value>::decode(YAML::Node(*expanded), to.*Member);
          },
          [](const IngestConfig& from, IngestConfig& to) { to.*Member = from.*Member; },
          [](const IngestConfig& a, const IngestConfig& b) { return a.*Member != b.*Member; }};
}
// ingest.deinterlace: first_field | off, which the config reader takes as IngestConfig::first_field.
// Read per frame as it is sent: a running stream takes it at its next frame.
ReloadableIngestKey deinterlace_key() {
  ReloadableIngestKey k = reloadable<&IngestConfig::first_field>("deinterlace", false);
  k.read = [](const YAML::Node& value, IngestConfig& to) {
    if (!value.IsScalar()) return false;
    auto expanded = expand_environment(value.Scalar());
    if (!expanded.ok() || (*expanded != "first_field" && *expanded != "off")) return false;
    to.first_field = *expanded == "first_field";
    return true;
  };
  return k;
}
// ingest.orientation: upright | as_stored, which the config reader takes as IngestConfig::upright. A
// file's tag turns (or no longer turns) the frames kept from then on.
ReloadableIngestKey orientation_key() {
  ReloadableIngestKey k = reloadable<&IngestConfig::upright>("orientation", false);
  k.read = [](const YAML::Node& value, IngestConfig& to) {
    if (!value.IsScalar()) return false;
    auto expanded = expand_environment(value.Scalar());
    if (!expanded.ok() || (*expanded != "upright" && *expanded != "as_stored")) return false;
    to.upright = *expanded == "upright";
    return true;
  };
  return k;
}
const ReloadableIngestKey kReloadable[] = {
    reloadable<&IngestConfig::max_fps>("max_fps", true),
    reloadable<&IngestConfig::keyframes_only>("keyframes_only", true),
    reloadable<&IngestConfig::rtsp_latency_ms>("rtsp_latency_ms", true),
    reloadable<&IngestConfig::reconnect>("reconnect", false),
    reloadable<&IngestConfig::reconnect_delay_s>("reconnect_delay_s", false),
    reloadable<&IngestConfig::reconnect_max_delay_s>("reconnect_max_delay_s", false),
    reloadable<&IngestConfig::reconnect_attempts>("reconnect_attempts", false),
    reloadable<&IngestConfig::stall_timeout_s>("stall_timeout_s", false),
    deinterlace_key(),
    orientation_key(),
};

const ReloadableIngestKey* reloadable_key(const std::string& key) {
  for (const ReloadableIngestKey& k : kReloadable) {
    if (key == k.key) return &k;
  }
  return nullptr;
}

}  // namespace

const std::vector<std::string>& reloadable_ingest_keys() {
  static const std::vector<std::string> keys = keys_of_table(kReloadable);
  return keys;
}

void take_reloadable_ingest_settings(const IngestConfig& from, IngestConfig& to) {
  for (const ReloadableIngestKey& k : kReloadable) k.take(from, to);
}

std::vector<std::string> changed_ingest_settings(const IngestConfig& before, const IngestConfig& after) {
  std::vector<std::string> keys;
  for (const ReloadableIngestKey& k : kReloadable) {
    if (k.differs(before, after)) keys.push_back(k.key);
  }
  return keys;
}

Result<IngestReload> compare_ingest_sections(const std::string& running_yaml, const std::string& reloaded_yaml,
                                             const std::string& source, const IngestConfig& reloaded) {
  VAPIPE_ASSIGN_OR_RETURN(ConfigDocuments docs, load_config_documents(running_yaml, reloaded_yaml, source));
  for (const ChangedKey& c : changed_section_keys(docs, "ingest")) {
    if (reloadable_key(c.key)) continue;
    return refused_section_key(source, c, "ingest", reloadable_ingest_keys());
  }
  IngestReload change;
  take_reloadable_ingest_settings(reloaded, change.after);
  // The running values, as the config reader took them when the job started (or at the last reload):
  // an unset key has its default.
  const YAML::Node running_ingest = docs.running.IsMap() ? docs.running["ingest"] : YAML::Node();
  for (const auto& [key, value] : mapping_keys(running_ingest)) {
    if (const ReloadableIngestKey* k = reloadable_key(key); k && !value.IsNull()) k->read(value, change.before);
  }
  change.keys = changed_ingest_settings(change.before, change.after);
  return change;
}

std::string describe_ingest_reload(const IngestReload& change) {
  std::string out;
  for (const std::string& k : change.keys) out += (out.empty() ? "ingest." : ", ingest.") + k;
  return out.empty() ? out : out + " changed";
}

}  // namespace vapipe
