"""Where each ported upstream script is: the scripts themselves under
third_party/<project>/scripts/ (horovod_*, byteps_*), and their variants
written at run time into the run's folder:

- keras3/<name>: the Keras 2 API that Keras 3 removed replaced (lines marked
  'keras3:') and the run length cut for a 2-core CI box ('ci-size:'), nothing else;
- keras2/<name>: for TF_USE_LEGACY_KERAS=1 (tf.keras is Keras 2), only the run
  length cut: the API lines stay as upstream wrote them.
"""
import os
import re

from tests.support.paths import THIRD_PARTY

KERAS3 = [("opt.variables()", "opt.variables"),
          ("experimental_run_tf_function=False)", ")"),
          ("'./checkpoint-{epoch}.h5'", "'./checkpoint-{epoch}.keras'"),
          ("opt.lr.assign(", "opt.learning_rate.assign("),
          ("tf.keras.backend.set_value(state.model.optimizer.lr,  ", "state.model.optimizer.learning_rate.assign(")]
CI_SIZE = [(r"epochs=24", "epochs=2"),
           (r"steps_per_epoch=500 // (hvd|bps)\.size\(\)", r"steps_per_epoch=20 // \1.size()"),
           (r"take\(10000 // (hvd|bps)\.size\(\)\)", r"take(40 // \1.size())"),
           (r"warmup_epochs=3", "warmup_epochs=1")]
VARIANTS = {"keras3": KERAS3, "keras2": []}


def upstream_path(name):
    """third_party/<project>/scripts/<name>: the project is the name's prefix."""
    return os.path.join(THIRD_PARTY, name.split("_", 1)[0], "scripts", name)


def convert(lines, api_replacements=KERAS3):
    out = []
    for line in lines:
        if line.startswith("# Ported from"):
            out.append(line.replace("only the import lines changed.",
                                    "import lines changed, plus the lines marked\n# 'keras3:' (Keras 2 API that "
                                    "Keras 3 removed) and 'ci-size:' (fewer steps for a 2-core CI box)."
                                    if api_replacements else
                                    "import lines changed, plus the lines marked\n# 'ci-size:' (fewer steps for "
                                    "a 2-core CI box). Run with TF_USE_LEGACY_KERAS=1 (Keras 2)."))
            continue
        new = line
        for old, replacement in api_replacements:
            new = new.replace(old, replacement)
        marks = ["keras3:"] if new != line else []
        sized = new
        for pattern, replacement in CI_SIZE:
            sized = re.sub(pattern, replacement, sized)
        if sized != new:
            marks.append("ci-size:")
        out.append(sized + ("  # " + " ".join(marks) if marks else ""))
    return out


def script_path(name, workdir):
    """The file to run for `name` ("x.py", "keras3/x.py" or "keras2/x.py"); a
    variant is written into workdir/<variant>/ first."""
    variant, _, base = name.rpartition("/")
    if not variant:
        return upstream_path(name)
    with open(upstream_path(base)) as f:
        lines = f.read().splitlines()
    path = os.path.join(workdir, variant, base)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(convert(lines, VARIANTS[variant])) + "\n")
    return path
