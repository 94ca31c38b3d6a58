"""Every public name of Horovod's and BytePS's torch/TF/Keras API exists in
byteps_native, or its absence says what to use instead."""
from tests.compat.api_names import rows


def test_every_upstream_name_is_present_or_explained():
    missing = [f"{upstream}.{name} -> {ours}: {detail}" for upstream, name, ours, status, detail in rows()
               if status == "missing"]
    assert not missing, "\n".join(missing)
