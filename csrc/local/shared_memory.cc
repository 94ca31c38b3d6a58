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
#include <utility>
#include <vector>

#include "common/futex.h"
#include "common/dtype.h"
#include "common/logging.h"
#include "common/process_alive.h"

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

// Holds a ShmControl's layout mutex. A rank that died holding it leaves it
// to the next one (EOWNERDEAD): the job fails anyway when a local rank dies,
// and the others must still be able to fail cleanly, not block.
class LayoutLock {
 public:
  explicit LayoutLock(pthread_mutex_t* m) : m_(m) {
    if (pthread_mutex_lock(m_) == EOWNERDEAD) pthread_mutex_consistent(m_);
  }
  ~LayoutLock() { pthread_mutex_unlock(m_); }

 private:
  pthread_mutex_t* m_;
};

uint64_t Align64(uint64_t bytes) { return (bytes + 63) / 64 * 64; }

// The pid in a segment's name ("/bpsn-<job>-m<machine>-p<pid>"), or 0.
int CreatorPid(const std::string& name) {
  auto p = name.rfind("-p");
  return p == std::string::npos ? 0 : atoi(name.c_str() + p + 2);
}

}  // namespace

LocalSharedMemory::~LocalSharedMemory() {
  // The creator unlinks once every local rank mapped the segments; one killed
  // before that cannot, so the last of its machine's ranks to leave does.
  const int creator = CreatorPid(base_name_);
  if (owner_ || (creator > 0 && !ProcessAlive(creator))) Unlink();
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
    if (pid > 0 && !ProcessAlive(pid)) {
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
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(&shm->control_->layout_mutex, &attr);
  pthread_mutexattr_destroy(&attr);
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
  Status mapped = MapSegment(base_name + "-ctl", sizeof(ShmControl), false, false, &ctl);
  if (!mapped.ok()) {
    // Local rank 0 unlinks its segments when it fails: its cause is the
    // cause here (the process engine asks the scheduler for it).
    const int creator = CreatorPid(base_name);
    return Status::PeerFailure("local rank 0 of this machine (pid " + std::to_string(creator) + ") " +
                               (creator > 0 && ProcessAlive(creator) ? "gave up" : "exited") +
                               " before this rank mapped its shared memory (" + mapped.message() + ")");
  }
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

ShmEntry* LocalSharedMemory::Find(uint64_t key) {
  const uint32_t table = control_->key_table_size;
  const uint32_t start = static_cast<uint32_t>(key % table);
  for (uint32_t probe = 0; probe < table; ++probe) {
    ShmEntry& e = entries_[(start + probe) % table];
    const uint64_t cur = e.key.load(std::memory_order_acquire);
    if (cur == key) return &e;
    if (cur == 0) return nullptr;  // chains end at a never-used entry; reclaimed ones do not end them
  }
  return nullptr;
}

Status LocalSharedMemory::Insert(uint64_t key, ShmEntry** out) {
  *out = nullptr;
  const uint32_t table = control_->key_table_size;
  for (int attempt = 0; attempt < 2; ++attempt) {
    const uint32_t start = static_cast<uint32_t>(key % table);
    ShmEntry* free_entry = nullptr;
    for (uint32_t probe = 0; probe < table; ++probe) {
      ShmEntry& e = entries_[(start + probe) % table];
      const uint64_t cur = e.key.load(std::memory_order_acquire);
      if (cur == key) {
        *out = &e;  // another rank made it first
        return Status::OK();
      }
      if (cur == kReclaimedKey && !free_entry) free_entry = &e;
      if (cur == 0) {
        if (!free_entry) free_entry = &e;
        break;
      }
    }
    if (free_entry) {
      ShmEntry& e = *free_entry;
      // Fields first, the key last: lock-free lookups see a complete entry.
      e.base_round.store(kNoBaseRound);
      e.arrived.store(0);
      e.released.store(0);
      for (auto& r : e.ready) r.store(0);
      e.error_round.store(0);
      e.error_code = 0;
      e.error[0] = '\0';
      for (int q = 0; q < kMaxLocalRanks; ++q) {
        e.slot_offset[q] = e.slot_bytes[q] = e.signature[q] = e.tensor_bytes[q] = 0;
        e.shape[q][0] = '\0';
      }
      control_->keys_used.fetch_add(1);
      e.key.store(key, std::memory_order_release);
      *out = &e;
      return Status::OK();
    }
    if (attempt == 0 && ReclaimIdle() == 0) break;
  }
  return Status::OK();  // every entry is held: the caller tries again later
}

uint32_t LocalSharedMemory::ReclaimIdle() {
  // The least recently used eighth of the idle entries (at least one), so a
  // job cycling through more names than the table holds reclaims in batches.
  const uint32_t table = control_->key_table_size;
  const uint32_t L = static_cast<uint32_t>(local_size_);
  std::vector<std::pair<uint64_t, uint32_t>> idle;  // (last use, index)
  for (uint32_t i = 0; i < table; ++i) {
    ShmEntry& e = entries_[i];
    const uint64_t k = e.key.load(std::memory_order_acquire);
    if (k == 0 || k == kReclaimedKey || e.holders.load() != 0) continue;
    idle.emplace_back(e.last_use.load(), i);
  }
  std::sort(idle.begin(), idle.end());
  const size_t want = std::max<size_t>(1, table / 8);
  uint32_t reclaimed = 0;
  for (auto& candidate : idle) {
    if (reclaimed >= want) break;
    ShmEntry& e = entries_[candidate.second];
    uint32_t no_holder = 0;
    if (!e.holders.compare_exchange_strong(no_holder, kEntryReclaiming)) continue;  // someone took it
    // Between rounds on every rank: nothing staged that is not released, and
    // every rank's release of the last round counted.
    const uint32_t arrived = e.arrived.load(), released = e.released.load();
    if (arrived != released || released % L != 0) {
      e.holders.store(0);
      continue;
    }
    e.key.store(kReclaimedKey, std::memory_order_release);
    for (int q = 0; q < kMaxLocalRanks; ++q) {
      if (e.slot_bytes[q]) Free(e.slot_offset[q], e.slot_bytes[q]);
      e.slot_bytes[q] = 0;
    }
    control_->keys_used.fetch_sub(1);
    control_->keys_reclaimed.fetch_add(1);
    e.holders.store(0, std::memory_order_release);
    ++reclaimed;
  }
  return reclaimed;
}

Status LocalSharedMemory::Hold(uint64_t key, int local_rank, ShmEntry** out) {
  if (key == 0 || key == kReclaimedKey) key = 1;  // reserved markers
  *out = nullptr;
  const uint32_t mine = 1u << local_rank;
  for (;;) {
    ShmEntry* e = Find(key);
    if (!e) {
      LayoutLock lock(&control_->layout_mutex);
      BPS_RETURN_IF_ERROR(Insert(key, &e));
      if (!e) return Status::OK();  // full of entries in use
    }
    uint32_t holders = e->holders.load();
    bool held = false;
    while (!(holders & kEntryReclaiming)) {
      if (e->holders.compare_exchange_weak(holders, holders | mine)) {
        held = true;
        break;
      }
    }
    // Held, and still (or again) this key's entry: a reclaim cannot take it now.
    if (held && e->key.load(std::memory_order_acquire) == key) {
      e->last_use.store(control_->use_clock.fetch_add(1) + 1);
      *out = e;
      return Status::OK();
    }
    if (held) e->holders.fetch_and(~mine);
    std::this_thread::yield();  // being reclaimed: find or make it again
  }
}

void LocalSharedMemory::Release(ShmEntry* e, int local_rank) {
  if (e) e->holders.fetch_and(~(1u << local_rank), std::memory_order_acq_rel);
}

Status LocalSharedMemory::Allocate(uint64_t bytes, uint64_t* offset) {
  ShmControl* c = control_;
  for (uint32_t i = 0; i < c->free_count; ++i) {  // first fit
    ShmExtent& x = c->free_extents[i];
    if (x.bytes < bytes) continue;
    *offset = x.offset;
    x.offset += bytes;
    x.bytes -= bytes;
    if (x.bytes == 0) {
      std::memmove(&c->free_extents[i], &c->free_extents[i + 1], (c->free_count - i - 1) * sizeof(ShmExtent));
      c->free_count--;
    }
    return Status::OK();
  }
  const uint64_t used = c->arena_used.load();
  if (used + bytes > c->arena_capacity) {
    return Status::Internal("out of shared memory: the local staging arena of " + Megabytes(c->arena_capacity) +
                            " (what /dev/shm had free at start) is full, " + Megabytes(bytes) +
                            " more needed: " + kEnlargeShm);
  }
  *offset = used;
  c->arena_used.store(used + bytes);
  return Status::OK();
}

void LocalSharedMemory::Free(uint64_t offset, uint64_t bytes) {
  ShmControl* c = control_;
  c->arena_in_use.fetch_sub(bytes);
  // The pages stay backed (and mapped in every process): the next slot
  // carved from this range is warm. The front [0, arena_backed) has no holes.
  // Insert sorted by offset, merging with the neighbours.
  uint32_t i = 0;
  while (i < c->free_count && c->free_extents[i].offset < offset) ++i;
  if (i > 0 && c->free_extents[i - 1].offset + c->free_extents[i - 1].bytes == offset) {
    c->free_extents[i - 1].bytes += bytes;
    if (i < c->free_count && c->free_extents[i - 1].offset + c->free_extents[i - 1].bytes == c->free_extents[i].offset) {
      c->free_extents[i - 1].bytes += c->free_extents[i].bytes;
      std::memmove(&c->free_extents[i], &c->free_extents[i + 1], (c->free_count - i - 1) * sizeof(ShmExtent));
      c->free_count--;
    }
    i--;
  } else if (i < c->free_count && offset + bytes == c->free_extents[i].offset) {
    c->free_extents[i].offset = offset;
    c->free_extents[i].bytes += bytes;
  } else {
    if (c->free_count == kMaxFreeExtents) {
      // Full list: forget the smallest range (lost to the job: its address
      // space and, as it stays backed, its pages).
      uint32_t smallest = 0;
      for (uint32_t j = 1; j < c->free_count; ++j) {
        if (c->free_extents[j].bytes < c->free_extents[smallest].bytes) smallest = j;
      }
      if (c->free_extents[smallest].bytes >= bytes) return;
      std::memmove(&c->free_extents[smallest], &c->free_extents[smallest + 1],
                   (c->free_count - smallest - 1) * sizeof(ShmExtent));
      c->free_count--;
      if (smallest < i) --i;
    }
    std::memmove(&c->free_extents[i + 1], &c->free_extents[i], (c->free_count - i) * sizeof(ShmExtent));
    c->free_extents[i] = ShmExtent{offset, bytes};
    c->free_count++;
  }
  // A free range at the top lowers the high-water mark.
  ShmExtent& top = c->free_extents[i];
  if (top.offset + top.bytes == c->arena_used.load()) {
    c->arena_used.store(top.offset);
    std::memmove(&c->free_extents[i], &c->free_extents[i + 1], (c->free_count - i - 1) * sizeof(ShmExtent));
    c->free_count--;
  }
}

Status LocalSharedMemory::EnsureSlot(ShmEntry* e, int q, uint64_t bytes) {
  bytes = Align64(std::max<uint64_t>(bytes, 1));
  if (e->slot_bytes[q] >= bytes) return Status::OK();  // a smaller partition reuses the slot
  LayoutLock lock(&control_->layout_mutex);
  if (e->slot_bytes[q]) {
    Free(e->slot_offset[q], e->slot_bytes[q]);
    e->slot_bytes[q] = 0;
  }
  uint64_t offset = 0;
  BPS_RETURN_IF_ERROR(Allocate(bytes, &offset));
  // Below arena_backed the pool's pages are there already; past it (the
  // reserve ran out, or there is none) the slot is backed now. Every range
  // below the bump pointer is backed, so the front stays without holes.
  const uint64_t front = control_->arena_backed.load(std::memory_order_acquire);
  if (offset + bytes > front) {
    const uint64_t from = std::max(offset, front);
    Status backed = Back(arena_fd_, from, offset + bytes - from, "local staging of a partition");
    if (!backed.ok()) {
      control_->arena_in_use.fetch_add(bytes);
      Free(offset, bytes);
      return backed;
    }
    RaiseBacked(offset + bytes);
  }
  control_->arena_in_use.fetch_add(bytes);
  e->slot_offset[q] = offset;
  e->slot_bytes[q] = bytes;
  // The owner writes the slot next: map its pages now, in one call, instead
  // of one fault per page on the first round (a new key's first push_pull
  // was ~6x a warm one: 8 us a fault on tmpfs). The warmer mapped the pool's.
  Populate(offset, bytes, /*for_write=*/true);
  return Status::OK();
}

uint64_t LocalSharedMemory::FreeIdleSlots(std::unordered_map<ShmEntry*, IdleSlot>* idle, int q) {
  if (idle->empty()) return 0;
  const uint64_t L = static_cast<uint64_t>(local_size_);
  uint64_t freed = 0;
  // Under the layout lock: a reclaim (which frees slots too) or a new key
  // in the same entry cannot interleave.
  LayoutLock lock(&control_->layout_mutex);
  for (auto it = idle->begin(); it != idle->end();) {
    ShmEntry* e = it->first;
    if (e->key.load(std::memory_order_acquire) != it->second.key || e->slot_bytes[q] == 0) {
      it = idle->erase(it);  // reclaimed (its slots went with it) or freed already
      continue;
    }
    if (e->released.load(std::memory_order_acquire) < (static_cast<uint64_t>(it->second.round) + 1) * L) {
      ++it;  // a local rank still gathers from it
      continue;
    }
    Free(e->slot_offset[q], e->slot_bytes[q]);
    freed += e->slot_bytes[q];
    e->slot_bytes[q] = 0;
    it = idle->erase(it);
  }
  return freed;
}

void LocalSharedMemory::RaiseBacked(uint64_t end) {
  uint64_t cur = control_->arena_backed.load(std::memory_order_acquire);
  while (cur < end && !control_->arena_backed.compare_exchange_weak(cur, end, std::memory_order_acq_rel)) {
  }
}

Status LocalSharedMemory::GrowBacked(uint64_t target, uint64_t max_step) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  target = std::min<uint64_t>(target, control_->arena_capacity);
  const uint64_t from = control_->arena_backed.load(std::memory_order_acquire);
  if (from >= target) return Status::OK();
  // Whole pages, so that the processes' mappings (MapBacked) end on one.
  const uint64_t end = std::min<uint64_t>(control_->arena_capacity, (std::min(target, from + max_step) + page - 1) / page * page);
  // Outside the layout lock: a slot past the front backs (part of) the same
  // range meanwhile, and fallocate of a backed range changes nothing.
  BPS_RETURN_IF_ERROR(Back(arena_fd_, from, end - from, "the warm staging pool (BYTEPS_LOCAL_STAGING_RESERVE)"));
  RaiseBacked(end);
  return Status::OK();
}

uint64_t LocalSharedMemory::MapBacked(uint64_t max_step) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t from = mapped_end_.load(std::memory_order_acquire);
  // Whole backed pages only: populating a page past the front would back it.
  const uint64_t front = control_->arena_backed.load(std::memory_order_acquire) / page * page;
  if (from >= front) return 0;
  const uint64_t end = std::min(front, from + max_step);
  MapPages(from, end - from, /*for_write=*/true);
  mapped_end_.store(end, std::memory_order_release);
  return end - from;
}

void LocalSharedMemory::Populate(uint64_t offset, uint64_t bytes, bool for_write) {
  if (offset + bytes <= mapped_end()) return;  // the warmer mapped it
  MapPages(offset, bytes, for_write);
}

void LocalSharedMemory::MapPages(uint64_t offset, uint64_t bytes, bool for_write) {
#if defined(MADV_POPULATE_READ) && defined(MADV_POPULATE_WRITE)
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t start = offset / page * page;
  const uint64_t end = (offset + bytes + page - 1) / page * page;
  // Best effort: an older kernel (before 5.14) says EINVAL and the pages
  // fault in on first touch, as before.
  madvise(arena_ + start, end - start, for_write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ);
#else
  (void)offset;
  (void)bytes;
  (void)for_write;
#endif
}

void LocalSharedMemory::Ring() {
  for (int q = 0; q < local_size_; ++q) RingRank(q);
}

void LocalSharedMemory::RingRank(int q) {
  control_->doorbell[q].fetch_add(1, std::memory_order_acq_rel);
  if (control_->sleeping[q].load(std::memory_order_acquire)) FutexWakeAll(&control_->doorbell[q]);
}

void LocalSharedMemory::WaitDoorbell(int local_rank, uint32_t seen, int timeout_ms) {
  control_->sleeping[local_rank].store(1, std::memory_order_seq_cst);
  if (control_->doorbell[local_rank].load(std::memory_order_seq_cst) == seen) {
    FutexWait(&control_->doorbell[local_rank], seen, timeout_ms);
  }
  control_->sleeping[local_rank].store(0, std::memory_order_release);
}

}  // namespace bps
