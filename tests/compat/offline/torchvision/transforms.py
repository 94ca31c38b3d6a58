import torch


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x


class ToTensor:
    def __call__(self, image):
        tensor = torch.as_tensor(image, dtype=torch.float32) / 255.0
        return tensor.unsqueeze(0) if tensor.dim() == 2 else tensor.permute(2, 0, 1)


class Normalize:
    def __init__(self, mean, std):
        self.mean = torch.tensor(mean).view(-1, 1, 1)
        self.std = torch.tensor(std).view(-1, 1, 1)

    def __call__(self, tensor):
        return (tensor - self.mean) / self.std
