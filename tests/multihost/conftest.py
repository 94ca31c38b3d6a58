import os
import sys

# `benchmarks.cluster` lives at the repository root, outside the installed package.
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
