"""Keras predict / evaluate under MirroredStrategy(BytePSOps), as the
TensorFlow Keras tutorials run them under MultiWorkerMirroredStrategy: the
whole input on every process; predict must return every row, in the input's
order, on every process; the SavedModel export/reload round trip must serve
the same predictions on the whole input.

argv[1]: "keras3" (the keras package) or "keras2" (tf_keras; the test sets
TF_USE_LEGACY_KERAS=1 so that tf.keras is tf_keras). argv[2]: logical CPU
devices per process.
"""
import os
import sys

import common

FLAVOR, LOCAL = sys.argv[1], int(sys.argv[2])
tf = common.setup_tensorflow(logical_devices=LOCAL)
if FLAVOR == "keras2":
    import tf_keras as keras  # noqa: E402
else:
    import keras  # noqa: E402
import numpy as np  # noqa: E402

import byteps_native.tf as bps  # noqa: E402

strategy = tf.distribute.MirroredStrategy(cross_device_ops=bps.BytePSOps())
rank, size = bps.rank(), bps.size()
x, y = common.digits(64)
out_dir = os.environ["RESULT_DIR"]

with strategy.scope():
    keras.utils.set_random_seed(1234)
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dense(10)])
    model.compile(optimizer=keras.optimizers.SGD(0.1),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], jit_compile=False)


def local_forward(rows):
    """The model on `rows` in this process, no strategy involved: the expected predictions."""
    w1, b1, w2, b2 = model.get_weights()
    return np.maximum(rows @ w1 + b1, 0) @ w2 + b2


result = {"rank": rank, "flavor": keras.__name__, "local": LOCAL}
predictions = model.predict(x, batch_size=16, verbose=0)
result["predict_rows"] = int(predictions.shape[0])
result["predict_max_error"] = float(np.abs(predictions - local_forward(x)).max())
# 40 rows in global batches of 16: the last batch (8 rows) is split unevenly over the replicas
uneven = model.predict(x[:40], batch_size=16, verbose=0)
result["uneven_rows"] = int(uneven.shape[0])
result["uneven_max_error"] = float(np.abs(uneven - local_forward(x[:40])).max())
dataset = tf.data.Dataset.from_tensor_slices(x).batch(16)
from_dataset = model.predict(dataset, verbose=0)
result["dataset_rows"] = int(from_dataset.shape[0])
result["dataset_max_error"] = float(np.abs(from_dataset - local_forward(x)).max())

logits = local_forward(x)
shifted = logits - logits.max(axis=1, keepdims=True)
expected_loss = float(np.mean(np.log(np.exp(shifted).sum(axis=1)) - shifted[np.arange(len(y)), y]))
expected_accuracy = float(np.mean(logits.argmax(axis=1) == y))
loss, accuracy = model.evaluate(x, y, batch_size=16, verbose=0)
result["evaluate"] = [float(loss), float(accuracy)]
result["expected_evaluate"] = [expected_loss, expected_accuracy]

# The tutorial's round trip: export, reload outside the strategy, compare on the whole input.
path = os.path.join(out_dir, f"saved_model_rank{rank}")
if FLAVOR == "keras2":
    model.save(path, save_format="tf")
    reloaded = keras.models.load_model(path)
    served = reloaded.predict(x, batch_size=16, verbose=0)
else:
    model.export(path, verbose=False)
    reloaded = tf.saved_model.load(path)  # kept: the function refers to its variables
    served = reloaded.serve(tf.constant(x)).numpy()
result["saved_model_rows"] = int(served.shape[0])
result["saved_model_max_error"] = float(np.abs(served - predictions).max())
common.write_result(rank, result)
