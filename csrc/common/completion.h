// How an accepted operation reports its end.
#pragma once

namespace bps {

// Called exactly once per accepted operation, from an engine thread, never
// from inside the submitting call. `status_code` is a StatusCode's value;
// `message` is empty on success and valid only during the call. Must not
// block for long. A plain function and an int, not std::function and
// StatusCode: the C ABI's bps_done_fn is this very type
// (c_api/abi_types.h), so a framework's callback reaches the engine as is.
using DoneCallback = void (*)(void* user_data, int status_code, const char* message);

}  // namespace bps
