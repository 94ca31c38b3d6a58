#include "local/shared_memory.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <thread>

#include "common/futex.h"
#include "common/dtype.h"
#include "common/logging.h"

namespace bps {
namespace {

constexpr uint32_t kShmMagic = 0x424d4853;

Status MapSegment(const std::string& name, size_t bytes, bool create, void** out) {
  int flags = O_RDWR | (create ? (O_CREAT | O_EXCL) : 0);
  int fd = shm_open(name.c_str(), flags, 0600);
  if (fd < 0) return Status::Internal("shm_open(" + name + "): " + strerror(errno));
  if (create && ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    std::string err = strerror(errno);
    close(fd);
    shm_unlink(name.c_str());
    return Status::Internal("ftruncate(" + name + "): " + err);
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return Status::Internal("mmap(" + name + "): " + strerror(errno));
  *out = p;
  return Status::OK();
}

uint64_t ArenaBytes() {
  // Sparse: only touched pages use memory. Half of RAM bounds a runaway job.
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 2;
}

}  // namespace

LocalSharedMemory::~LocalSharedMemory() {
  if (owner_) Unlink();
  if (control_) munmap(control_, sizeof(ShmControl));
  if (arena_) munmap(arena_, arena_bytes_);
}

void LocalSharedMemory::RemoveStaleSegments() {
  DIR* dir = opendir("/dev/shm");
  if (!dir) return;
  while (dirent* e = readdir(dir)) {
    std::string n = e->d_name;
    if (n.rfind("bpsn-", 0) != 0) continue;
    auto p = n.find("-p");
    if (p == std::string::npos) continue;
    int pid = atoi(n.c_str() + p + 2);
    if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) {
      shm_unlink(("/" + n).c_str());
      BPS_LOG(Info) << "removed stale shared memory /dev/shm/" << n << " of dead process " << pid;
    }
  }
  closedir(dir);
}

Status LocalSharedMemory::Create(const std::string& job_id, int machine, int local_size, uint64_t arena_bytes,
                                 std::unique_ptr<LocalSharedMemory>* out) {
  RemoveStaleSegments();
  std::unique_ptr<LocalSharedMemory> shm(new LocalSharedMemory());
  shm->base_name_ = "/bpsn-" + job_id + "-m" + std::to_string(machine) + "-p" + std::to_string(getpid());
  shm->local_size_ = local_size;
  shm->arena_bytes_ = arena_bytes ? arena_bytes : ArenaBytes();
  shm->owner_ = true;
  void* ctl = nullptr;
  void* arena = nullptr;
  BPS_RETURN_IF_ERROR(MapSegment(shm->base_name_ + "-ctl", sizeof(ShmControl), true, &ctl));
  shm->control_ = static_cast<ShmControl*>(ctl);
  BPS_RETURN_IF_ERROR(MapSegment(shm->base_name_ + "-arena", shm->arena_bytes_, true, &arena));
  shm->arena_ = static_cast<char*>(arena);
  shm->control_->local_size = static_cast<uint32_t>(local_size);
  shm->control_->arena_capacity = shm->arena_bytes_;
  shm->control_->magic = kShmMagic;  // last: openers check it
  *out = std::move(shm);
  return Status::OK();
}

Status LocalSharedMemory::Open(const std::string& base_name, int local_size, std::unique_ptr<LocalSharedMemory>* out) {
  std::unique_ptr<LocalSharedMemory> shm(new LocalSharedMemory());
  shm->base_name_ = base_name;
  shm->local_size_ = local_size;
  void* ctl = nullptr;
  BPS_RETURN_IF_ERROR(MapSegment(base_name + "-ctl", sizeof(ShmControl), false, &ctl));
  shm->control_ = static_cast<ShmControl*>(ctl);
  if (shm->control_->magic != kShmMagic || shm->control_->local_size != static_cast<uint32_t>(local_size)) {
    return Status::Invalid("shared memory " + base_name + " was made for local size " +
                           std::to_string(shm->control_->local_size) + ", this rank has BYTEPS_LOCAL_SIZE=" +
                           std::to_string(local_size));
  }
  shm->arena_bytes_ = shm->control_->arena_capacity;
  void* arena = nullptr;
  BPS_RETURN_IF_ERROR(MapSegment(base_name + "-arena", shm->arena_bytes_, false, &arena));
  shm->arena_ = static_cast<char*>(arena);
  *out = std::move(shm);
  return Status::OK();
}

void LocalSharedMemory::Unlink() {
  shm_unlink((base_name_ + "-ctl").c_str());
  shm_unlink((base_name_ + "-arena").c_str());
}

Status LocalSharedMemory::Lookup(uint64_t key, uint64_t bytes, uint32_t dtype, ShmEntry** out) {
  if (key == 0) key = 1;  // 0 marks free slots
  uint32_t start = static_cast<uint32_t>(key % kShmTableSize);
  for (uint32_t probe = 0; probe < kShmTableSize; ++probe) {
    ShmEntry& e = control_->entries[(start + probe) % kShmTableSize];
    uint64_t cur = e.key.load(std::memory_order_acquire);
    if (cur == 0) {
      uint64_t expected = 0;
      if (e.key.compare_exchange_strong(expected, key)) {
        // We own initialisation: reserve L slots of `bytes`, 64-byte aligned.
        uint64_t slot = (bytes + 63) / 64 * 64;
        uint64_t need = slot * static_cast<uint64_t>(local_size_);
        uint64_t offset = control_->arena_used.fetch_add(need);
        if (offset + need > control_->arena_capacity) {
          e.error_round.store(UINT32_MAX);
          snprintf(e.error, sizeof(e.error), "local staging arena of %llu bytes is full",
                   static_cast<unsigned long long>(control_->arena_capacity));
        }
        e.bytes = slot;
        e.dtype = dtype;
        e.arena_offset = offset;
        e.initialized.store(1, std::memory_order_release);
        *out = &e;
        if (e.error_round.load() == UINT32_MAX) return Status::Internal(e.error);
        return Status::OK();
      }
      cur = expected;
    }
    if (cur == key) {
      while (e.initialized.load(std::memory_order_acquire) == 0) std::this_thread::yield();
      if (e.error_round.load() == UINT32_MAX) return Status::Internal(e.error);
      if (e.bytes != (bytes + 63) / 64 * 64) {
        *out = &e;  // the caller poisons the entry so every local rank fails
        return Status::Mismatch("partition has " + std::to_string(bytes) + " bytes on this rank but about " +
                                std::to_string(e.bytes) + " bytes (" + DataTypeName(static_cast<DataType>(e.dtype)) +
                                ") on another local rank");
      }
      *out = &e;
      return Status::OK();
    }
  }
  return Status::Internal("shared-memory key table is full (" + std::to_string(kShmTableSize) +
                          " partitions): use fewer distinct tensor names or a larger BYTEPS_PARTITION_BYTES");
}

void LocalSharedMemory::Ring() {
  for (int q = 0; q < local_size_; ++q) {
    control_->doorbell[q].fetch_add(1, std::memory_order_acq_rel);
    if (control_->sleeping[q].load(std::memory_order_acquire)) FutexWakeAll(&control_->doorbell[q]);
  }
}

void LocalSharedMemory::WaitDoorbell(int local_rank, uint32_t seen, int timeout_ms) {
  control_->sleeping[local_rank].store(1, std::memory_order_seq_cst);
  if (control_->doorbell[local_rank].load(std::memory_order_seq_cst) == seen) {
    FutexWait(&control_->doorbell[local_rank], seen, timeout_ms);
  }
  control_->sleeping[local_rank].store(0, std::memory_order_release);
}

}  // namespace bps
