"""The trainers people use (PyTorch Lightning, Hugging Face Accelerate and
Trainer) on 'byteps' in torchrun jobs, each checked against the same run on
gloo (docs/trainers.md)."""
import os

WORKERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workers")
