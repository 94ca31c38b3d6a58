"""Horovod's ``hvd.elastic`` for Keras is not offered: Horovod's Keras
elastic state lives in the process, which torchrun's restarts discard.
Use keras.callbacks.BackupAndRestore under torchrun --max-restarts (it
resumes from the last epoch after a restart), or byteps_native.torch.elastic."""


def __getattr__(name):
    raise AttributeError(
        f"byteps_native.tf.keras.elastic.{name} is not offered: run the script under torchrun --max-restarts N "
        "with keras.callbacks.BackupAndRestore(backup_dir) in model.fit, which resumes from the last epoch "
        "after a worker fails (docs/migration.md)")
