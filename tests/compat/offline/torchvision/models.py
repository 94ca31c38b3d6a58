from torch import nn


def _small_cnn(num_classes=1000, **kwargs):
    return nn.Sequential(nn.Conv2d(3, 8, 3, stride=4), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(4),
                         nn.Flatten(), nn.Linear(128, num_classes))


def __getattr__(name):
    if name.startswith("_"):
        raise AttributeError(name)
    return _small_cnn
