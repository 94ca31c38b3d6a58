"""The Keras callback classes ours derive from: tf.keras's, i.e. Keras 3's,
or tf_keras's under TF_USE_LEGACY_KERAS=1 (byteps_native/tf/keras/flavor.py).

Keras 2's fit also accepts our Keras 3-based callbacks (a script that imports
tf_keras without the variable): it asks each callback which batch hooks it
implements, which Keras 3's base class does not say, so the mixin answers
'all of them' (the hooks that are not overridden do nothing)."""
from byteps_native.tf.keras.flavor import keras2_module, legacy_keras_requested

if legacy_keras_requested():
    _keras = keras2_module()
else:
    import keras as _keras


class _AnyKerasHooks:
    def _implements_train_batch_hooks(self):
        return True

    def _implements_test_batch_hooks(self):
        return True

    def _implements_predict_batch_hooks(self):
        return True


class Callback(_AnyKerasHooks, _keras.callbacks.Callback):
    pass


ModelCheckpoint = _keras.callbacks.ModelCheckpoint
