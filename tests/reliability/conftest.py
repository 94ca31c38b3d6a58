import os
import sys

# Test helpers (cluster.py) import as top-level modules.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
