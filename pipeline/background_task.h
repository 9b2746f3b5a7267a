// Work that may take long or never end (a read of a network share whose server is gone: a hard NFS
// mount, a FUSE share whose daemon waits), run on a thread of its own so that the caller's loop goes on
// (`vapipe run`'s: a crashed stage's restart, a stop, signals). One task at a time. A task still running
// when its owner goes is left to its thread (detached, never joined: joining would hang the job's end);
// the process's exit still waits for it in the kernel (killably on NFS and SMB; a FUSE request that its
// daemon has taken, until it is answered).
//
// Users: the watched folders' looks (FolderLooker, pipeline/folder_watch.h) and a live job's reload
// on SIGHUP (the config file re-read, its globs expanded: pipeline/supervisor.cpp).
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

namespace vapipe {

template <typename T>
class BackgroundTask {
 public:
  using Clock = std::chrono::steady_clock;
  using Work = std::function<T()>;
  // Nothing may leave a thread's function (std::terminate, and the job with it): an exception thrown
  // by the work becomes this result, made from its what().
  using OnException = std::function<T(const std::string& what)>;

  BackgroundTask() = default;
  ~BackgroundTask() {
    if (!thread_.joinable()) return;
    if (shared_ && !is_done()) {
      thread_.detach();
    } else {
      thread_.join();
    }
  }
  BackgroundTask(const BackgroundTask&) = delete;
  BackgroundTask& operator=(const BackgroundTask&) = delete;

  // A task started and not yet taken by finished().
  bool busy() const { return shared_ != nullptr; }

  // Runs `work` on a thread of its own; false (nothing started) while a task runs. The work must own
  // what it uses (copies): it may outlive this object.
  bool start(Work work, OnException on_exception, Clock::time_point now = Clock::now()) {
    if (shared_) return false;
    if (thread_.joinable()) thread_.join();  // the last task's, ended
    shared_ = std::make_shared<Shared>();
    started_ = now;
    thread_ = std::thread([work = std::move(work), on_exception = std::move(on_exception), shared = shared_] {
      std::optional<T> result;
      try {
        result.emplace(work());
      } catch (const std::exception& e) {
        result.emplace(on_exception(e.what()));
      } catch (...) {
        result.emplace(on_exception("an exception that is not a std::exception"));
      }
      std::lock_guard<std::mutex> lock(shared->mutex);
      shared->result = std::move(result);
    });
    return true;
  }

  // The result of the task started last, once it has ended (the task is then free again).
  std::optional<T> finished() {
    if (!shared_) return std::nullopt;
    std::optional<T> result;
    {
      std::lock_guard<std::mutex> lock(shared_->mutex);
      if (!shared_->result) return std::nullopt;
      result = std::move(shared_->result);
    }
    shared_.reset();
    thread_.join();
    return result;
  }

  // How long the task under way has run at `now`; 0 when none is.
  double running_s(Clock::time_point now) const {
    if (!shared_) return 0;
    return std::chrono::duration<double>(now - started_).count();
  }

 private:
  struct Shared {
    std::mutex mutex;
    std::optional<T> result;  // set when the task ends
  };
  bool is_done() const {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    return shared_->result.has_value();
  }
  std::shared_ptr<Shared> shared_;  // the running task's; null when none
  std::thread thread_;
  Clock::time_point started_{};
};

}  // namespace vapipe
