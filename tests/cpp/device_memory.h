// Where a C++ test's device tensors live. The engine and reducer suites are
// written once against this: host memory stands in for a GPU's under the
// emulated collectives (CI), and tests/cpp/gpu/cuda_memory.h puts them in
// real GPU memory for NCCL (the CUDA build of these tests, on a GPU machine).
#pragma once
#include <cstddef>
#include <cstdlib>
#include <cstring>

namespace bps {
namespace testing_support {

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  // The device (TensorView::device) of the job's rank `rank`: local ranks of
  // one machine must be on distinct GPUs for NCCL.
  virtual int DeviceOf(int rank) const = 0;
  virtual void* Alloc(int device, size_t bytes) = 0;
  virtual void Free(int device, void* p) = 0;
  // Synchronous: the data is in place when these return.
  virtual void Upload(int device, void* dst, const void* src, size_t bytes) = 0;
  virtual void Download(int device, void* dst, const void* src, size_t bytes) = 0;
  // A stream of `device` for stream-ordered results (Engine::Submit's
  // result_stream), and whether every such stream ran dry within `seconds`
  // (each hold on it was released).
  virtual void* ResultStream(int device) = 0;
  virtual bool ResultStreamsDrained(double seconds) = 0;
};

// The emulation's "device": host memory, every rank on device 0.
class HostAsDeviceMemory : public DeviceMemory {
 public:
  int DeviceOf(int rank) const override { return 0; }
  void* Alloc(int device, size_t bytes) override { return std::malloc(bytes ? bytes : 1); }
  void Free(int device, void* p) override { std::free(p); }
  void Upload(int device, void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void Download(int device, void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  // The emulated collectives hold no stream: any non-null token will do.
  void* ResultStream(int device) override { return this; }
  bool ResultStreamsDrained(double seconds) override { return true; }
};

// A device buffer owned by the test.
class DeviceBuffer {
 public:
  DeviceBuffer(DeviceMemory& memory, int device, size_t bytes)
      : memory_(&memory), device_(device), bytes_(bytes), data_(memory.Alloc(device, bytes)) {}
  ~DeviceBuffer() { memory_->Free(device_, data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  char* bytes() const { return static_cast<char*>(data_); }
  template <typename T>
  void Write(const T* src, size_t count) {
    memory_->Upload(device_, data_, src, count * sizeof(T));
  }
  template <typename T>
  void Read(T* dst, size_t count) const {
    memory_->Download(device_, dst, data_, count * sizeof(T));
  }

 private:
  DeviceMemory* memory_;
  int device_;
  size_t bytes_;
  void* data_;
};

}  // namespace testing_support
}  // namespace bps
