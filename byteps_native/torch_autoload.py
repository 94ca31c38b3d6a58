"""Entry point of the `torch.backends` group: lets `init_process_group("byteps")`
work without importing byteps_native.torch first.

torch calls `register` while `import torch` is still running, so it only
names the backend; the compiled adapter loads on the first byteps group.
Opt out with TORCH_DEVICE_BACKEND_AUTOLOAD=0 (torch's switch for all such
plugins). Registered in setup.py as

    entry_points={"torch.backends": ["byteps = byteps_native.torch_autoload:register"]}
"""

NAME = "byteps"


def _create_on_first_use(dist_options, backend_options):
    from byteps_native.torch import backend  # loads the adapter, re-registers nothing

    return backend._create(dist_options, backend_options)


def register():
    import torch.distributed as dist

    if not dist.is_available() or NAME.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(NAME, _create_on_first_use, extended_api=True, devices=["cpu", "cuda"])
