#include "pipeline/publish_reload.h"

#include <gtest/gtest.h>

#include "pipeline/config.h"

namespace vapipe {
namespace {

// A config whose publish section is `publish` (indented under `publish:`), after `before`.
std::string with_publish(const std::string& publish, const std::string& before = "") {
  return before + "job: {mode: live}\nstreams: [{id: a, uri: 'test://ball'}]\npublish:\n" + publish;
}

PublishReload compared(const std::string& running, const std::string& reloaded) {
  auto change = compare_publish_sections(running, reloaded, "job.yaml");
  EXPECT_TRUE(change.ok()) << change.status().message();
  return change.ok() ? *change : PublishReload{};
}

std::string refused(const std::string& running, const std::string& reloaded) {
  auto change = compare_publish_sections(running, reloaded, "job.yaml");
  return change.ok() ? std::string("(taken)") : change.status().message();
}

TEST(PublishReload, OutputsWithTheSameSettingsAreKeptWhereverTheyMoveAndTheOthersComeAndGo) {
  const std::string a = "    - {url: 'http://h/a', topics: [events/]}\n";
  const std::string b = "    - {url: 'http://h/b'}\n";
  const std::string c = "    - url: http://h/c\n      labels: [person]\n";
  const std::string d = "    - {url: 'http://h/d'}\n";
  const PublishReload change = compared(with_publish("  webhooks:\n" + a + b + c),
                                        with_publish("  webhooks:\n" + b + d + c));
  ASSERT_EQ(change.webhooks.kept_from.size(), 3u);
  EXPECT_EQ(change.webhooks.kept_from[0], std::optional<size_t>(1));  // b moved up
  EXPECT_FALSE(change.webhooks.kept_from[1].has_value());            // d is new
  EXPECT_EQ(change.webhooks.kept_from[2], std::optional<size_t>(2));  // c stayed
  EXPECT_EQ(change.webhooks.removed, std::vector<size_t>{0});         // a went
  EXPECT_TRUE(change.changed());
  EXPECT_FALSE(change.mqtt.changed());
  EXPECT_EQ(describe_publish_reload(change), "publish.webhooks added [1], removed [0], [1] is [0]");
  // A setting of an entry changed: the old one goes, a new one comes (at the same place).
  const std::string b_text = "    - {url: 'http://h/b', format: text}\n";
  const PublishReload edited = compared(with_publish("  webhooks:\n" + a + b), with_publish("  webhooks:\n" + a + b_text));
  EXPECT_EQ(edited.webhooks.kept_from[0], std::optional<size_t>(0));
  EXPECT_FALSE(edited.webhooks.kept_from[1].has_value());
  EXPECT_EQ(edited.webhooks.removed, std::vector<size_t>{1});
  // Two equal entries keep one each; the same list written another way (flow or block style) is unchanged.
  const PublishReload twice = compared(with_publish("  webhooks:\n" + b + b), with_publish("  webhooks:\n" + b + b + b));
  EXPECT_EQ(twice.webhooks.kept_from[0], std::optional<size_t>(0));
  EXPECT_EQ(twice.webhooks.kept_from[1], std::optional<size_t>(1));
  EXPECT_FALSE(twice.webhooks.kept_from[2].has_value());
  EXPECT_FALSE(compared(with_publish("  webhooks:\n" + b), with_publish("  webhooks:\n    - url: 'http://h/b'\n")).changed());
}

TEST(PublishReload, BrokersServersAndSegmentsSettingsChangeAndPublishAppearsOrGoesWhole) {
  const PublishReload change =
      compared(with_publish("  segments_min_frames: 3\n  mqtt: [{url: 'mqtt://b:1883'}]\n"
                            "  kafka: [{url: 'kafka://k1'}, {url: 'kafka://k2'}]\n"),
               with_publish("  segments_min_frames: 5\n  segments_labels: each\n  redis: [{url: 'redis://r'}]\n"
                            "  kafka: [{url: 'kafka://k2'}]\n"));
  EXPECT_EQ(change.mqtt.removed, std::vector<size_t>{0});
  EXPECT_EQ(change.redis.kept_from.size(), 1u);
  EXPECT_EQ(change.kafka.kept_from, (std::vector<std::optional<size_t>>{1}));
  EXPECT_EQ(change.kafka.removed, std::vector<size_t>{0});
  EXPECT_EQ(change.segment_keys, (std::vector<std::string>{"segments_labels", "segments_min_frames"}));
  EXPECT_EQ(describe_publish_reload(change),
            "publish.mqtt removed [0]; publish.redis added [0]; publish.kafka removed [0], [1] is [0]; "
            "publish.segments_labels, publish.segments_min_frames changed");
  // No publish section at all, then one with a webhook: added; and back.
  const std::string none = "job: {mode: live}\nstreams: [{id: a, uri: 'test://ball'}]\n";
  const std::string one = with_publish("  webhooks: [{url: 'http://h/a'}]\n");
  EXPECT_EQ(compared(none, one).webhooks.kept_from.size(), 1u);
  EXPECT_EQ(compared(one, none).webhooks.removed, std::vector<size_t>{0});
  EXPECT_FALSE(compared(none, none).changed());
  EXPECT_EQ(describe_publish_reload(compared(none, none)), "");
}

TEST(PublishReload, TheRestOfPublishIsRefusedNamingTheSettingAndItsLine) {
  const std::string running = with_publish("  endpoint: tcp://127.0.0.1:5560\n  webhooks: [{url: 'http://h/a'}]\n");
  const std::string moved = with_publish("  endpoint: tcp://127.0.0.1:5561\n  webhooks: []\n");
  const std::string why = refused(running, moved);
  EXPECT_NE(why.find("job.yaml:4: `publish.endpoint` changed"), std::string::npos) << why;
  EXPECT_NE(why.find("restart the job"), std::string::npos) << why;
  EXPECT_NE(why.find("webhooks, mqtt, redis, kafka, segments_min_frames"), std::string::npos) << why;
  // A key that goes (back to its default) is a change too: named at the section's line.
  const std::string without = with_publish("  webhooks: [{url: 'http://h/a'}]\n");
  EXPECT_NE(refused(running, without).find("job.yaml:3: `publish.endpoint` changed"), std::string::npos)
      << refused(running, without);
  EXPECT_NE(refused(running, "publish: [").find("YAML"), std::string::npos);
}

// Settings merged from an anchor (`<<: *defaults`) count where they are merged: an anchor's edit that
// changes publish's address is refused; one that changes a webhook's settings changes that webhook.
TEST(PublishReload, SettingsMergedFromAnAnchorAreComparedAsMerged) {
  auto config = [](const std::string& endpoint, const std::string& format) {
    return with_publish("  <<: *bus\n  webhooks:\n    - <<: *hook\n      url: http://h/a\n",
                        "x-bus: &bus {endpoint: '" + endpoint + "'}\nx-hook: &hook {format: " + format + "}\n");
  };
  EXPECT_FALSE(compared(config("tcp://127.0.0.1:5560", "json"), config("tcp://127.0.0.1:5560", "json")).changed());
  EXPECT_NE(refused(config("tcp://127.0.0.1:5560", "json"), config("tcp://127.0.0.1:5561", "json"))
                .find("`publish.endpoint` changed"),
            std::string::npos);
  const PublishReload hook = compared(config("tcp://127.0.0.1:5560", "json"), config("tcp://127.0.0.1:5560", "text"));
  EXPECT_EQ(hook.webhooks.removed, std::vector<size_t>{0});
  EXPECT_FALSE(hook.webhooks.kept_from[0].has_value());
}

// The list of what publish takes is the list compared: each key named is taken.
TEST(PublishReload, EachReloadableKeyIsTakenFromTheReloadedSettings) {
  PublishConfig from, to;
  from.segments_min_frames = 7;
  from.segments_min_score = 0.25;
  from.segments_labels = "each";
  from.segments_skip_damaged = true;
  from.segments_reconnect_grace_s = 20;
  from.segments_picture_frame = "first";
  from.segments_pictures_keep_days = 3;
  from.webhooks.emplace_back();
  from.kafka.emplace_back();
  from.endpoint = "tcp://127.0.0.1:1";  // not reloadable
  const std::string endpoint = to.endpoint;
  take_reloadable_publish_settings(from, to);
  EXPECT_EQ(to.segments_min_frames, 7u);
  EXPECT_EQ(to.segments_min_score, 0.25);
  EXPECT_EQ(to.segments_labels, "each");
  EXPECT_TRUE(to.segments_skip_damaged);
  EXPECT_EQ(to.segments_reconnect_grace_s, 20);
  EXPECT_EQ(to.segments_picture_frame, "first");
  EXPECT_EQ(to.segments_pictures_keep_days, 3u);
  EXPECT_EQ(to.webhooks.size(), 1u);
  EXPECT_EQ(to.kafka.size(), 1u);
  EXPECT_EQ(to.endpoint, endpoint);
  EXPECT_EQ(reloadable_publish_keys().size(), 12u);
}

}  // namespace
}  // namespace vapipe
