#include "model/io/units_parse.h"

#include <gtest/gtest.h>

namespace moeperf::io {
namespace {

TEST(UnitsParse, TheIssueExamples) {
  EXPECT_DOUBLE_EQ(parse_bandwidth("900 GB/s").value(), 900e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("400 Gb/s").value(), 400e9 / 8);
  EXPECT_DOUBLE_EQ(parse_bytes("186 GB").value(), 186e9);
  EXPECT_DOUBLE_EQ(parse_bytes("189471 MiB").value(), 189471.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(parse_flop_rate("2.5 PFLOPS").value(), 2.5e15);
}

TEST(UnitsParse, OtherForms) {
  EXPECT_DOUBLE_EQ(parse_bandwidth("8 TB/s").value(), 8e12);
  EXPECT_DOUBLE_EQ(parse_bandwidth("800Gbps").value(), 100e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("1 GiB/s").value(), 1073741824.0);
  EXPECT_DOUBLE_EQ(parse_bytes("288 GiB").value(), 288.0 * 1073741824.0);
  EXPECT_DOUBLE_EQ(parse_bytes("1 Gbit").value(), 1e9 / 8);
  EXPECT_DOUBLE_EQ(parse_flop_rate("989 TFLOPS").value(), 989e12);
  EXPECT_DOUBLE_EQ(parse_flop_rate("989 TFLOP/s").value(), 989e12);
  EXPECT_DOUBLE_EQ(parse_flops("250.4 GFLOP").value(), 250.4e9);
  EXPECT_DOUBLE_EQ(parse_seconds("1.5 us").value(), 1.5e-6);
  EXPECT_DOUBLE_EQ(parse_seconds("200 ns").value(), 200e-9);
  EXPECT_DOUBLE_EQ(parse_seconds("5.76 s").value(), 5.76);
  EXPECT_DOUBLE_EQ(parse_seconds(" 3 ms ").value(), 3e-3);
}

TEST(UnitsParse, AUnitOfTheWrongKindSaysWhichKindItIs) {
  try {
    parse_bandwidth("900 GB");
    FAIL() << "no error";
  } catch (const UnitError& e) {
    EXPECT_STREQ(e.what(), "expected a bandwidth like \"900 GB/s\" or \"400 Gb/s\", got \"900 GB\" (a byte size)");
  }
  EXPECT_THROW(parse_bytes("900 GB/s"), UnitError);
  EXPECT_THROW(parse_flop_rate("2.5 PFLOP"), UnitError);
  EXPECT_THROW(parse_seconds("3 GB"), UnitError);
}

TEST(UnitsParse, RejectsMissingOrUnknownUnitsAndNegatives) {
  EXPECT_THROW(parse_bandwidth("900"), UnitError);
  EXPECT_THROW(parse_bandwidth("fast"), UnitError);
  EXPECT_THROW(parse_bandwidth("900 XB/s"), UnitError);
  EXPECT_THROW(parse_bytes("-1 GB"), UnitError);
  try {
    parse_bytes("12 parsecs");
    FAIL();
  } catch (const UnitError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown unit \"parsecs\""), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moeperf::io
