// The engine's rank-agreement check (core/rank_agreement.h), which torch and
// TF both call through the C ABI: the kind's one hash, the rows and the error
// every rank raises.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/rank_agreement.h"

namespace bps {
namespace {

std::vector<int64_t> Table(const std::vector<std::vector<int64_t>>& rows) {
  std::vector<int64_t> table;
  for (const auto& row : rows) table.insert(table.end(), row.begin(), row.end());
  return table;
}

TEST(RankAgreement, KindCodeIsZlibCrc32PlusOneModuloAThousand) {
  // zlib.crc32(b"allreduce") == 0xe40d2187, zlib.crc32(b"") == 0.
  EXPECT_EQ(AgreementKindCode("allreduce"), 1 + 0xe40d2187u % 1000);
  EXPECT_EQ(AgreementKindCode(""), 1);
  EXPECT_NE(AgreementKindCode("allreduce"), AgreementKindCode("allgather"));
}

TEST(RankAgreement, EqualRowsAgreeAndAJoinedRankIsSkipped) {
  const auto row = AgreementRow("allreduce", "float32", false, {2, 3}, false, 1);
  ASSERT_EQ(row.size(), static_cast<size_t>(kAgreementSlots));
  const auto table = Table({row, std::vector<int64_t>(kAgreementSlots, 0), row});
  EXPECT_EQ(RanksDisagreement("allreduce", table.data(), 3, 0), "");
  EXPECT_EQ(RanksDisagreement("allreduce", table.data(), 3, 2), "");
}

TEST(RankAgreement, EveryRankRaisesTheSameErrorNamingEachTensor) {
  const auto table = Table({AgreementRow("allgather", "float32", false, {5, 3}, true, 0),
                            AgreementRow("allgather", "float32", true, {7, 4}, true, 0)});
  const std::string error = RanksDisagreement("allgather", table.data(), 2, 0);
  EXPECT_EQ(error, RanksDisagreement("allgather", table.data(), 2, 1));
  EXPECT_NE(error.find("allgather: ranks disagree"), std::string::npos) << error;
  EXPECT_NE(error.find("rank 0: float32 [*, 3], rank 1: non-CPU float32 [*, 4]"), std::string::npos) << error;
}

TEST(RankAgreement, ExtraAndUnknownDtypesAndGroupsAreDescribed) {
  const auto table = Table({AgreementRow("broadcast", "float64", false, {4}, false, 1 + 0),
                            AgreementRow("broadcast", "qint8", false, {4}, false, 1 + 1),
                            AgreementGroupRow("broadcast", 3, 99, 0)});
  const std::string error = RanksDisagreement("broadcast", table.data(), 3, 0);
  EXPECT_NE(error.find("rank 0: float64 [4] (0), rank 1: ? [4] (1), rank 2: a group of 3 tensors"),
            std::string::npos)
      << error;
}

}  // namespace
}  // namespace bps
