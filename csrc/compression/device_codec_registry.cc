#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "compression/device_codec.h"

namespace bps {
namespace {

std::atomic<const DeviceCodec*>* DeviceCodecs() {
  static std::atomic<const DeviceCodec*>* by_wire_id = new std::atomic<const DeviceCodec*>[256]();
  return by_wire_id;
}

}  // namespace

bool RegisterDeviceCodec(const DeviceCodec* codec) {
  const DeviceCodec* none = nullptr;
  if (!DeviceCodecs()[codec->wire_id()].compare_exchange_strong(none, codec)) {
    fprintf(stderr, "byteps: two device codecs registered wire id %d (csrc/compression/device_codec.h)\n",
            codec->wire_id());
    abort();
  }
  return true;
}

const DeviceCodec* FindDeviceCodec(uint8_t wire_id) { return DeviceCodecs()[wire_id].load(std::memory_order_acquire); }

}  // namespace bps
