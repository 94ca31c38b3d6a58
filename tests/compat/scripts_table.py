"""The ported upstream scripts (third_party/<project>/scripts/, found by
ported_scripts.py), how to run each small (command-line arguments only: fewer
epochs/iterations), and what we know about each."""

# name -> (arguments, CI subset?). Scripts that train no wrapped model
# (their results are printed values) are checked by exit status alone:
EXIT_STATUS_ONLY = {"horovod_adasum_small_model.py"}
TABLE = {
    "horovod_pytorch_mnist.py": (["--epochs", "1", "--batch-size", "64", "--no-cuda"], True),
    "horovod_pytorch_synthetic_benchmark.py": (["--batch-size", "4", "--num-warmup-batches", "1",
                                                "--num-batches-per-iter", "2", "--num-iters", "2", "--no-cuda"],
                                               False),
    "horovod_pytorch_mnist_elastic.py": (["--epochs", "1", "--no-cuda"], False),
    "horovod_pytorch_synthetic_benchmark_elastic.py": (["--batch-size", "4", "--num-warmup-batches", "1",
                                                        "--num-batches-per-iter", "2", "--num-iters", "2",
                                                        "--no-cuda"], False),
    "horovod_adasum_small_model.py": (["--op", "Adasum"], True),
    "horovod_tensorflow2_mnist.py": ([], False),
    "horovod_tensorflow2_keras_mnist.py": ([], False),
    "horovod_tensorflow2_synthetic_benchmark.py": (["--model", "MobileNetV2", "--batch-size", "2",
                                                    "--num-warmup-batches", "1", "--num-batches-per-iter", "1",
                                                    "--num-iters", "1", "--fp16-allreduce"], False),
    "horovod_tensorflow2_keras_synthetic_benchmark.py": (["--model", "MobileNetV2", "--batch-size", "2",
                                                          "--num-batches-per-iter", "1", "--num-iters", "1",
                                                          "--fp16-allreduce"], False),
    "horovod_keras_mnist.py": ([], False),
    "horovod_keras_mnist_advanced.py": ([], False),
    "horovod_tensorflow2_mnist_elastic.py": ([], False),
    "horovod_tensorflow2_keras_mnist_elastic.py": ([], False),
    "byteps_train_mnist_byteps.py": (["--epochs", "1", "--no-cuda"], False),
    "byteps_benchmark_byteps.py": (["--batch-size", "4", "--num-warmup-batches", "1", "--num-batches-per-iter",
                                    "2", "--num-iters", "2", "--no-cuda"], True),
    "byteps_benchmark_byteps_ddp.py": (["--batch-size", "4", "--num-warmup-batches", "1",
                                        "--num-batches-per-iter", "2", "--num-iters", "2", "--no-cuda"], False),
    "byteps_tensorflow_tensorflow2_mnist.py": ([], False),
    "byteps_tensorflow_tensorflow2_keras_mnist.py": ([], False),
    "byteps_tensorflow_synthetic_benchmark_tf2.py": (["--model", "MobileNetV2", "--batch-size", "2",
                                                      "--num-warmup-batches", "1", "--num-batches-per-iter", "1",
                                                      "--num-iters", "1"], False),
    "byteps_keras_keras_mnist.py": ([], False),
    "byteps_keras_keras_synthetic_benchmark_tf2.py": (["--model", "MobileNetV2", "--batch-size", "2",
                                                       "--num-warmup-batches", "1", "--num-batches-per-iter", "1",
                                                       "--num-iters", "1"], False),
    "byteps_tests_test_tensorflow_keras.py": ([], False),
}

# BytePS's own tests of its later torch/TF collectives (bytedance/byteps tests/,
# the commits named in each file's first line; at f5df52fe BytePS's tests are
# MXNet ones and test_tensorflow_keras.py). Their knobs (TEST_GPU, TEST_NUM_ITER)
# come from the environment; the defaults ask for a GPU and 250 iterations.
TABLE.update({
    "byteps_tests_torch_test_torch_broadcast_object.py": ([], True),
    "byteps_tests_torch_test_torch_allgather.py": ([], False),
    "byteps_tests_test_tensorflow_cpu_allreduce.py": ([], False),
    "byteps_tests_tensorflow_test_tensorflow2_allreduce.py": ([], False),
    "byteps_tests_tensorflow_test_tensorflow_allgather.py": ([], False),
})
SCRIPT_ENV = {
    "byteps_tests_torch_test_torch_allgather.py": {"TEST_GPU": "0", "TEST_NUM_ITER": "2"},
    "byteps_tests_tensorflow_test_tensorflow_allgather.py": {"TEST_NUM_ITER": "2"},
}
# Scripts that report a wrong result by printing, not by their exit status.
LOG_MUST_NOT_CONTAIN = {"byteps_tests_test_tensorflow_cpu_allreduce.py": " wrong"}
# They train no wrapped model: their own assertions and the exit status decide.
EXIT_STATUS_ONLY |= {"byteps_tests_torch_test_torch_broadcast_object.py", "byteps_tests_torch_test_torch_allgather.py",
                     "byteps_tests_test_tensorflow_cpu_allreduce.py",
                     "byteps_tests_tensorflow_test_tensorflow2_allreduce.py",
                     "byteps_tests_tensorflow_test_tensorflow_allgather.py"}

# The TF 2 scripts above use Keras 2 / TF 1 APIs that Keras 3 (TF >= 2.16)
# removed; these copies change only the lines marked 'keras3:' (and
# 'ci-size:' for length), to show the byteps_native side of them works.
KERAS3_VARIANTS = ["horovod_tensorflow2_mnist.py", "horovod_tensorflow2_keras_mnist.py",
                   "horovod_tensorflow2_mnist_elastic.py", "horovod_tensorflow2_keras_mnist_elastic.py",
                   "byteps_tensorflow_tensorflow2_mnist.py", "byteps_tensorflow_tensorflow2_keras_mnist.py",
                   "horovod_tensorflow2_synthetic_benchmark.py", "byteps_tensorflow_synthetic_benchmark_tf2.py"]
for _name in KERAS3_VARIANTS:
    TABLE[f"keras3/{_name}"] = (TABLE[_name][0], False)

# Measured with run_scripts.py (docs/migration.md has the table); the others
# stop in the scripts' own use of APIs that this torch/TF/Keras removed.
EXPECTED_TO_PASS = {
    "horovod_pytorch_mnist.py", "horovod_pytorch_synthetic_benchmark.py", "horovod_pytorch_mnist_elastic.py",
    "horovod_pytorch_synthetic_benchmark_elastic.py", "horovod_adasum_small_model.py",
    "byteps_train_mnist_byteps.py", "byteps_benchmark_byteps.py", "horovod_tensorflow2_mnist_elastic.py",
} | {f"keras3/{name}" for name in KERAS3_VARIANTS} | {
    "byteps_tests_torch_test_torch_broadcast_object.py", "byteps_tests_test_tensorflow_cpu_allreduce.py",
    "byteps_tests_tensorflow_test_tensorflow2_allreduce.py", "byteps_tests_tensorflow_test_tensorflow_allgather.py"}

# Under TF_USE_LEGACY_KERAS=1 (tf.keras is Keras 2, the tf_keras package), as
# Horovod users on TF >= 2.16 run them: the TF scripts above that Keras 3 stops.
LEGACY_KERAS_SCRIPTS = [
    "horovod_tensorflow2_mnist.py", "horovod_tensorflow2_synthetic_benchmark.py", "byteps_tensorflow_tensorflow2_mnist.py",
    "byteps_tensorflow_synthetic_benchmark_tf2.py", "horovod_tensorflow2_keras_mnist.py",
    "horovod_tensorflow2_keras_synthetic_benchmark.py", "horovod_tensorflow2_keras_mnist_elastic.py",
    "byteps_tensorflow_tensorflow2_keras_mnist.py", "horovod_keras_mnist.py", "byteps_keras_keras_mnist.py",
    "byteps_tests_test_tensorflow_keras.py", "horovod_keras_mnist_advanced.py",
    "byteps_keras_keras_synthetic_benchmark_tf2.py"]
# Copies of the long ones with only their run length cut (ported_scripts.py,
# lines marked 'ci-size:'), run under TF_USE_LEGACY_KERAS=1 like the originals.
KERAS2_VARIANTS = ["horovod_tensorflow2_mnist.py", "horovod_tensorflow2_keras_mnist.py",
                   "horovod_tensorflow2_keras_mnist_elastic.py", "byteps_tensorflow_tensorflow2_mnist.py",
                   "byteps_tensorflow_tensorflow2_keras_mnist.py"]
for _name in KERAS2_VARIANTS:
    TABLE[f"keras2/{_name}"] = (TABLE[_name][0], False)
    SCRIPT_ENV[f"keras2/{_name}"] = {"TF_USE_LEGACY_KERAS": "1"}
# Measured under TF_USE_LEGACY_KERAS=1 (docs/migration.md); the 5 long mnist
# scripts pass as-is at full length too, but take 17-25 min each here
# (run_scripts.py --legacy-keras --timeout 5400 NAME...), so their keras2/
# copies stand for them.
LEGACY_KERAS_EXPECTED_TO_PASS = {f"keras2/{name}" for name in KERAS2_VARIANTS} | {
    "horovod_tensorflow2_synthetic_benchmark.py", "horovod_tensorflow2_keras_synthetic_benchmark.py",
    "byteps_tensorflow_synthetic_benchmark_tf2.py"}
