"""The PyTorch adapter: c10d backend, DDP hooks and the Horovod-style API in
real torchrun jobs; upstream PyTorch conformance under upstream/."""
import os

WORKERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workers")
