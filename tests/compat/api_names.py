"""Every public name of Horovod's and BytePS's torch/TF/Keras API
(upstream_names.json, extracted from their __init__ files at the commits it
records) against ours: present, or absent with an error that says what to
use instead.

    python3 -m tests.compat.api_names            # markdown table
"""
import importlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OURS = {
    "horovod.torch": "byteps_native.torch",
    "horovod.torch.elastic": "byteps_native.torch.elastic",
    "horovod.tensorflow": "byteps_native.tf",
    "horovod.tensorflow.keras": "byteps_native.tf.keras",
    "horovod.tensorflow.keras.callbacks": "byteps_native.tf.keras.callbacks",
    "byteps.torch": "byteps_native.torch",
    "byteps.torch.parallel": "byteps_native.torch.parallel",
    "byteps.tensorflow": "byteps_native.tf",
    "byteps.tensorflow.keras": "byteps_native.tf.keras",
    "byteps.tensorflow.keras.callbacks": "byteps_native.tf.keras.callbacks",
    "byteps.tensorflow.util": "byteps_native.tf.util",
}


def upstream_names():
    with open(os.path.join(HERE, "upstream_names.json")) as f:
        return json.load(f)


def resolve(module_name, name):
    """('present', '') or ('absent', advice) or ('missing', error)."""
    module = importlib.import_module(module_name)
    try:
        getattr(module, name)
        return "present", ""
    except AttributeError as e:
        text = str(e)
        if "on purpose; use" in text or "is not offered" in text:
            return "absent", text.split("; use ", 1)[-1] if "; use " in text else text
        return "missing", text


def rows():
    data = upstream_names()
    for upstream, names in data["modules"].items():
        ours = OURS[upstream]
        for name in names:
            status, detail = resolve(ours, name)
            yield upstream, name, ours, status, detail


def markdown():
    lines = ["| upstream | name | byteps_native | status |", "| --- | --- | --- | --- |"]
    for upstream, name, ours, status, detail in rows():
        cell = f"`{ours}.{name}`" if status == "present" else f"absent: {detail}"
        lines.append(f"| `{upstream}` | `{name}` | {cell} | {status} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(markdown() + "\n")
