#include "local/shared_memory.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
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

std::string Megabytes(uint64_t bytes) { return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MB"; }

// How a user gets more shared memory, for every error that runs out of it.
const char* kEnlargeShm =
    "enlarge /dev/shm (docker run --shm-size=8g; Kubernetes: mount an emptyDir with medium: Memory at /dev/shm; "
    "a host: mount -o remount,size=8G /dev/shm), or use fewer local ranks";

uint64_t DevShmFreeBytes() {
  struct statvfs st;
  if (statvfs("/dev/shm", &st) != 0) return UINT64_MAX;  // unknown: let fallocate decide
  return static_cast<uint64_t>(st.f_bavail) * static_cast<uint64_t>(st.f_frsize);
}

// Backs [offset, offset + bytes) of a tmpfs file, or says why it cannot.
Status Back(int fd, uint64_t offset, uint64_t bytes, const std::string& what) {
  int rc = posix_fallocate(fd, static_cast<off_t>(offset), static_cast<off_t>(bytes));
  if (rc == 0) return Status::OK();
  if (rc == ENOSPC) {
    return Status::Internal("out of shared memory: " + what + " needs " + Megabytes(bytes) + " more, but /dev/shm has " +
                            Megabytes(DevShmFreeBytes()) + " free: " + kEnlargeShm);
  }
  if (rc == EOPNOTSUPP || rc == ENOSYS) return Status::OK();  // not tmpfs: pages come on touch
  return Status::Internal("fallocate of " + what + " in /dev/shm: " + strerror(rc));
}

// Maps a segment; *fd_out (if given) receives the still-open descriptor.
Status MapSegment(const std::string& name, size_t bytes, bool create, bool back_fully, void** out,
                  int* fd_out = nullptr) {
  int flags = O_RDWR | (create ? (O_CREAT | O_EXCL) : 0);
  int fd = shm_open(name.c_str(), flags | O_CLOEXEC, 0600);
  if (fd < 0) return Status::Internal("shm_open(" + name + "): " + strerror(errno));
  if (create && ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    std::string err = strerror(errno);
    close(fd);
    shm_unlink(name.c_str());
    return Status::Internal("ftruncate(" + name + "): " + err);
  }
  if (create && back_fully) {
    Status st = Back(fd, 0, bytes, "the local control block " + name);
    if (!st.ok()) {
      close(fd);
      shm_unlink(name.c_str());
      return st;
    }
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  if (fd_out) {
    *fd_out = fd;
  } else {
    close(fd);
  }
  if (p == MAP_FAILED) {
    if (fd_out) {
      close(fd);
      *fd_out = -1;
    }
    return Status::Internal("mmap(" + name + "): " + strerror(errno));
  }
  *out = p;
  return Status::OK();
}

uint64_t ArenaBytes() {
  // Sparse: only reserved slots use memory. Half of RAM bounds a runaway
  // job; /dev/shm's free space bounds what can be backed at all.
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  uint64_t half_ram = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 2;
  return std::max<uint64_t>(1 << 20, std::min(half_ram, DevShmFreeBytes()));
}

}  // namespace

LocalSharedMemory::~LocalSharedMemory() {
  if (owner_) Unlink();
  if (arena_fd_ >= 0) close(arena_fd_);
  if (control_) munmap(control_, control_bytes_);
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
                                 uint32_t key_table_size, std::unique_ptr<LocalSharedMemory>* out) {
  if (key_table_size == 0) key_table_size = kDefaultShmKeyTableSize;
  RemoveStaleSegments();
  std::unique_ptr<LocalSharedMemory> shm(new LocalSharedMemory());
  shm->base_name_ = "/bpsn-" + job_id + "-m" + std::to_string(machine) + "-p" + std::to_string(getpid());
  shm->local_size_ = local_size;
  shm->arena_bytes_ = arena_bytes ? arena_bytes : ArenaBytes();
  shm->owner_ = true;
  void* ctl = nullptr;
  void* arena = nullptr;
  shm->control_bytes_ = ShmControlBytes(key_table_size);
  BPS_RETURN_IF_ERROR(MapSegment(shm->base_name_ + "-ctl", shm->control_bytes_, true, true, &ctl));
  shm->control_ = static_cast<ShmControl*>(ctl);
  shm->control_->key_table_size = key_table_size;
  shm->entries_ = reinterpret_cast<ShmEntry*>(static_cast<char*>(ctl) + ShmControlBytes(0));
  // After the control block took its share of /dev/shm.
  if (!arena_bytes) shm->arena_bytes_ = ArenaBytes();
  BPS_RETURN_IF_ERROR(MapSegment(shm->base_name_ + "-arena", shm->arena_bytes_, true, false, &arena, &shm->arena_fd_));
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
  // The creator chose the table's size: map the header, then all of it.
  BPS_RETURN_IF_ERROR(MapSegment(base_name + "-ctl", sizeof(ShmControl), false, false, &ctl));
  const bool ready = static_cast<ShmControl*>(ctl)->magic == kShmMagic;
  const uint32_t table = static_cast<ShmControl*>(ctl)->key_table_size;
  munmap(ctl, sizeof(ShmControl));
  if (!ready) return Status::Internal("shared memory " + base_name + " is not initialised");
  shm->control_bytes_ = ShmControlBytes(table);
  BPS_RETURN_IF_ERROR(MapSegment(base_name + "-ctl", shm->control_bytes_, false, false, &ctl));
  shm->control_ = static_cast<ShmControl*>(ctl);
  shm->entries_ = reinterpret_cast<ShmEntry*>(static_cast<char*>(ctl) + ShmControlBytes(0));
  if (shm->control_->magic != kShmMagic || shm->control_->local_size != static_cast<uint32_t>(local_size)) {
    return Status::Invalid("shared memory " + base_name + " was made for local size " +
                           std::to_string(shm->control_->local_size) + ", this rank has BYTEPS_LOCAL_SIZE=" +
                           std::to_string(local_size));
  }
  shm->arena_bytes_ = shm->control_->arena_capacity;
  void* arena = nullptr;
  BPS_RETURN_IF_ERROR(MapSegment(base_name + "-arena", shm->arena_bytes_, false, false, &arena, &shm->arena_fd_));
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
  const uint32_t table = control_->key_table_size;
  uint32_t start = static_cast<uint32_t>(key % table);
  for (uint32_t probe = 0; probe < table; ++probe) {
    ShmEntry& e = entries_[(start + probe) % table];
    uint64_t cur = e.key.load(std::memory_order_acquire);
    if (cur == 0) {
      uint64_t expected = 0;
      if (e.key.compare_exchange_strong(expected, key)) {
        control_->keys_used.fetch_add(1, std::memory_order_relaxed);
        // We own initialisation: reserve L slots of `bytes`, 64-byte aligned.
        uint64_t slot = (bytes + 63) / 64 * 64;
        uint64_t need = slot * static_cast<uint64_t>(local_size_);
        // Reserve only what fits, so a refused tensor leaves the rest of the
        // arena to tensors that do fit.
        uint64_t offset = control_->arena_used.load();
        while (offset + need <= control_->arena_capacity &&
               !control_->arena_used.compare_exchange_weak(offset, offset + need)) {
        }
        Status backed;
        if (offset + need > control_->arena_capacity) {
          backed = Status::Internal("out of shared memory: the local staging arena of " +
                                    Megabytes(control_->arena_capacity) + " (what /dev/shm had free at start) is full, " +
                                    Megabytes(need) + " more needed: " + kEnlargeShm);
        } else {
          backed = Back(arena_fd_, offset, need, "local staging of a partition");
        }
        if (!backed.ok()) {
          e.error_round.store(UINT32_MAX);
          snprintf(e.error, sizeof(e.error), "%s", backed.message().c_str());
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
  return Status::Internal(
      "this machine's shared-memory key table is full: all " + std::to_string(table) +
      " entries (BYTEPS_LOCAL_KEY_TABLE_SIZE) hold partitions of earlier tensor names, which are kept for the job's "
      "lifetime. Raise BYTEPS_LOCAL_KEY_TABLE_SIZE on every rank (about " +
      std::to_string((sizeof(ShmEntry) + 1023) / 1024) +
      " KB of /dev/shm per entry), reuse tensor names across steps instead of making new ones, or use a larger "
      "BYTEPS_PARTITION_BYTES (fewer partitions per tensor)");
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
