// The server's per-round agreement check (csrc/server/round_agreement.h):
// every term a push carries is compared with the round's first push, and a
// disagreement names both ranks and what differs.
#include <gtest/gtest.h>

#include <string>

#include "server/round_agreement.h"

namespace bps {
namespace {

MessageHeader Push(uint32_t rank) {
  MessageHeader h;
  h.type = static_cast<uint16_t>(MessageType::kPush);
  h.key = 42;
  h.name_hash = 7;
  h.round = 3;
  h.partition = 0;
  h.dtype = static_cast<uint8_t>(DataType::kFloat32);
  h.payload_bytes = 200;
  h.tensor_bytes = 200;
  h.sender_rank = rank;
  h.num_contributors = 2;
  h.signature = 0x1234;
  h.partition_bytes = 4096000;
  return h;
}

const ServerTerms kSyncServer{0, false};

void ExpectNames(const std::string& message, std::initializer_list<const char*> words) {
  EXPECT_FALSE(message.empty());
  for (const char* w : words) EXPECT_NE(message.find(w), std::string::npos) << "missing '" << w << "' in: " << message;
}

TEST(RoundAgreement, AgreeingPushesPass) {
  MessageHeader first = Push(0), second = Push(1);
  EXPECT_EQ(CheckPushTerms(first, nullptr, kSyncServer), "");
  EXPECT_EQ(CheckPushTerms(second, &first, kSyncServer), "");
  first.flags = second.flags = kFlagAverage;
  EXPECT_EQ(CheckPushTerms(second, &first, kSyncServer), "");
}

TEST(RoundAgreement, NamesElementCounts) {
  MessageHeader first = Push(0), second = Push(1);
  second.tensor_bytes = 240;
  second.signature = 0x9999;
  ExpectNames(CheckPushTerms(second, &first, kSyncServer),
              {"rank 0 pushed 50 elements (200 bytes", "rank 1 pushed 60 elements (240 bytes)"});
}

TEST(RoundAgreement, NamesDtypeWithoutAnElementClauseWhenCountsAgree) {
  MessageHeader first = Push(0), second = Push(1);
  second.dtype = static_cast<uint8_t>(DataType::kFloat64);
  second.tensor_bytes = 400;
  second.payload_bytes = 400;
  std::string m = CheckPushTerms(second, &first, kSyncServer);
  ExpectNames(m, {"rank 0 pushed float32 but rank 1 pushed float64"});
  EXPECT_EQ(m.find("elements"), std::string::npos) << m;
}

TEST(RoundAgreement, NamesAverageAgainstSum) {
  MessageHeader first = Push(0), second = Push(1);
  first.flags = kFlagAverage;
  first.signature = 0x5555;  // the signature includes the reduce op
  ExpectNames(CheckPushTerms(second, &first, kSyncServer),
              {"rank 0 averages it (average=True)", "rank 1 sums it (average=False)"});
  EXPECT_EQ(CheckPushTerms(second, &first, kSyncServer).find("shape"), std::string::npos);
}

TEST(RoundAgreement, NamesSameCountOtherShape) {
  MessageHeader first = Push(0), second = Push(1);
  second.signature = 0xabcd;
  ExpectNames(CheckPushTerms(second, &first, kSyncServer), {"same 50 elements in different shapes", "00001234"});
}

TEST(RoundAgreement, NamesBothPartitionSizes) {
  MessageHeader first = Push(0), second = Push(1);
  second.partition_bytes = 8192;
  second.payload_bytes = 8192;
  ExpectNames(CheckPushTerms(second, &first, kSyncServer),
              {"partitions of 4096000 bytes", "rank 1 into 8192 bytes", "BYTEPS_PARTITION_BYTES"});
}

TEST(RoundAgreement, NamesOtherSliceSizes) {
  MessageHeader first = Push(0), second = Push(1);
  second.payload_bytes = 100;
  ExpectNames(CheckPushTerms(second, &first, kSyncServer), {"200 bytes of partition 0", "pushed 100 bytes"});
}

TEST(RoundAgreement, NamesMachineCounts) {
  MessageHeader first = Push(0), second = Push(1);
  second.num_contributors = 3;
  ExpectNames(CheckPushTerms(second, &first, kSyncServer), {"counts 2 machines", "counts 3", "DMLC_NUM_WORKER"});
}

TEST(RoundAgreement, NamesRounds) {
  MessageHeader first = Push(0), second = Push(1);
  second.round = 4;
  ExpectNames(CheckPushTerms(second, &first, kSyncServer), {"rank 1 pushed round 4 while round 3 is open"});
}

TEST(RoundAgreement, ListsEveryDifference) {
  MessageHeader first = Push(0), second = Push(1);
  second.tensor_bytes = 400;
  second.flags = kFlagAverage;
  second.partition_bytes = 1024;
  ExpectNames(CheckPushTerms(second, &first, kSyncServer), {"100 elements", "averages it", "into 1024 bytes"});
}

TEST(RoundAgreement, AsyncFlagMustMatchTheServer) {
  MessageHeader sync_push = Push(1);
  ExpectNames(CheckPushTerms(sync_push, nullptr, ServerTerms{3, true}),
              {"server 3 runs asynchronous rounds (BYTEPS_ENABLE_ASYNC=1)", "rank 1 pushes synchronously",
               "BYTEPS_ENABLE_ASYNC=0"});
  MessageHeader async_push = Push(1);
  async_push.flags = kFlagAsync;
  EXPECT_EQ(CheckPushTerms(async_push, nullptr, ServerTerms{3, true}), "");
  ExpectNames(CheckPushTerms(async_push, nullptr, kSyncServer), {"runs synchronous rounds", "asynchronously"});
}

}  // namespace
}  // namespace bps
