"""Where things are, for the suites and the processes they start."""
import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
THIRD_PARTY = os.path.join(REPO, "third_party")
ENGINE_LIB = os.path.join(REPO, "byteps_native", "lib", "libbyteps_engine.so")
