// tools/examples/subscribe.py receives and decodes published batches (pyzmq + NumPy).
#include <gtest/gtest.h>

#include <fstream>

#include "tests/tools/tool_harness.h"
#include "tests/tools/test_messages.h"

namespace petdaq {
namespace {

using test::bin_dir;
using test::ScratchDir;

// The first Python with pyzmq and NumPy: `python3` on PATH, then the system's.
std::string python_with_zmq() {
  for (const char* py : {"python3", "/usr/bin/python3"}) {
    const std::string cmd =
        std::string(py) + " -c 'import zmq, numpy' > /dev/null 2>&1";
    if (std::system(cmd.c_str()) == 0) {
      if (std::string(py).find('/') != std::string::npos) return py;
      FILE* p = ::popen("command -v python3", "r");
      char buf[512] = {};
      if (p && std::fgets(buf, sizeof buf, p)) {
        ::pclose(p);
        std::string path(buf);
        while (!path.empty() && (path.back() == '\n')) path.pop_back();
        return path;
      }
      if (p) ::pclose(p);
    }
  }
  return {};
}

TEST(SubscribeExample, DecodesEachBatchIntoItsFields) {
  const std::string python = python_with_zmq();
  if (python.empty()) GTEST_SKIP() << "no python3 with pyzmq and NumPy (python3-zmq, python3-numpy)";
  ScratchDir dir;
  const std::string endpoint = dir.ipc("coinc");
  // The endpoint comes from the configuration, as petdaqd would publish on it.
  const auto config = dir / "petdaq.yaml";
  std::ofstream(config) << "output:\n  zmq:\n    send_hwm: 1000\n    endpoint: \"" << endpoint
                        << "\"\n";
  test::Child example({python, (test::source_dir() / "tools" / "examples" / "subscribe.py").string(),
                       "--config", config.string(), "--count", "6", "--timeout-s", "20"},
                      dir / "py.out", dir / "py.err");
  ASSERT_EQ(test::run_command({(bin_dir() / "petdaq-test-publisher").string(), "--endpoint",
                               endpoint, "--wait-subscriptions", "2", "--batches", "3"},
                              dir / "pub.out", dir / "pub.err", std::chrono::seconds(60)),
            0);
  ASSERT_EQ(example.wait_for(std::chrono::seconds(30)), 0) << test::read_text(dir / "py.err");
  const std::string out = test::read_text(dir / "py.out");
  // Batch 2 of each kind: 5 records; the first record's fields as test_messages.h makes them.
  const auto prompts = test::test_batch_records(MessageKind::prompts, 2);
  ASSERT_EQ(prompts.size(), 5u);
  EXPECT_NE(out.find("coinc.prompt id=2 run=3 slice=2 t=[2000,3000) records=5 first: "
                     "time_a=2000 dt=0 crystals=(200,207) energies=(511.0,480.5) flags=0x0200"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("coinc.delayed id=1 run=3 slice=1 t=[1000,2000) records=4 first: "
                     "time_a=1000 dt=0 crystals=(100,107) energies=(511.0,480.5) flags=0x0201"),
            std::string::npos)
      << out;
  // Mean of energy_a + energy_b over a batch: 511 + j + 480.5 - j = 991.5 for every record.
  EXPECT_NE(out.find("mean_energy_sum=991.50"), std::string::npos) << out;
  int lines = 0;
  for (char c : out) lines += c == '\n';
  EXPECT_EQ(lines, 6) << out;
}

}  // namespace
}  // namespace petdaq
