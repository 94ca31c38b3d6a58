#include "core/rank_agreement.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace bps {
namespace {

// Python's dtype names, as both torch (str(dtype)) and TF (dtype.name) spell them.
constexpr std::array<const char*, 16> kDtypeNames = {
    "float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "int8",
    "int16", "bool", "complex64", "complex128", "uint16", "uint32", "uint64", "string"};

int64_t DtypeCode(const std::string& dtype) {
  for (size_t i = 0; i < kDtypeNames.size(); ++i)
    if (dtype == kDtypeNames[i]) return static_cast<int64_t>(i) + 1;
  return static_cast<int64_t>(kDtypeNames.size()) + 1;
}

uint32_t Crc32(const std::string& text) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char c : text) {
    crc ^= c;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

std::string DescribeRow(const int64_t* row) {
  if (row[kAgreementDtypeSlot] == 0) return "a group of " + std::to_string(row[kAgreementRankSlot]) + " tensors";
  const int64_t code = row[kAgreementDtypeSlot] % kAgreementDeviceStride;
  const bool on_device = row[kAgreementDtypeSlot] >= kAgreementDeviceStride;
  std::string out = on_device ? "non-CPU " : "";
  out += code >= 1 && code <= static_cast<int64_t>(kDtypeNames.size()) ? kDtypeNames[code - 1] : "?";
  out += " [";
  const int64_t dims = std::min<int64_t>(row[kAgreementRankSlot], kAgreementMaxDims);
  for (int64_t d = 0; d < dims; ++d) {
    if (d) out += ", ";
    const int64_t size = row[kAgreementFirstDimSlot + d];
    out += size == kAgreementAnyDim ? "*" : std::to_string(size);
  }
  out += "]";
  if (row[kAgreementExtraSlot] != 0) out += " (" + std::to_string(row[kAgreementExtraSlot] - 1) + ")";
  return out;
}

}  // namespace

int64_t AgreementKindCode(const std::string& kind) { return 1 + Crc32(kind) % 1000; }

std::vector<int64_t> AgreementRow(const std::string& kind, const std::string& dtype, bool on_device,
                                  const std::vector<int64_t>& shape, bool any_first_dim, int64_t extra) {
  std::vector<int64_t> row(kAgreementSlots, 0);
  row[kAgreementKindSlot] = AgreementKindCode(kind);
  row[kAgreementDtypeSlot] = DtypeCode(dtype) + (on_device ? kAgreementDeviceStride : 0);
  row[kAgreementRankSlot] = static_cast<int64_t>(shape.size());
  row[kAgreementExtraSlot] = extra;
  for (size_t d = 0; d < shape.size() && d < static_cast<size_t>(kAgreementMaxDims); ++d)
    row[kAgreementFirstDimSlot + d] = (d == 0 && any_first_dim) ? kAgreementAnyDim : shape[d];
  return row;
}

std::vector<int64_t> AgreementGroupRow(const std::string& kind, int64_t count, int64_t digest, int64_t extra) {
  std::vector<int64_t> row(kAgreementSlots, 0);
  row[kAgreementKindSlot] = AgreementKindCode(kind);
  row[kAgreementRankSlot] = count;
  row[kAgreementExtraSlot] = extra;
  row[kAgreementFirstDimSlot] = digest;
  return row;
}

std::string RanksDisagreement(const std::string& kind, const int64_t* rows, int ranks, int rank) {
  const int64_t* mine = rows + static_cast<int64_t>(rank) * kAgreementSlots;
  bool agree = true;
  std::string what;
  for (int r = 0; r < ranks; ++r) {
    const int64_t* row = rows + static_cast<int64_t>(r) * kAgreementSlots;
    if (row[kAgreementKindSlot] == 0) continue;  // a joined rank stands in with zeros
    if (!what.empty()) what += ", ";
    what += "rank " + std::to_string(r) + ": " + DescribeRow(row);
    agree = agree && std::memcmp(row, mine, kAgreementSlots * sizeof(int64_t)) == 0;
  }
  if (agree) return "";
  return kind + ": ranks disagree on the tensor's device, dtype or shape (or root rank / op): " + what +
         "; every rank must pass the same device type, dtype and shape (gathers: all but the first dimension)";
}

}  // namespace bps
