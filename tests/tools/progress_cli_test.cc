// Progress of long work: one line per 10% when stderr is not a terminal (tests, logs), nothing
// with --quiet; perplexity shows its running value and standard error as it goes.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "support/test_support.h"

namespace hz {
namespace {

// HORIZON_PROGRESS_DELAY_MS=0: show progress even for the short work of the test models.
std::string bin() { return "HORIZON_PROGRESS_DELAY_MS=0 " + std::string(HORIZON_BINARY); }

std::string small_corpus() {
  std::string path = test::make_temp_dir("progress") + "/c.txt";
  std::ifstream in(test::testdata_path("corpus/stories260K-samples.txt"));
  std::string text(3000, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  std::ofstream(path) << text;
  return path;
}

int count_lines_starting(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) n += line.rfind(prefix, 0) == 0;
  return n;
}

TEST(ProgressCliTest, PerplexityShowsRunningValueOneLinePerTenPercent) {
  const std::string args = " perplexity -m " + test::model_path("stories260K-q8_0.gguf") + " -f " + small_corpus() + " --ctx 64";
  std::string out, err;
  ASSERT_EQ(test::run_command(bin() + args, &out, &err), 0) << err;
  // 20 windows: at most one line per decile (0% .. 100%), each with the running perplexity.
  const int lines = count_lines_starting(err, "perplexity windows: ");
  EXPECT_GE(lines, 10) << err;
  EXPECT_LE(lines, 11) << err;
  EXPECT_TRUE(std::regex_search(err, std::regex(R"(perplexity windows: 100% \(20/20, [0-9.]+ s\) ppl [0-9.]+ ± [0-9.]+)"))) << err;
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(perplexity: [0-9.]+ ± [0-9.]+)"))) << out;
  // Loading a quantized model packs its weights: that is reported too.
  EXPECT_NE(err.find("packing weights: 100%"), std::string::npos) << err;
  EXPECT_EQ(err.find('\r'), std::string::npos) << "no bar redraws outside a terminal";

  ASSERT_EQ(test::run_command(bin() + args + " --quiet", &out, &err), 0) << err;
  EXPECT_EQ(err, "");
}

TEST(ProgressCliTest, SynthReportsTensorsWritten) {
  std::string dir = test::make_temp_dir("progress-synth");
  const std::string args =
      " synth -o " + dir + "/m.gguf --layers 2 --hidden 64 --heads 4 --kv-heads 2 --ffn 128 --vocab 300 --type q8_0";
  std::string out, err;
  ASSERT_EQ(test::run_command(bin() + args, &out, &err), 0) << err;
  EXPECT_NE(err.find("writing tensors: 100% (21/21"), std::string::npos) << err;
  ASSERT_EQ(test::run_command(bin() + args + " --quiet", &out, &err), 0) << err;
  EXPECT_EQ(err, "");
}

TEST(ProgressCliTest, ShortWorkShowsNothingByDefault) {
  // Without the override, work under a second prints no progress (run's stderr stays one line).
  std::string out, err;
  ASSERT_EQ(test::run_command(std::string(HORIZON_BINARY) + " run -m " + test::model_path("stories260K-q8_0.gguf") +
                                  " -p 'Once upon' -n 4 --temp 0",
                              &out, &err),
            0)
      << err;
  EXPECT_EQ(err.find("packing weights"), std::string::npos) << err;
}

}  // namespace
}  // namespace hz
