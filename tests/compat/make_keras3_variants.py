"""Regenerate scripts/keras3/: copies of the ported TF 2 scripts with the Keras 2
API that Keras 3 removed replaced (lines marked 'keras3:') and the run length
cut for a 2-core CI box (lines marked 'ci-size:'). Nothing else changes.

    python3 tests/compat/make_keras3_variants.py
"""
import os
import re

from scripts_table import KERAS3_VARIANTS, SCRIPTS

KERAS3 = [("opt.variables()", "opt.variables"),
          ("experimental_run_tf_function=False)", ")"),
          ("'./checkpoint-{epoch}.h5'", "'./checkpoint-{epoch}.keras'"),
          ("opt.lr.assign(", "opt.learning_rate.assign("),
          ("tf.keras.backend.set_value(state.model.optimizer.lr,  ", "state.model.optimizer.learning_rate.assign(")]
CI_SIZE = [(r"epochs=24", "epochs=2"),
           (r"steps_per_epoch=500 // (hvd|bps)\.size\(\)", r"steps_per_epoch=20 // \1.size()"),
           (r"take\(10000 // (hvd|bps)\.size\(\)\)", r"take(40 // \1.size())"),
           (r"warmup_epochs=3", "warmup_epochs=1")]


def convert(lines):
    out = []
    for line in lines:
        if line.startswith("# Ported from"):
            out.append(line.replace("only the import lines changed.",
                                    "import lines changed, plus the lines marked\n# 'keras3:' (Keras 2 API that "
                                    "Keras 3 removed) and 'ci-size:' (fewer steps for a 2-core CI box)."))
            continue
        new = line
        for old, replacement in KERAS3:
            new = new.replace(old, replacement)
        marks = ["keras3:"] if new != line else []
        sized = new
        for pattern, replacement in CI_SIZE:
            sized = re.sub(pattern, replacement, sized)
        if sized != new:
            marks.append("ci-size:")
        out.append(sized + ("  # " + " ".join(marks) if marks else ""))
    return out


def main():
    os.makedirs(os.path.join(SCRIPTS, "keras3"), exist_ok=True)
    for name in KERAS3_VARIANTS:
        with open(os.path.join(SCRIPTS, name)) as f:
            lines = f.read().splitlines()
        with open(os.path.join(SCRIPTS, "keras3", name), "w") as f:
            f.write("\n".join(convert(lines)) + "\n")


if __name__ == "__main__":
    main()
