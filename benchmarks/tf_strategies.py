"""Steps per second of one Keras model trained by 2 processes on this host:
MirroredStrategy(cross_device_ops=BytePSOps()) against TensorFlow's own
MultiWorkerMirroredStrategy (ring collectives over gRPC), in the same run.

    python benchmarks/tf_strategies.py [--steps 60] [--global-batch 256] [--hidden 512]

Configurations (same model, same global batch, synthetic data):
  bytepsops-2x2  2 processes x 2 logical CPU devices, MirroredStrategy(BytePSOps), 1 server
  bytepsops-2x1  2 processes x 1 CPU device,          MirroredStrategy(BytePSOps), 1 server
  mwms-2x1       2 processes x 1 CPU device,          MultiWorkerMirroredStrategy (RING)
  mwms-4x1       4 processes x 1 CPU device,          MultiWorkerMirroredStrategy (RING)
MultiWorkerMirroredStrategy uses one CPU device per worker (it ignores logical
CPU devices), so bytepsops-2x1 vs mwms-2x1 is the like-for-like comparison;
bytepsops-2x2 vs mwms-4x1 compares 4 replicas each (MWMS can only reach 4
CPU replicas with 4 processes). --no-mwms-4x1 skips the last.
"""
import argparse
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:  # run as a script: the repository's tests.support importable
    sys.path.insert(0, REPO)
from tests.support.ports import distinct_free_ports  # noqa: E402

PROCESSES = 2


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=60, help="timed steps (after --warmup)")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--global-batch", type=int, default=256)
    parser.add_argument("--hidden", type=int, default=512, help="width of the two hidden layers")
    parser.add_argument("--no-mwms-4x1", dest="mwms_4x1", action="store_false",
                        help="skip the 4-replica MWMS reference (4 processes)")
    parser.add_argument("--role", choices=["orchestrate", "byteps", "mwms"], default="orchestrate",
                        help=argparse.SUPPRESS)
    parser.add_argument("--devices", type=int, default=1, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


# -- worker side ---------------------------------------------------------------

def run_worker(args):
    import tensorflow as tf
    if args.devices > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(args.devices)])
    import keras
    import numpy as np

    if args.role == "byteps":
        import byteps_native.tf as bps
        strategy = tf.distribute.MirroredStrategy(cross_device_ops=bps.BytePSOps())
        rank = bps.rank()
    else:
        strategy = tf.distribute.MultiWorkerMirroredStrategy(
            communication_options=tf.distribute.experimental.CommunicationOptions(
                implementation=tf.distribute.experimental.CommunicationImplementation.RING))
        rank = json.loads(os.environ["TF_CONFIG"])["task"]["index"]

    # Each process makes its own rows (no sharding needed); both strategies
    # rebatch a global batch into global_batch / num_replicas_in_sync per replica.
    rng = np.random.default_rng(rank)
    x = rng.standard_normal((args.global_batch * 4, 64)).astype(np.float32)
    y = rng.integers(0, 10, args.global_batch * 4).astype(np.int32)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(args.global_batch, drop_remainder=True)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    dataset = dataset.with_options(options)

    with strategy.scope():
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((64,)),
                                  keras.layers.Dense(args.hidden, activation="relu"),
                                  keras.layers.Dense(args.hidden, activation="relu"),
                                  keras.layers.Dense(10)])
        optimizer = keras.optimizers.SGD(0.01)
    per_example = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)

    # A custom loop rather than model.fit: Keras 3.15's fit cannot start under
    # MultiWorkerMirroredStrategy with one CPU device per worker (its symbolic
    # build reduces a PerReplica that the strategy then fails to convert).
    @tf.function
    def train_step(batch):
        def step_fn(xb, yb):
            with tf.GradientTape() as tape:
                loss = tf.nn.compute_average_loss(per_example(yb, model(xb, training=True)))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        return strategy.run(step_fn, args=batch)

    iterator = iter(strategy.experimental_distribute_dataset(dataset))
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            start = time.perf_counter()
        losses = train_step(next(iterator))
    [float(v) for v in strategy.experimental_local_results(losses)]  # wait for the last step
    seconds = time.perf_counter() - start
    if rank == 0:
        print("RESULT " + json.dumps({"steps_per_s": args.steps / seconds, "params": model.count_params(),
                                      "replicas": strategy.num_replicas_in_sync}), flush=True)


# -- orchestrator --------------------------------------------------------------


def _worker_argv(args, role, devices):
    return [sys.executable, os.path.abspath(__file__), "--role", role, "--devices", str(devices),
            "--steps", str(args.steps), "--warmup", str(args.warmup),
            "--global-batch", str(args.global_batch), "--hidden", str(args.hidden)]


def _result(output, what):
    for line in output.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise RuntimeError(f"{what} produced no result; its output ends with:\n{output[-3000:]}")


def _env():
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))


def run_byteps(args, devices):
    cmd = [sys.executable, "-m", "byteps_native.launch", "--machines", str(PROCESSES), "--local-workers", "1",
           "--servers", "1", "--"] + _worker_argv(args, "byteps", devices)
    proc = subprocess.run(cmd, env=_env(), cwd=REPO, capture_output=True, text=True, timeout=900)
    return _result(proc.stdout + proc.stderr, f"bytepsops-{PROCESSES}x{devices}")


def run_mwms(args, processes=PROCESSES):
    ports = distinct_free_ports(processes)
    cluster = {"worker": [f"localhost:{p}" for p in ports]}
    procs = []
    for index in range(processes):
        env = dict(_env(), TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}}))
        procs.append(subprocess.Popen(_worker_argv(args, "mwms", 1), env=env, cwd=REPO,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = [p.communicate(timeout=900)[0] for p in procs]
    return _result(outputs[0], f"mwms-{processes}x1")


def orchestrate(args):
    results = {
        f"bytepsops-{PROCESSES}x2": run_byteps(args, 2),
        f"bytepsops-{PROCESSES}x1": run_byteps(args, 1),
        f"mwms-{PROCESSES}x1": run_mwms(args),
    }
    if args.mwms_4x1:
        results["mwms-4x1"] = run_mwms(args, 4)
    params = results[f"mwms-{PROCESSES}x1"]["params"]
    print(f"model: MLP 64-{args.hidden}-{args.hidden}-10 ({params} parameters, {params * 4 / 1e6:.2f} MB "
          f"of float32 gradients), global batch {args.global_batch}, {args.steps} timed steps, "
          f"{os.cpu_count()} CPU cores")
    for name, r in results.items():
        print(f"{name:16s} {r['steps_per_s']:8.2f} steps/s  ({r['replicas']} replicas)")
    mwms = results[f"mwms-{PROCESSES}x1"]["steps_per_s"]
    print(f"ratio bytepsops-{PROCESSES}x1 / mwms-{PROCESSES}x1 = "
          f"{results[f'bytepsops-{PROCESSES}x1']['steps_per_s'] / mwms:.2f}  (2 replicas each)")
    if "mwms-4x1" in results:
        print(f"ratio bytepsops-{PROCESSES}x2 / mwms-4x1 = "
              f"{results[f'bytepsops-{PROCESSES}x2']['steps_per_s'] / results['mwms-4x1']['steps_per_s']:.2f}"
              f"  (4 replicas each)")


def main():
    args = parse_args()
    if args.role == "orchestrate":
        orchestrate(args)
    else:
        run_worker(args)


if __name__ == "__main__":
    main()
