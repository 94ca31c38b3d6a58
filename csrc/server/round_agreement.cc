#include "server/round_agreement.h"

#include <cstdio>
#include <cstring>
#include <vector>

namespace bps {
namespace {

std::string Rank(const MessageHeader& h) { return "rank " + std::to_string(h.sender_rank); }

std::string AsyncSetting(bool async) { return async ? "BYTEPS_ENABLE_ASYNC=1" : "BYTEPS_ENABLE_ASYNC=0"; }

std::string Hex(uint32_t v) {
  char text[16];
  snprintf(text, sizeof(text), "%08x", v);
  return text;
}

uint64_t Elements(const MessageHeader& h) {
  return IsValidDataType(h.dtype) ? h.tensor_bytes / DataTypeSize(static_cast<DataType>(h.dtype)) : 0;
}

const char* TypeName(const MessageHeader& h) {
  return IsValidDataType(h.dtype) ? DataTypeName(static_cast<DataType>(h.dtype)) : "unknown";
}

}  // namespace

std::string CheckPushTerms(const MessageHeader& push, const MessageHeader* first, const ServerTerms& server) {
  const bool push_async = (push.flags & kFlagAsync) != 0;
  if (push_async != server.async) {
    return "server " + std::to_string(server.server_id) + " runs " + (server.async ? "asynchronous" : "synchronous") +
           " rounds (" + AsyncSetting(server.async) + ") but " + Rank(push) + " pushes " +
           (push_async ? "asynchronously" : "synchronously") + " (" + AsyncSetting(push_async) +
           "): set BYTEPS_ENABLE_ASYNC alike on every worker and server";
  }
  if (!first) return "";
  const MessageHeader& a = *first;
  const MessageHeader& b = push;
  std::vector<std::string> differences;
  if (a.dtype != b.dtype) {
    differences.push_back(Rank(a) + " pushed " + TypeName(a) + " but " + Rank(b) + " pushed " + TypeName(b));
  }
  if (a.tensor_bytes != b.tensor_bytes && (a.dtype == b.dtype || Elements(a) != Elements(b))) {
    differences.push_back(Rank(a) + " pushed " + std::to_string(Elements(a)) + " elements (" +
                          std::to_string(a.tensor_bytes) + " bytes in total) but " + Rank(b) + " pushed " +
                          std::to_string(Elements(b)) + " elements (" + std::to_string(b.tensor_bytes) + " bytes)");
  }
  const bool a_average = (a.flags & kFlagAverage) != 0, b_average = (b.flags & kFlagAverage) != 0;
  if (a_average != b_average) {
    differences.push_back(Rank(a) + (a_average ? " averages" : " sums") + " it (average=" +
                          (a_average ? "True" : "False") + ") but " + Rank(b) + (b_average ? " averages" : " sums") +
                          " it (average=" + (b_average ? "True" : "False") + ")");
  }
  if (a.dtype == b.dtype && a.tensor_bytes == b.tensor_bytes && a_average == b_average && a.signature != b.signature) {
    // The signature hashes dtype, shape and reduce op: only the shape is left.
    differences.push_back(Rank(a) + " and " + Rank(b) + " pushed the same " + std::to_string(Elements(a)) +
                          " elements in different shapes (shape signatures " + Hex(a.signature) + " and " +
                          Hex(b.signature) + ")");
  }
  const bool a_compressed = (a.flags & kFlagCompressed) != 0, b_compressed = (b.flags & kFlagCompressed) != 0;
  if (a_compressed != b_compressed) {
    differences.push_back(Rank(a) + (a_compressed ? " compresses it" : " sends it uncompressed") + " but " + Rank(b) +
                          (b_compressed ? " compresses it" : " sends it uncompressed") +
                          ": declare the same compression for it on every rank, with BYTEPS_MIN_COMPRESS_BYTES "
                          "alike");
  }
  if (a.partition_bytes != b.partition_bytes) {
    differences.push_back(Rank(a) + " cuts tensors into partitions of " + std::to_string(a.partition_bytes) +
                          " bytes but " + Rank(b) + " into " + std::to_string(b.partition_bytes) +
                          " bytes: set BYTEPS_PARTITION_BYTES alike on every process");
  } else if (differences.empty() && a.payload_bytes != b.payload_bytes && !(a_compressed && b_compressed)) {
    // (Compressed sizes follow from the codecs, which CheckCodecTerms compares.)
    differences.push_back(Rank(a) + " pushed " + std::to_string(a.payload_bytes) + " bytes of partition " +
                          std::to_string(a.partition) + " but " + Rank(b) + " pushed " +
                          std::to_string(b.payload_bytes) + " bytes (different partition plans: check "
                          "BYTEPS_LOCAL_SIZE)");
  }
  if (a.num_contributors != b.num_contributors) {
    differences.push_back(Rank(a) + " counts " + std::to_string(a.num_contributors) + " machines but " + Rank(b) +
                          " counts " + std::to_string(b.num_contributors) + " (DMLC_NUM_WORKER)");
  }
  if (!differences.empty()) {
    std::string text = "ranks disagree on this tensor: ";
    for (size_t i = 0; i < differences.size(); ++i) text += (i ? "; " : "") + differences[i];
    return text;
  }
  if (a.round != b.round) {
    return "round mismatch: " + Rank(b) + " pushed round " + std::to_string(b.round) + " while round " +
           std::to_string(a.round) + " is open (a rank skipped or repeated this tensor)";
  }
  return "";
}

std::string CheckCodecTerms(const MessageHeader& push, const CodecHeader& push_codec, const uint32_t* push_cuts,
                            const MessageHeader& first, const CodecHeader& first_codec, const uint32_t* first_cuts) {
  if (memcmp(&push_codec, &first_codec, sizeof(CodecHeader)) == 0) {
    if (push_codec.cuts == 0 || memcmp(push_cuts, first_cuts, uint64_t{push_codec.cuts} * sizeof(uint32_t)) == 0) {
      return "";
    }
    return "ranks disagree on this tensor's compression: " + Rank(first) + " and " + Rank(push) +
           " cut it into different parts for onebit's scales (a fused bucket of other tensors: "
           "declare the same segments on every rank)";
  }
  return "ranks disagree on this tensor's compression: " + Rank(first) + " compresses it with " +
         DescribeCodec(first_codec) + " but " + Rank(push) + " with " + DescribeCodec(push_codec) +
         " (of " + std::to_string(first_codec.count) + " and " + std::to_string(push_codec.count) +
         " elements): pass the same compression to every rank";
}

}  // namespace bps
