"""Regenerate scripts/keras3/: copies of the ported TF 2 scripts with the Keras 2
API that Keras 3 removed replaced (lines marked 'keras3:') and the run length
cut for a 2-core CI box (lines marked 'ci-size:'). Nothing else changes.
And scripts/keras2/: copies for TF_USE_LEGACY_KERAS=1 (tf.keras is Keras 2)
with only the run length cut ('ci-size:'): the API lines stay as upstream wrote them.

    python3 tests/compat/make_keras3_variants.py
"""
import os
import re

from scripts_table import KERAS2_VARIANTS, KERAS3_VARIANTS, SCRIPTS

KERAS3 = [("opt.variables()", "opt.variables"),
          ("experimental_run_tf_function=False)", ")"),
          ("'./checkpoint-{epoch}.h5'", "'./checkpoint-{epoch}.keras'"),
          ("opt.lr.assign(", "opt.learning_rate.assign("),
          ("tf.keras.backend.set_value(state.model.optimizer.lr,  ", "state.model.optimizer.learning_rate.assign(")]
CI_SIZE = [(r"epochs=24", "epochs=2"),
           (r"steps_per_epoch=500 // (hvd|bps)\.size\(\)", r"steps_per_epoch=20 // \1.size()"),
           (r"take\(10000 // (hvd|bps)\.size\(\)\)", r"take(40 // \1.size())"),
           (r"warmup_epochs=3", "warmup_epochs=1")]


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


def main():
    for folder, names, api_replacements in (("keras3", KERAS3_VARIANTS, KERAS3), ("keras2", KERAS2_VARIANTS, [])):
        os.makedirs(os.path.join(SCRIPTS, folder), exist_ok=True)
        for name in names:
            with open(os.path.join(SCRIPTS, name)) as f:
                lines = f.read().splitlines()
            with open(os.path.join(SCRIPTS, folder, name), "w") as f:
                f.write("\n".join(convert(lines, api_replacements)) + "\n")


if __name__ == "__main__":
    main()
