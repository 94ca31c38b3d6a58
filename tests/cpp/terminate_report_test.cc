// The std::terminate report (common/terminate_report.h): which thread, and a
// backtrace, before the usual line and the abort.
#include <gtest/gtest.h>
#include <pthread.h>

#include <thread>

#include "common/terminate_report.h"

namespace bps {
namespace {

void DestroyAJoinableThreadNamed(const char* name) {
  InstallTerminateReport();
  std::thread worker([name] {
    pthread_setname_np(pthread_self(), name);
    // The thread object below dies while this one still runs: std::terminate.
    std::this_thread::sleep_for(std::chrono::seconds(5));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  { std::thread doomed = std::move(worker); }
}

TEST(TerminateReportDeathTest, NamesTheThreadAndPrintsABacktrace) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  pthread_setname_np(pthread_self(), "bps-test-main");
  EXPECT_DEATH(DestroyAJoinableThreadNamed("bps-worker"),
               "byteps-native: std::terminate in thread 'bps-test-main' \\(pid [0-9]+\\); native backtrace:"
               "(.|\n)*terminate called without an active exception");
}

TEST(TerminateReport, InstallingTwiceKeepsOneHandler) {
  InstallTerminateReport();
  std::terminate_handler first = std::get_terminate();
  InstallTerminateReport();
  EXPECT_EQ(std::get_terminate(), first);
}

}  // namespace
}  // namespace bps
