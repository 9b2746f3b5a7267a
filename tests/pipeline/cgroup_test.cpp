#include "pipeline/cgroup.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace vapipe {
namespace {

namespace fs = std::filesystem;

// A cgroup mount of our own, with the files the kernel would show.
class CgroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("vapipe-cgroup-test-" + std::to_string(getpid()));
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  void write(const std::string& relative, const std::string& text) {
    const fs::path path = root_ / relative;
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text << "\n";
  }
  std::string root() const { return root_.string(); }
  fs::path root_;
};

// cgroup v2, as in a container or a systemd unit: the tightest level holds, whether the limit is
// the process's own cgroup's or a parent's.
TEST_F(CgroupTest, V2PidsLimitTheTightestLevelHolds) {
  write("cgroup.controllers", "cpuset cpu io memory pids");
  write("pids.max", "max");
  write("system.slice/pids.max", "5000");
  write("system.slice/pids.current", "4900");
  write("system.slice/cam.service/pids.max", "1024");
  write("system.slice/cam.service/pids.current", "24");
  const std::string self = "0::/system.slice/cam.service\n";
  const auto dirs = cgroup_dirs("pids", self, root());
  ASSERT_EQ(dirs.size(), 3u);
  EXPECT_EQ(dirs[0], root() + "/system.slice/cam.service");
  EXPECT_EQ(dirs[2], root());
  TaskLimit limit = cgroup_task_limit(dirs);
  EXPECT_EQ(limit.max, 5000u);  // the parent has 100 left, the unit 1,000
  EXPECT_EQ(limit.in_use, 4900u);
  EXPECT_EQ(limit.room(), 100u);
  EXPECT_NE(limit.where.find(root() + "/system.slice/pids.max"), std::string::npos) << limit.where;
  write("system.slice/pids.current", "100");
  limit = cgroup_task_limit(dirs);
  EXPECT_EQ(limit.max, 1024u);
  EXPECT_EQ(limit.room(), 1000u);
  // No limit at any level ("max"), or a controller that is not enabled: none found.
  write("system.slice/pids.max", "max");
  write("system.slice/cam.service/pids.max", "max");
  EXPECT_EQ(cgroup_task_limit(dirs).max, 0u);
  EXPECT_TRUE(cgroup_dirs("hugetlb", self, root()).empty());
}

// cgroup v1, one mount per controller (Docker on an older host): this machine's own layout.
TEST_F(CgroupTest, V1PidsAndCpuQuotaAreReadFromTheirOwnMounts) {
  write("pids/docker/abc/pids.max", "512");
  write("pids/docker/abc/pids.current", "12");
  write("cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "150000");
  write("cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000");
  write("cpu,cpuacct/cpu.cfs_quota_us", "-1");
  write("cpu,cpuacct/cpu.cfs_period_us", "100000");
  const std::string self = "12:pids:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n";
  const TaskLimit limit = cgroup_task_limit(cgroup_dirs("pids", self, root()));
  EXPECT_EQ(limit.max, 512u);
  EXPECT_EQ(limit.room(), 500u);
  const auto cpu = cgroup_dirs("cpu", self, root());
  ASSERT_EQ(cpu.size(), 3u);
  EXPECT_EQ(cpu[0], root() + "/cpu,cpuacct/docker/abc");
  EXPECT_EQ(cgroup_cpu_quota(cpu), 2u);  // 1.5 CPUs of time: 2 threads keep it busy
}

TEST_F(CgroupTest, V2CpuQuotaIsTheTightestLevelsRoundedUp) {
  write("cgroup.controllers", "cpu pids");
  write("cpu.max", "max 100000");
  write("kubepods/cpu.max", "800000 100000");
  write("kubepods/pod1/cpu.max", "250000 100000");
  const auto dirs = cgroup_dirs("cpu", "0::/kubepods/pod1\n", root());
  EXPECT_EQ(cgroup_cpu_quota(dirs), 3u);
  write("kubepods/pod1/cpu.max", "max 100000");
  EXPECT_EQ(cgroup_cpu_quota(dirs), 8u);
  write("kubepods/cpu.max", "max 100000");
  EXPECT_EQ(cgroup_cpu_quota(dirs), 0u);  // no quota
  write("kubepods/pod1/cpu.max", "20000 100000");
  EXPECT_EQ(cgroup_cpu_quota(dirs), 1u);  // a fifth of a CPU: still one thread
}

// A stage killed by the kernel's out-of-memory killer is said so (before: "killed by signal 9", as a
// person's kill -9): its count in /proc/vmstat, and the memory limit the cgroups set (v2 and v1).
TEST_F(CgroupTest, OutOfMemoryKillsAndTheTightestMemoryLimitAreRead) {
  EXPECT_EQ(vmstat_oom_kills("nr_free_pages 1000\noom_kill 3\nnr_zone_active_anon 7\n"), 3u);
  EXPECT_EQ(vmstat_oom_kills("nr_free_pages 1000\n"), 0u);  // a kernel before 4.13
  write("cgroup.controllers", "memory pids");
  write("memory.max", "max");
  write("docker/memory.max", "1073741824");
  write("docker/abc/memory.max", "314572800");
  const auto v2 = cgroup_dirs("memory", "0::/docker/abc\n", root());
  EXPECT_EQ(cgroup_memory_limit(v2), 314572800u);
  write("docker/abc/memory.max", "max");
  EXPECT_EQ(cgroup_memory_limit(v2), 1073741824u);
  fs::remove_all(root_);
  write("memory/memory.limit_in_bytes", "9223372036854771712");  // v1's "none"
  write("memory/qa/memory.limit_in_bytes", "314572800");
  const auto v1 = cgroup_dirs("memory", "4:memory:/qa\n0::/\n", root());
  EXPECT_EQ(cgroup_memory_limit(v1), 314572800u);
  write("memory/qa/memory.limit_in_bytes", "9223372036854771712");
  EXPECT_EQ(cgroup_memory_limit(v1), 0u);
}

TEST(TaskLimit, TheShortfallNamesTheLimitAndHowToRaiseIt) {
  const TaskLimit limit{1024, 124, "cgroup pids.max (/sys/fs/cgroup/pids.max)"};
  EXPECT_EQ(task_shortfall(900, limit, "ingest lane 0: its 90 streams"), "");
  EXPECT_EQ(threads_needed(120, 0, 0, 1, kThreadsPerIngestProcess), 1232u);
  EXPECT_EQ(threads_needed(0, 30, 10, 1, 0), 210u);  // files, test sources
  EXPECT_EQ(threads_needed(2, 3, 10, 4, 0), 20u + 18u + 30u + 5u * 3u);  // each decoder's 3 more threads
  const std::string text = task_shortfall(threads_needed(120, 0, 0, 1, kThreadsPerIngestProcess), limit,
                                          "ingest lane 0: its 120 streams (120 from the network)");
  EXPECT_NE(text.find("ingest lane 0: its 120 streams (120 from the network) need about 1232 threads, but only 900 "
                      "more may start here (cgroup pids.max (/sys/fs/cgroup/pids.max): 1024, 124 in use)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("--pids-limit"), std::string::npos) << text;
  EXPECT_EQ(task_shortfall(1u << 30, TaskLimit{}, "any"), "");  // no limit found: nothing to say
  // This machine: whatever holds, it is one of the three, and this test's threads are among its tasks.
  const TaskLimit here = task_limit();
  if (here.max > 0) {
    EXPECT_GE(here.max, own_thread_count());
    EXPECT_FALSE(here.where.empty());
  }
  EXPECT_GE(own_thread_count(), 1u);
}

}  // namespace
}  // namespace vapipe
