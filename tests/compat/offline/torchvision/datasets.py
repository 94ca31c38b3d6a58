import torch

from bundled_digits import mnist_like


class MNIST(torch.utils.data.Dataset):
    def __init__(self, root, train=True, download=False, transform=None, target_transform=None):
        (x_train, y_train), (x_test, y_test) = mnist_like()
        self.data, self.targets = (x_train, y_train) if train else (x_test, y_test)
        self.transform, self.target_transform = transform, target_transform

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        image, target = self.data[index], int(self.targets[index])
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return image, target
