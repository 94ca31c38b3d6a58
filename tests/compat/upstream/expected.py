"""Upstream tests that fail here, each with its class and reason.

Classes: 'gpu' (needs CUDA), 'horovod-internal' (tests Horovod's own
machinery: MPI/Gloo controller, timeline files, its error texts for
mismatched collectives), 'not offered' (a feature byteps_native leaves out,
docs/migration.md says what to use instead), 'framework' (the test uses an
API that today's torch / TensorFlow removed)."""
import fnmatch

SUITES = ["horovod/test_torch.py", "horovod/test_tensorflow2_keras.py"]

# {suite: [(test name pattern, class, reason)]}
EXPECTED = {
    "horovod/test_torch.py": [],
    "horovod/test_tensorflow2_keras.py": [],
}


def expected_failure(suite, test):
    for pattern, kind, reason in EXPECTED.get(suite, ()):
        if fnmatch.fnmatchcase(test, pattern):
            return kind, reason
    return None
