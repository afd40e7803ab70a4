#include "model/units.h"

#include <gtest/gtest.h>

namespace moeperf {
namespace {

TEST(Units, DecimalAndBinaryBytesAreDistinct) {
  EXPECT_DOUBLE_EQ(gigabytes(1).value(), 1e9);
  EXPECT_DOUBLE_EQ(gibibytes(1).value(), 1073741824.0);  // 2^30
  EXPECT_DOUBLE_EQ(mebibytes(189471).value(), 189471.0 * 1048576.0);
  EXPECT_DOUBLE_EQ(terabytes(1).value(), 1e12);
  EXPECT_DOUBLE_EQ(tebibytes(1).value(), 1099511627776.0);  // 2^40
}

TEST(Units, BitsAreAnEighthOfBytes) {
  EXPECT_DOUBLE_EQ(gigabits_per_second(400).value(), 400e9 / 8);
  EXPECT_DOUBLE_EQ(gigabits_per_second(800).value(), gigabytes_per_second(100).value());
  EXPECT_DOUBLE_EQ(in_gigabits_per_second(gigabytes_per_second(50)), 400.0);
}

TEST(Units, CrossKindArithmeticFollowsThePhysics) {
  const Seconds t = gibibytes(64) / gigabytes_per_second(900);
  EXPECT_DOUBLE_EQ(t.value(), 64.0 * 1073741824.0 / 900e9);
  const Seconds g = teraflops(3.85) / petaflops_per_second(2.5);
  EXPECT_DOUBLE_EQ(g.value(), 3.85e12 / 2.5e15);
  EXPECT_DOUBLE_EQ((gigabits_per_second(800) * seconds(1)).value(), 100e9);
  EXPECT_DOUBLE_EQ((gigabytes(10) / seconds(2)).value(), 5e9);
  EXPECT_DOUBLE_EQ((teraflops(10) / seconds(4)).value(), 2.5e12);
  EXPECT_DOUBLE_EQ((petaflops_per_second(2) * milliseconds(1)).value(), 2e12);
}

TEST(Units, SameKindArithmeticAndComparison) {
  EXPECT_DOUBLE_EQ((microseconds(1) + nanoseconds(500)).value(), 1.5e-6);
  EXPECT_DOUBLE_EQ((gigabytes(3) - gigabytes(1)).value(), 2e9);
  EXPECT_DOUBLE_EQ((gigabytes(3) * 2.0).value(), 6e9);
  EXPECT_DOUBLE_EQ(gigabytes(3) / gigabytes(1.5), 2.0);
  EXPECT_LT(gigabytes(1), gibibytes(1));
  EXPECT_DOUBLE_EQ(in_gibibytes(gibibytes(3)), 3.0);
  EXPECT_DOUBLE_EQ(in_teraflops_per_second(petaflops_per_second(2.5)), 2500.0);
}

}  // namespace
}  // namespace moeperf
