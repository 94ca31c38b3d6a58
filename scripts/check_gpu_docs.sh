#!/usr/bin/env bash
# Runs the GPU commands of README.md ("GPUs"), docs/quickstart.md ("GPUs") and
# docs/at_scale.md ("GPU machines") as written, on a GPU machine, and exits
# non-zero at the first one that fails:
#   1. the CUDA build (README), with the README's compiler fix when the
#      environment's CC/CXX link libstdc++ statically and the build refuses them;
#   2. the engine's capabilities must include CUDA (`python -m byteps_native.info` logged beside);
#   3. DDP on every GPU of this machine (README);
#   4. the multi-machine GPU recipes (quickstart: --master_addr; at_scale: c10d
#      rendezvous), emulated on this one host: two "machines" of one GPU each,
#      node 0's address 127.0.0.1 instead of 10.0.0.1.
# Each command is first looked up verbatim in its document, so a doc edit that
# this script does not follow fails here (and in CI: --check-docs).
#
#   scripts/check_gpu_docs.sh                # on the GPU machine, from the repo root
#   scripts/check_gpu_docs.sh --check-docs   # only the verbatim look-ups (no GPU needed)
#
# Logs: $OUT (the device tool's folder) or out/gpu-docs/.
set -uo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO" || exit 1
LOG="${OUT:-$REPO/out/gpu-docs}"
# NVLink multicast stays off on shared hosts (it can take the GPUs down).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1

BUILD='BYTEPS_WITH_CUDA=1 python -m pip install --no-build-isolation -e .'
BUILD_WITH_PYTHONS_COMPILERS='BYTEPS_CC=gcc BYTEPS_CXX=g++ BYTEPS_WITH_CUDA=1 python -m pip install --no-build-isolation -e .'
INFO='python -m byteps_native.info'
DDP='torchrun --standalone --nproc_per_node gpu -m byteps_native.examples.ddp_digits --device cuda'

fail() { echo "check_gpu_docs: FAILED: $*" >&2; exit 1; }

# The multi-line torchrun block of a document that contains $1, joined into one line.
doc_block() {
  awk -v key="$2" '
    /^```/ { inside = !inside; if (!inside && found) exit; block = ""; next }
    inside { line = $0; sub(/\\[ ]*$/, "", line); block = block " " line
             if (index($0, key)) found = 1 }
    END { if (found) print block }' "$1" | sed -E 's/ +/ /g; s/^ //'
}
QUICKSTART_MULTI="$(doc_block docs/quickstart.md '--master_addr 10.0.0.1')"
AT_SCALE_MULTI="$(doc_block docs/at_scale.md '-m byteps_native.examples.ddp_digits --device cuda')"

check_docs() {
  local cmd
  for cmd in "$BUILD" "$BUILD_WITH_PYTHONS_COMPILERS" "$INFO" "$DDP"; do
    grep -qF -- "$cmd" README.md || fail "README.md no longer says: $cmd"
  done
  grep -qF -- "$DDP" docs/quickstart.md || fail "docs/quickstart.md no longer says: $DDP"
  for block in "$QUICKSTART_MULTI" "$AT_SCALE_MULTI"; do
    case "$block" in
      *"--nnodes 2 --nproc_per_node 8 --node_rank \$NODE_RANK"*10.0.0.1*"--device cuda"*) ;;
      *) fail "a multi-machine GPU recipe is not where this script expects it: '$block'" ;;
    esac
  done
  echo "check_gpu_docs: the documents still say what this script runs"
}
check_docs
[ "${1:-}" = "--check-docs" ] && exit 0
mkdir -p "$LOG"

# The commands use `pip`, `python` and `torchrun` of the Python that holds torch.
PY="${PYTHON:-python3}"
PATH="$(dirname "$(command -v "$PY")"):$PATH"
export PATH
run() {  # run NAME COMMAND: the command as written, output to $LOG/NAME.log
  echo "== $2"
  local start=$SECONDS
  if bash -c "$2" >"$LOG/$1.log" 2>&1; then
    echo "   ok ($((SECONDS - start)) s)"
    return 0
  fi
  echo "   exit status != 0 after $((SECONDS - start)) s; last lines of $LOG/$1.log:"
  tail -40 "$LOG/$1.log"
  return 1
}

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU') || gpus=0
[ "$gpus" -ge 1 ] || fail "no GPU here (nvidia-smi -L lists none)"
echo "check_gpu_docs: $gpus GPU(s); CC=${CC:-unset} CXX=${CXX:-unset}; $(command -v python)"

# 1. Build. An environment whose CC/CXX link libstdc++ statically must be
# refused before compiling, with the README's fix in the message.
if ! run build "$BUILD"; then
  grep -q "links libstdc++ statically" "$LOG/build.log" || fail "the CUDA build"
  grep -qF "BYTEPS_CXX=" "$LOG/build.log" || fail "the build refused the compiler without naming the fix"
  echo "   (refused this environment's compiler, as the README says; its fix:)"
  run build-with-pythons-compilers "$BUILD_WITH_PYTHONS_COMPILERS" || fail "the CUDA build with Python's compilers"
fi
for lib in byteps_native/lib/libbyteps_engine.so byteps_native/core/_core*.so byteps_native/torch/_c10d*.so; do
  python build_tools/cxx_runtime.py "$lib" >/dev/null || fail "$lib"
done

# 2. The engine has its GPU path.
run info "$INFO" || fail "$INFO"
cat "$LOG/info.log"
python -c "from byteps_native._runtime import library; import sys; sys.exit(0 if library.capabilities()['cuda'] else 1)" \
  || fail "the engine was built without CUDA (its capabilities say so; $INFO has the build text)"

# 3. DDP on all GPUs of this machine.
run ddp "$DDP" || fail "$DDP"
grep -q "test accuracy" "$LOG/ddp.log" || fail "the DDP example printed no test accuracy"

# 4. Two machines of one GPU each, on this host.
emulate() {  # emulate NAME BLOCK
  local cmd port pids=() rc=0 node
  port=$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  cmd="$(echo "$2" | sed -e 's/--nproc_per_node 8/--nproc_per_node 1/' -e "s/10\.0\.0\.1:29500/127.0.0.1:$port/" \
                        -e 's/10\.0\.0\.1/127.0.0.1/' -e "s/--master_port 29500/--master_port $port/")"
  echo "== 2 machines x 1 GPU: $cmd"
  for node in 0 1; do
    NODE_RANK=$node CUDA_VISIBLE_DEVICES=$((node % gpus)) timeout 300 bash -c "$cmd" >"$LOG/$1-node$node.log" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
  if [ $rc != 0 ] || ! grep -q "test accuracy" "$LOG/$1-node0.log"; then
    tail -30 "$LOG/$1-node0.log" "$LOG/$1-node1.log"
    fail "$1: $cmd"
  fi
  echo "   ok"
}
emulate quickstart-multi-machine "$QUICKSTART_MULTI"
emulate at-scale-multi-machine "$AT_SCALE_MULTI"
echo "check_gpu_docs: all GPU commands of the docs passed"
