"""The trainer recipes of docs/trainers.md on GPUs against NCCL: one machine,
2 GPUs (the 1 x 2 layout). NOT YET RUN: written in a session without a GPU
machine; expect to adjust it on its first run.

    python benchmarks/gpu_trainers.py                         # all three trainers, --scale 16
    python benchmarks/gpu_trainers.py --trainers hf_trainer --scale 32 --json out.json
    python benchmarks/gpu_trainers.py --byteps-first          # the other order (warm-up falls on nccl)
    python benchmarks/gpu_trainers.py --device cpu --scale 1  # the plumbing, on CPU against gloo

Each trainer is one torchrun job of its tests/trainers worker with
--device cuda: the recipe on nccl, then the same recipe on byteps, in the
same processes (each run on a store of its own), one GPU per rank,
deterministic kernels (torch.use_deterministic_algorithms,
CUBLAS_WORKSPACE_CONFIG), bf16 autocast with fp32 parameters. For every run
(straight, resumed from a checkpoint, and the FSDP runs: Lightning's
FSDPStrategy, Accelerate's FSDP plugin, which on GPUs really shards) it
reports whether byteps's parameters equal NCCL's bitwise, and each backend's
samples/s over the straight run (2 epochs: its first steps include warm-up;
the backend that runs first pays it, hence --byteps-first). It also reports
whether the trainer took the name 'byteps' itself: on GPUs Accelerate keeps
the backend it is given (docs/trainers.md), so
InitProcessGroupKwargs(backend="byteps") and TrainingArguments(ddp_backend=
"byteps") should pass there.

Exit status 1 when an uncompressed run differs from NCCL or a job fails.

The GPU machine reaches no package registry: carry the trainers' wheels,

    python benchmarks/gpu_trainers.py --download-wheels build/trainer_wheels   # here, with PyPI

which downloads (without dependencies) every distribution the three
trainers need beyond torch and what torch itself needs, at the versions
installed here, and on the GPU machine

    python -m pip install --no-index --find-links build/trainer_wheels -r build/trainer_wheels/requirements.txt
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
from importlib import metadata

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)
from tests.trainers.recipes import difference, launch, reference  # noqa: E402

TRAINERS = {"lightning": "lightning_recipe.py", "accelerate": "accelerate_recipe.py",
            "hf_trainer": "hf_trainer_recipe.py"}
TRAINER_DISTRIBUTIONS = ["pytorch-lightning", "accelerate", "transformers"]
RUNS = ("straight", "resumed", "fsdp")


def run_trainer(name, device, scale, byteps_first, scratch, timeout):
    folder = os.path.join(scratch, name)
    shutil.rmtree(folder, ignore_errors=True)
    try:
        results = launch(TRAINERS[name], folder, device=device, scale=scale, byteps_first=byteps_first,
                         timeout=timeout)
    except AssertionError as failure:  # the job failed: its output's tail
        return {"trainer": name, "error": str(failure)[-6000:]}
    return summarize(name, reference(results[0]), results)


def summarize(name, reference, results):
    row = {"trainer": name, "reference": reference, "runs": {}}
    for run in RUNS:
        if run not in results[0][reference]:
            continue
        diffs = [difference(found[reference][run], found["byteps"][run]) for found in results.values()]
        row["runs"][run] = {"equal": not any(diffs), "difference": next((d for d in diffs if d), "")}
    for backend in (reference, "byteps"):
        seconds = max(found[backend]["straight_seconds"] for found in results.values())  # the slower rank
        row[f"{backend}_samples_per_s"] = results[0][backend]["straight_samples"] / seconds
    row["byteps_over_reference"] = row["byteps_samples_per_s"] / row[f"{reference}_samples_per_s"]
    byteps = results[0]["byteps"]
    row["byteps_group"] = byteps.get("group")
    row["byteps_ops_completed"] = byteps.get("ops_after_resumed")
    # What the trainer said to the name itself (None: took it); Lightning passes any name on.
    row["name_itself"] = byteps.get("plain_way", "not asked: DDPStrategy passes the name on")
    row["fsdp_wrapped"] = byteps.get("fsdp_wrapped")
    return row


def download_wheels(folder, python_version):
    """Every distribution the trainers need, beyond torch's own, at the
    versions installed here, as wheels for the GPU machine's interpreter
    (`python_version`, manylinux x86_64: its Python is not always this one);
    and a requirements.txt pinning the trainers."""
    from packaging.requirements import Requirement

    def closure(roots):
        """Installed distributions that `roots` need, following the extras
        they ask for (pytorch-lightning's fsspec[http] brings aiohttp)."""
        seen, todo = set(), [(r, "") for r in roots]
        while todo:
            dist, extra = todo.pop()
            if (dist, extra) in seen:
                continue
            try:
                requires = metadata.requires(dist) or []
            except metadata.PackageNotFoundError:
                continue
            seen.add((dist, extra))
            for text in requires:
                req = Requirement(text)
                if req.marker is None or req.marker.evaluate({"extra": extra}):
                    name = req.name.lower().replace("_", "-")
                    todo += [(name, "")] + [(name, e) for e in req.extras]
        return {dist for dist, _ in seen}

    # numpy is the image's (CuPy needs it), and its wheel is pinned to this interpreter's build.
    needed = sorted(closure(TRAINER_DISTRIBUTIONS) - closure(["torch"]) - {"numpy"})
    os.makedirs(folder, exist_ok=True)
    pins = [f"{d}=={metadata.version(d)}" for d in needed]
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-d", folder, "--only-binary=:all:",
                    "--python-version", python_version, "--platform", "manylinux2014_x86_64", *pins], check=True)
    with open(os.path.join(folder, "requirements.txt"), "w") as f:
        f.write("\n".join(f"{d}=={metadata.version(d)}" for d in TRAINER_DISTRIBUTIONS) + "\n")
    size = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
    print(f"{len(pins)} wheels, {size / 2**20:.1f} MiB in {folder}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trainers", default=",".join(TRAINERS))
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--scale", type=int, default=16)
    parser.add_argument("--byteps-first", action="store_true")
    parser.add_argument("--scratch", default=os.path.join(REPO, "build", "gpu_trainers"))
    parser.add_argument("--timeout", type=int, default=600)
    parser.add_argument("--json")
    parser.add_argument("--download-wheels", metavar="DIR")
    parser.add_argument("--wheels-python", default="3.12", help="the GPU machine's Python, for --download-wheels")
    args = parser.parse_args()
    if args.download_wheels:
        download_wheels(args.download_wheels, args.wheels_python)
        return 0
    rows = [run_trainer(name, args.device, args.scale, args.byteps_first, args.scratch, args.timeout)
            for name in args.trainers.split(",")]
    failed = False
    print(f"{'trainer':<12} {'run':<9} {'equal':<6} {'ref/s':>9} {'byteps/s':>9} {'ratio':>6}  (ref: nccl on GPUs)")
    for row in rows:
        if "error" in row:
            failed = True
            print(f"{row['trainer']:<12} FAILED\n{row['error']}")
            continue
        for run, verdict in row["runs"].items():
            failed |= not verdict["equal"]
            print(f"{row['trainer']:<12} {run:<9} {'yes' if verdict['equal'] else 'NO':<6} "
                  f"{row[row['reference'] + '_samples_per_s']:>9.1f} {row['byteps_samples_per_s']:>9.1f} "
                  f"{row['byteps_over_reference']:>6.2f}  {verdict['difference']}")
        print(f"{'':<12} the name itself: {row['name_itself']}; fsdp wrapped: {row['fsdp_wrapped']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": args.device, "scale": args.scale, "byteps_first": args.byteps_first,
                       "rows": rows}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
