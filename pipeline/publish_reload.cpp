#include "pipeline/publish_reload.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <set>

#include "pipeline/config.h"
#include "pipeline/config_sections.h"

namespace vapipe {

namespace {

// The settings a reload changes in the running publish, with how each is taken.
struct ReloadablePublishKey {
  const char* key;
  void (*take)(const PublishConfig& from, PublishConfig& to);
};
template <auto Member>
void take_member(const PublishConfig& from, PublishConfig& to) {
  to.*Member = from.*Member;
}
const ReloadablePublishKey kReloadable[] = {
    {"webhooks", take_member<&PublishConfig::webhooks>},
    {"mqtt", take_member<&PublishConfig::mqtt>},
    {"redis", take_member<&PublishConfig::redis>},
    {"kafka", take_member<&PublishConfig::kafka>},
    {"segments_min_frames", take_member<&PublishConfig::segments_min_frames>},
    {"segments_min_score", take_member<&PublishConfig::segments_min_score>},
    {"segments_min_score_by_label", take_member<&PublishConfig::segments_min_score_by_label>},
    {"segments_labels", take_member<&PublishConfig::segments_labels>},
    {"segments_skip_damaged", take_member<&PublishConfig::segments_skip_damaged>},
    {"segments_reconnect_grace_s", take_member<&PublishConfig::segments_reconnect_grace_s>},
    {"segments_picture_frame", take_member<&PublishConfig::segments_picture_frame>},
    {"segments_pictures_keep_days", take_member<&PublishConfig::segments_pictures_keep_days>},
};

PublishReload::Outputs compare_outputs(const YAML::Node& running, const YAML::Node& reloaded) {
  auto entries = [](const YAML::Node& list) {
    std::vector<std::string> out;
    if (list.IsDefined() && list.IsSequence()) {
      for (const YAML::Node& entry : list) out.push_back(canonical_yaml(entry));
    }
    return out;
  };
  const std::vector<std::string> before = entries(running), after = entries(reloaded);
  PublishReload::Outputs outputs;
  outputs.running = before.size();
  std::vector<bool> taken(before.size(), false);
  // The same entry at the same place first, then anywhere: a list whose first entry was removed keeps
  // the others (renumbered), and two equal entries keep one each.
  outputs.kept_from.resize(after.size());
  for (size_t j = 0; j < after.size() && j < before.size(); ++j) {
    if (after[j] == before[j]) {
      outputs.kept_from[j] = j;
      taken[j] = true;
    }
  }
  for (size_t j = 0; j < after.size(); ++j) {
    if (outputs.kept_from[j]) continue;
    for (size_t i = 0; i < before.size(); ++i) {
      if (!taken[i] && before[i] == after[j]) {
        outputs.kept_from[j] = i;
        taken[i] = true;
        break;
      }
    }
  }
  for (size_t i = 0; i < before.size(); ++i) {
    if (!taken[i]) outputs.removed.push_back(i);
  }
  return outputs;
}

}  // namespace

const std::vector<std::string>& reloadable_publish_keys() {
  static const std::vector<std::string> keys = keys_of_table(kReloadable);
  return keys;
}

void take_reloadable_publish_settings(const PublishConfig& from, PublishConfig& to) {
  for (const ReloadablePublishKey& k : kReloadable) k.take(from, to);
}

bool PublishReload::Outputs::changed() const {
  if (!removed.empty() || kept_from.size() != running) return true;
  for (size_t j = 0; j < kept_from.size(); ++j) {
    if (kept_from[j] != j) return true;
  }
  return false;
}

Result<PublishReload> compare_publish_sections(const std::string& running_yaml, const std::string& reloaded_yaml,
                                               const std::string& source) {
  VAPIPE_ASSIGN_OR_RETURN(ConfigDocuments docs, load_config_documents(running_yaml, reloaded_yaml, source));
  PublishReload change;
  // Each list of outputs, entry by entry, changed or not (an unchanged list keeps each of its entries).
  auto publish_of = [](const YAML::Node& doc) { return mapping_keys(doc.IsMap() ? doc["publish"] : YAML::Node()); };
  const auto before = publish_of(docs.running), after = publish_of(docs.reloaded);
  auto list = [](const std::map<std::string, YAML::Node>& keys, const char* key) {
    auto it = keys.find(key);
    return it == keys.end() ? YAML::Node() : it->second;
  };
  for (auto [key, outputs] : {std::pair{"webhooks", &change.webhooks}, std::pair{"mqtt", &change.mqtt},
                              std::pair{"redis", &change.redis}, std::pair{"kafka", &change.kafka}}) {
    *outputs = compare_outputs(list(before, key), list(after, key));
  }
  const std::vector<std::string>& reloadable = reloadable_publish_keys();
  for (const ChangedKey& c : changed_section_keys(docs, "publish")) {
    if (c.key == "webhooks" || c.key == "mqtt" || c.key == "redis" || c.key == "kafka") {
      continue;  // (above)
    } else if (std::find(reloadable.begin(), reloadable.end(), c.key) != reloadable.end()) {
      change.segment_keys.push_back(c.key);
    } else {
      return refused_section_key(source, c, "publish", reloadable);
    }
  }
  return change;
}

std::string describe_publish_reload(const PublishReload& change) {
  std::string out;
  auto outputs = [&](const char* name, const PublishReload::Outputs& o) {
    if (!o.changed()) return;
    std::string added, moved, removed;
    for (size_t j = 0; j < o.kept_from.size(); ++j) {
      if (!o.kept_from[j]) {
        added += (added.empty() ? "[" : ", [") + std::to_string(j) + "]";
      } else if (*o.kept_from[j] != j) {
        moved += (moved.empty() ? "[" : ", [") + std::to_string(*o.kept_from[j]) + "] is [" + std::to_string(j) + "]";
      }
    }
    for (size_t i : o.removed) removed += (removed.empty() ? "[" : ", [") + std::to_string(i) + "]";
    std::string what;
    for (const auto& [label, text] : {std::pair<const char*, std::string&>{"added ", added},
                                      std::pair<const char*, std::string&>{"removed ", removed},
                                      std::pair<const char*, std::string&>{"", moved}}) {
      if (!text.empty()) what += (what.empty() ? "" : ", ") + std::string(label) + text;
    }
    out += (out.empty() ? "" : "; ") + std::string("publish.") + name + " " + what;
  };
  outputs("webhooks", change.webhooks);
  outputs("mqtt", change.mqtt);
  outputs("redis", change.redis);
  outputs("kafka", change.kafka);
  std::string settings;
  for (const std::string& key : change.segment_keys) settings += (settings.empty() ? "publish." : ", publish.") + key;
  if (!settings.empty()) out += (out.empty() ? "" : "; ") + settings + " changed";
  return out;
}

}  // namespace vapipe
