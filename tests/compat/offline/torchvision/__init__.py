"""A stand-in for torchvision (not installed here) with just what the ported
upstream examples touch: datasets.MNIST backed by the bundled digits,
transforms.Compose/ToTensor/Normalize, and models.<name> returning a small
CNN (the benchmarks' ResNets would not fit a 2-core CI box)."""
from torchvision import datasets, models, transforms  # noqa: F401
