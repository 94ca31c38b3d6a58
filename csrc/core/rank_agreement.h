// Rank agreement: the one check, under every framework face, that the ranks'
// unnamed collectives describe the same tensor before it is submitted.
//
// Why: an unnamed collective's engine name derives from its dtype and shape,
// so ranks that disagree would each wait under a different name until
// BYTEPS_TIMEOUT ends the engine. Horovod's coordinator reports such a
// mismatch instead. Here every rank writes its row (AgreementRow) into a
// [ranks, kAgreementSlots] int64 table of zeros, the face sums the table over
// ranks under one fixed name (its own round, so its joins and graphs apply),
// and RanksDisagreement compares the rows: every rank sees the same table,
// so every rank fails with the same message naming each rank's tensor.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace bps {

// Row layout (every face's table, sized from kAgreementSlots).
constexpr int kAgreementSlots = 16;
constexpr int kAgreementKindSlot = 0;   // AgreementKindCode; 0: the rank sent nothing (joined)
constexpr int kAgreementDtypeSlot = 1;  // 1 + dtype index (+ kAgreementDeviceStride off CPU); 0: a group
constexpr int kAgreementRankSlot = 2;   // number of dimensions; a group: number of tensors
constexpr int kAgreementExtraSlot = 3;  // 1 + root rank or reduce op; 0: none
constexpr int kAgreementFirstDimSlot = 4;  // dims; a group: its digest
constexpr int kAgreementMaxDims = kAgreementSlots - kAgreementFirstDimSlot;
constexpr int64_t kAgreementAnyDim = -2;  // gathers: any first dimension
// Horovod fails a collective whose ranks mix CPU and device tensors (they
// would take different paths and wait), so the dtype slot says which.
constexpr int64_t kAgreementDeviceStride = 100;

// The one hash of an operation kind ("allreduce", "broadcast", ...): never 0,
// which marks an absent rank. CRC-32 (zlib's) so a row can be checked by hand.
int64_t AgreementKindCode(const std::string& kind);

// One tensor's row. `dtype` is the framework's Python name of it ("float32",
// "bfloat16", "bool"); names outside the engine's list compare equal to each
// other and print as "?".
std::vector<int64_t> AgreementRow(const std::string& kind, const std::string& dtype, bool on_device,
                                  const std::vector<int64_t>& shape, bool any_first_dim, int64_t extra);

// A group of tensors (grouped collectives): their count and a digest of every
// (dtype, device, shape) the face computed.
std::vector<int64_t> AgreementGroupRow(const std::string& kind, int64_t count, int64_t digest, int64_t extra);

// "" when every present row equals rows[rank]; else the error every rank
// raises, naming each present rank's tensor.
std::string RanksDisagreement(const std::string& kind, const int64_t* rows, int ranks, int rank);

}  // namespace bps
