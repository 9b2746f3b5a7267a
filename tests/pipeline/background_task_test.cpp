#include "pipeline/background_task.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

namespace vapipe {
namespace {

// A read of a share that does not answer until it is let go.
struct Gate {
  std::mutex mutex;
  std::condition_variable changed;
  bool open = false;
  bool entered = false;
  bool left = false;

  void pass() {
    std::unique_lock<std::mutex> lock(mutex);
    entered = true;
    changed.notify_all();
    changed.wait(lock, [&] { return open; });
    left = true;
    changed.notify_all();
  }
  bool wait_entered() {
    std::unique_lock<std::mutex> lock(mutex);
    return changed.wait_for(lock, std::chrono::seconds(10), [&] { return entered; });
  }
  void let_go() {
    std::lock_guard<std::mutex> lock(mutex);
    open = true;
    changed.notify_all();
  }
  bool wait_left() {
    std::unique_lock<std::mutex> lock(mutex);
    return changed.wait_for(lock, std::chrono::seconds(10), [&] { return left; });
  }
};

template <typename T>
std::optional<T> wait_finished(BackgroundTask<T>& task) {
  for (int k = 0; k < 1000; ++k) {
    if (auto r = task.finished()) return r;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return std::nullopt;
}

std::string no_exception(const std::string& what) { return "unexpected: " + what; }

TEST(BackgroundTask, RunsOffTheCallersThreadOneAtATimeAndGivesItsResultOnce) {
  auto gate = std::make_shared<Gate>();
  BackgroundTask<std::string> task;
  EXPECT_FALSE(task.busy());
  EXPECT_FALSE(task.finished().has_value());
  EXPECT_EQ(task.running_s(BackgroundTask<std::string>::Clock::now()), 0);
  const auto start = BackgroundTask<std::string>::Clock::now();
  const auto caller = std::this_thread::get_id();
  auto ran_on = std::make_shared<std::thread::id>();
  ASSERT_TRUE(task.start(
      [gate, ran_on] {
        *ran_on = std::this_thread::get_id();
        gate->pass();
        return std::string("the config");
      },
      no_exception, start));
  ASSERT_TRUE(gate->wait_entered());  // start() returned while the work waits
  EXPECT_TRUE(task.busy());
  EXPECT_FALSE(task.start([] { return std::string("second"); }, no_exception));  // one at a time
  EXPECT_FALSE(task.finished().has_value());
  EXPECT_DOUBLE_EQ(task.running_s(start + std::chrono::seconds(40)), 40);
  gate->let_go();
  auto result = wait_finished(task);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(*result, "the config");
  EXPECT_NE(*ran_on, caller);
  EXPECT_FALSE(task.busy());
  EXPECT_FALSE(task.finished().has_value());  // taken once
  // Free again for the next.
  ASSERT_TRUE(task.start([] { return std::string("next"); }, no_exception));
  EXPECT_EQ(wait_finished(task).value_or(""), "next");
}

TEST(BackgroundTask, AnExceptionBecomesTheResultTheCallerMadeOfIt) {
  BackgroundTask<std::string> task;
  ASSERT_TRUE(task.start([]() -> std::string { throw std::runtime_error("Input/output error"); },
                         [](const std::string& what) { return "cannot be read: " + what; }));
  EXPECT_EQ(wait_finished(task).value_or(""), "cannot be read: Input/output error");
  ASSERT_TRUE(task.start([]() -> std::string { throw 42; }, [](const std::string& what) { return what; }));
  EXPECT_EQ(wait_finished(task).value_or(""), "an exception that is not a std::exception");
}

TEST(BackgroundTask, ATaskThatHasNotEndedIsLeftToItsThreadWhenItsOwnerGoes) {
  auto gate = std::make_shared<Gate>();
  {
    BackgroundTask<int> task;
    ASSERT_TRUE(task.start(
        [gate] {
          gate->pass();
          return 1;
        },
        [](const std::string&) { return 0; }));
    ASSERT_TRUE(gate->wait_entered());
  }  // would hang here if the owner joined its thread
  gate->let_go();
  EXPECT_TRUE(gate->wait_left());  // the left thread ends on its own, its result dropped
}

TEST(BackgroundTask, ATaskThatHasEndedIsJoinedWhenItsOwnerGoesUntaken) {
  auto gate = std::make_shared<Gate>();
  gate->let_go();
  auto task = std::make_unique<BackgroundTask<int>>();
  ASSERT_TRUE(task->start(
      [gate] {
        gate->pass();
        return 7;
      },
      [](const std::string&) { return 0; }));
  ASSERT_TRUE(gate->wait_left());
  task.reset();  // joined: a std::thread still joinable here would be std::terminate
  EXPECT_EQ(task, nullptr);
}

}  // namespace
}  // namespace vapipe
