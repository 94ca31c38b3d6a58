#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "compression/codec.h"

namespace bps {
namespace {

// A function-local static: codecs register from static initializers of
// other files, in an order the language leaves open.
struct Registry {
  std::mutex mu;
  std::vector<const Codec*> codecs;
  // Every payload is looked up by its wire id: without the lock.
  std::atomic<const Codec*> by_wire_id[256] = {};
};
Registry& TheRegistry() {
  static Registry* registry = new Registry;  // never destroyed: codecs outlive static destruction order
  return *registry;
}

}  // namespace

void Codec::Decode(const CodecHeader& h, const uint32_t* cuts, const char* body, uint64_t key, uint32_t round,
                   float* out) const {
  memset(out, 0, uint64_t{h.count} * sizeof(float));
  DecodeAdd(h, cuts, body, key, round, out);
}

bool RegisterCodec(const Codec* codec) {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const Codec* known : r.codecs) {
    if (known->wire_id() == codec->wire_id() || strcmp(known->name(), codec->name()) == 0) {
      fprintf(stderr, "byteps: codec '%s' (wire id %d) clashes with codec '%s' (wire id %d): names and wire ids "
              "must be unique (csrc/compression/codec.h)\n", codec->name(), codec->wire_id(), known->name(),
              known->wire_id());
      abort();
    }
  }
  r.codecs.push_back(codec);
  r.by_wire_id[codec->wire_id()].store(codec, std::memory_order_release);
  std::sort(r.codecs.begin(), r.codecs.end(),
            [](const Codec* a, const Codec* b) { return a->wire_id() < b->wire_id(); });
  return true;
}

const Codec* FindCodec(const std::string& name) {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const Codec* c : r.codecs) {
    if (name == c->name()) return c;
  }
  return nullptr;
}

const Codec* FindCodec(uint8_t wire_id) { return TheRegistry().by_wire_id[wire_id].load(std::memory_order_acquire); }

std::vector<const Codec*> RegisteredCodecs() {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.codecs;
}

}  // namespace bps
