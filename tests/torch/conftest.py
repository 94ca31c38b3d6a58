import os
import sys

# Test helpers (launch.py) import as top-level modules. No skip when the
# extension is missing: with torch installed, a missing _c10d is a failure.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
