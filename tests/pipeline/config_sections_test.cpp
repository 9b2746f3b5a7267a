#include "pipeline/config_sections.h"

#include <gtest/gtest.h>

namespace vapipe {
namespace {

// The same settings written in another style (an edit that reformats a section) are the same.
TEST(ConfigSections, ValuesCompareAsTheConfigReaderTakesThemNotAsWritten) {
  EXPECT_EQ(canonical_yaml(YAML::Load("{a: 1, b: [x, {c: 2}]}")),
            canonical_yaml(YAML::Load("b:\n  - 'x'\n  - c: \"2\"\na: 1\n")));
  EXPECT_EQ(canonical_yaml(YAML::Load("x: &d {a: 1}\ny: {<<: *d, b: 2}\n")["y"]), canonical_yaml(YAML::Load("{b: 2, a: 1}")));
  EXPECT_NE(canonical_yaml(YAML::Load("{a: 1}")), canonical_yaml(YAML::Load("{a: 2}")));
  EXPECT_NE(canonical_yaml(YAML::Load("[a, b]")), canonical_yaml(YAML::Load("[b, a]")));
  EXPECT_EQ(canonical_yaml(YAML::Node()), canonical_yaml(YAML::Load("~")));
}

TEST(ConfigSections, ChangedKeysOfASectionCarryBothValuesAndTheReloadedLine) {
  auto docs = load_config_documents("x-d: &d {reconnect_attempts: 3}\ningest: {<<: *d, max_fps: 5, decoder: cpu}\n",
                                    "job: {mode: live}\ningest:\n  max_fps: 5\n  reconnect_attempts: 4\n", "job.yaml");
  ASSERT_TRUE(docs.ok()) << docs.status().message();
  const std::vector<ChangedKey> changed = changed_section_keys(*docs, "ingest");
  ASSERT_EQ(changed.size(), 2u);
  EXPECT_EQ(changed[0].key, "decoder");  // went: the section's line
  EXPECT_EQ(changed[0].running.Scalar(), "cpu");
  EXPECT_TRUE(changed[0].reloaded.IsNull());
  EXPECT_EQ(where_in("job.yaml", changed[0].line), "job.yaml:2");
  EXPECT_EQ(changed[1].key, "reconnect_attempts");  // merged in before, its own now
  EXPECT_EQ(changed[1].running.Scalar(), "3");
  EXPECT_EQ(changed[1].reloaded.Scalar(), "4");
  EXPECT_EQ(where_in("job.yaml", changed[1].line), "job.yaml:4");
  // A section that is not there on either side has nothing changed; one that went, each of its keys.
  EXPECT_TRUE(changed_section_keys(*docs, "publish").empty());
  auto gone = load_config_documents("ingest: {max_fps: 5}\n", "job: {mode: live}\n", "job.yaml");
  ASSERT_TRUE(gone.ok());
  const std::vector<ChangedKey> all = changed_section_keys(*gone, "ingest");
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(where_in("job.yaml", all[0].line), "job.yaml");
  EXPECT_FALSE(load_config_documents("a: [", "b: 1", "job.yaml").ok());
}

}  // namespace
}  // namespace vapipe
