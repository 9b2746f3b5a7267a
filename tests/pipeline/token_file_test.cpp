#include "pipeline/token_file.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tests/fakes/process_temp_dir.h"

namespace vapipe {
namespace {

namespace fs = std::filesystem;

// The log lines said while `body` runs.
std::vector<std::string> said_while(const std::function<void()>& body) {
  auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(32);
  auto& sinks = spdlog::default_logger()->sinks();
  sinks.push_back(sink);
  body();
  sinks.erase(std::remove(sinks.begin(), sinks.end(), sink), sinks.end());
  return sink->last_formatted();
}

// A password or token file others may read is said once, with the chmod that keeps it private, as a
// CURVE secret key's is; one of its owner's alone is not.
TEST(TokenFile, ASecretFileOthersMayReadIsSaidOnce) {
  const fs::path dir = testing::empty_temp_dir("token-file");
  const std::string open_to_all = (dir / "mqtt.password").string(), private_one = (dir / "hook.token").string();
  std::ofstream(open_to_all) << "s3cret\n";
  std::ofstream(private_one) << "t0ken\n";
  fs::permissions(open_to_all, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                                   fs::perms::others_read);
  fs::permissions(private_one, fs::perms::owner_read | fs::perms::owner_write);
  const auto said = said_while([&] {
    EXPECT_EQ(read_password_file(open_to_all).value(), "s3cret");
    EXPECT_EQ(read_password_file(open_to_all).value(), "s3cret");  // (read again: not said again)
    EXPECT_EQ(read_webhook_token_file(private_one).value(), "t0ken");
  });
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find(open_to_all + " can be read by other users; `chmod 600 " + open_to_all +
                         "` keeps the password private"), std::string::npos) << said[0];
}

}  // namespace
}  // namespace vapipe
