// A LocalReducer whose machine-local steps are collectives (NCCL, or the
// tests' emulation): the engine's stage machine maps onto it as
//   StageIn          announce the partition round's reduce-scatter
//   ReduceOwnSlice   done once the reduce-scatter (issued in the machine's
//                    order by Progress) and the copy into staging finished
//   OwnSlice         the host staging that the servers' answer lands in
//   PublishOwnSlice  upload the answer, announce the all-gather
//   Gather           done once the all-gather (machine order) finished
// Progress issues the machine's order (collective_order.h); this is the only
// place a collective is issued, on the engine thread.
//
// It is also how its collectives fail (PeerLiveness): a collective that
// failed on the device is this rank's failure, and FailMachine ends this
// rank's collectives so no kernel waits for a peer that will never issue its
// side. The machine's doorbell and order channel are the host reducer's
// group (MachinePeers), reached through the MachineLink.
#pragma once
#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "local/collective_order.h"
#include "local/collectives.h"
#include "local/local_reducer.h"

namespace bps {

class SequencedLocalReducer final : public LocalReducer, public PeerLiveness {
 public:
  SequencedLocalReducer(const Config& config, std::unique_ptr<Collectives> collectives, const MachineLink& link,
                        CollectiveOrder::Mode mode = CollectiveOrder::Mode::kMachineOrder);
  ~SequencedLocalReducer() override;

  const char* name() const override { return collectives_->name(); }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }

  std::vector<Range> PlanPartitions(int64_t count, int64_t elem_size, int64_t partition_bytes, int num_servers,
                                    const std::vector<int>& job_local_sizes) const override;
  Range SliceOfLayout(int64_t count, int L, int q) const override;
  bool Progress() override;
  bool Settled(LocalPartition* p, uint32_t round) override;
  bool fuses_one_machine() const override { return true; }
  Status LaunchFused(const LocalContribution& c, void* stream, LocalPartition** out) override;
  Status RecordReady(void* stream, void** event) override { return collectives_->RecordReady(stream, event); }
  void ReturnReady(void* event) override { collectives_->ReturnReady(event); }
  Status HoldStream(void* stream, void** hold) override { return collectives_->HoldStream(stream, hold); }
  void ReleaseHold(void* hold) override { collectives_->ReleaseHold(hold); }
  bool CompressesSlices(const CodecHeader& push) const override { return collectives_->CompressesSlices(push); }
  void ForgetCompression(SliceCompression* c) override { collectives_->ForgetCompression(c); }

  Status Acquire(uint64_t key, uint64_t bytes, DataType dtype, LocalPartition** out) override;
  void ReleasePartition(LocalPartition* p) override;
  LocalProgress StageIn(LocalPartition* p, uint32_t round, const LocalContribution& c) override;
  Status ReduceOwnSlice(LocalPartition* p, uint32_t round, const LocalContribution& c, char* also_into,
                        int64_t divisor, LocalProgress* progress) override;
  char* OwnSlice(LocalPartition* p, const LocalContribution& c) override;
  void PublishOwnSlice(LocalPartition* p, uint32_t round) override;
  Status Gather(LocalPartition* p, uint32_t round, const LocalContribution& c, char* output, int64_t divisor,
                uint32_t* gathered, LocalProgress* progress) override;
  void CloseFailedRound(LocalPartition* p, uint64_t key, uint64_t bytes, DataType dtype, uint32_t round,
                        const Status& why, bool staged) override;
  void FailRound(LocalPartition* p, uint32_t round, const Status& why) override;
  std::string DescribeStaging(LocalPartition* p, uint32_t round) override;

  uint64_t staging_bytes() override { return collectives_->staging_bytes(); }
  uint64_t keys_used() override { return keys_.load(); }  // read by the stats, any thread

  // PeerLiveness: the collectives' own failure. `check_alive` is unused: the
  // host reducer's group watches the local ranks' processes.
  Status CheckPeers(bool check_alive) override;
  void FailMachine(const std::string& why) override;

 private:
  struct Partition;
  Partition* Of(LocalPartition* p) { return reinterpret_cast<Partition*>(p); }
  void Issue(const CollectiveOrder::Step& step);
  void Break(const Status& why);
  // The reducer's failure (a collective that failed to launch, an abort), or OK.
  Status BrokenStatus();
  // Drops the partitions whose issued reduce-scatter finished (or that left
  // the round) from the front of copying_; true when more may be issued.
  bool RoomToIssue();
  void StopCopying(Partition* p);

  const Config config_;
  const int local_rank_;
  const int local_size_;
  std::unique_ptr<Collectives> collectives_;
  MachineLink link_;
  CollectiveOrder order_;
  std::unordered_map<uint64_t, std::unique_ptr<Partition>> partitions_;  // by key (engine thread)
  std::atomic<uint64_t> keys_{0};
  // Rounds whose steps this rank announced, by (key, round): where a decision lands.
  std::map<std::pair<uint64_t, uint32_t>, Partition*> announced_;
  // Rounds failed by a decision before this rank got to them.
  std::map<std::pair<uint64_t, uint32_t>, Status> failed_ahead_;
  // Partitions whose reduce-scatter was issued and not seen finished, in
  // issue order (their streams finish them in that order), and their bytes:
  // Progress issues the next step only while these are under
  // config_.device_copy_ahead_bytes, so the engine thread returns to its
  // pushes between copies instead of queueing a whole tensor's at once.
  std::deque<Partition*> copying_;
  uint64_t copying_bytes_ = 0;
  std::mutex fused_mu_;  // one fused launch at a time: one order on this rank
  std::mutex broken_mu_;
  Status broken_;
  std::atomic<bool> is_broken_{false};  // broken_ set: the hot path's check without the lock
  std::atomic<bool> aborted_{false};  // set by FailMachine, from any thread
};

// The in-process registry of device reducer factories lives in
// local_reducer.cc; this makes one over any Collectives.
Status MakeSequencedReducer(const Config& config, std::unique_ptr<Collectives> collectives, const MachineLink& link,
                            DeviceReducer* out, CollectiveOrder::Mode mode = CollectiveOrder::Mode::kMachineOrder);

}  // namespace bps
