"""MNIST-shaped data from scikit-learn's bundled digits (8x8, 1797 images),
for running the upstream scripts with no network: each image is scaled 3x
and padded to 28x28 uint8, labels 0-9. First 1500 images: train; rest: test."""
import numpy as np


def mnist_like():
    from sklearn.datasets import load_digits
    digits = load_digits()
    images = np.kron(digits.images, np.ones((1, 3, 3)))  # 24x24, values 0..16
    images = np.pad(images, ((0, 0), (2, 2), (2, 2)))
    images = np.clip(images * 16, 0, 255).astype(np.uint8)
    labels = digits.target.astype(np.uint8)
    return (images[:1500], labels[:1500]), (images[1500:], labels[1500:])
