"""Step time and scaling efficiency of data-parallel training, parameter servers vs ring all-reduce.

    python benchmarks/scaling_model.py                     # validate on the measured layouts, then predict
    python benchmarks/scaling_model.py --json out.json

The model (per training step, per machine of g GPUs):

  compute      c: one GPU's forward + backward + optimizer time (measured on one
               machine, where the NVLink reduction hides behind backward)
  bytes        byteps (parameter servers, k >= n server hosts or colocated):
               each machine sends its machine-reduced gradient once and receives
               the sum once: M each way (x 1.05 TCP/IP framing).
               ring all-reduce over N = n*g ranks: 2 (N-1)/N M each way per
               machine (NCCL's flat ring; the tree moves ~M at n = 2).
               BytePS's bound with k servers (OSDI'20, Theorem 1):
               t = 2 n (n-1) M / ((n^2 + k n - 2k) B).
  link         e: the fraction of line rate B the system keeps the link busy,
               measured per system at each link rate (wire bytes / step time / B).
  step         max(c, comm) + (1 - overlap) * min(c, comm): communication
               overlaps the backward pass (overlap, measured: 0 when the link
               is the bottleneck, measured: the 25 Gbit/s steps equal their wire time).

Inputs are the measured figures in MEASURED (issue 26's table, 4 x H100,
BERT-large-sized, 1.462 GB of fp32 gradients, batch 8 x 512 tokens per GPU).
The validation prints each measured layout's prediction and its error; the
prediction table then extends the same parameters to 8-256 GPUs at 25 and
100 Gbit/s (8 GPUs per machine), beside BytePS's published 90% (256 GPUs,
100 Gbit/s RDMA) and Horovod+NCCL's 70%.
"""
import argparse
import json

GRADIENT_BYTES = 1.462e9
FRAMING = 1.05
BATCH_PER_GPU = 8

# (machines, gpus per machine, link Gbit/s, system) -> measured samples/s and
# wire GB per step per machine (issue 26, measured on 4 x H100 at 93cbfdf).
MEASURED = [
    {"n": 2, "g": 2, "gbit": 25, "system": "byteps", "samples_per_s": 51.3, "gb_per_step": 1.534},
    {"n": 4, "g": 1, "gbit": 25, "system": "byteps", "samples_per_s": 44.7, "gb_per_step": 1.557},
    {"n": 2, "g": 2, "gbit": 25, "system": "ring", "samples_per_s": 40.9, "gb_per_step": 2.108},
    {"n": 4, "g": 1, "gbit": 25, "system": "ring", "samples_per_s": 28.1, "gb_per_step": 2.278},
]
# One machine x 4 GPUs, NCCL over NVLink: 340-490 samples/s (issue 26); the
# median 415 gives the per-step compute time of one GPU.
ONE_MACHINE_SAMPLES_PER_S = 415.0


def wire_bytes_per_machine(system, n, g, k=None):
    """Bytes each machine sends (and receives) per step."""
    if system == "byteps":
        return FRAMING * GRADIENT_BYTES
    ranks = n * g
    return FRAMING * 2 * (ranks - 1) / ranks * GRADIENT_BYTES


def step_seconds(system, n, g, gbit, compute_s, efficiency, overlap):
    comm = wire_bytes_per_machine(system, n, g) / (efficiency * gbit / 8 * 1e9)
    return max(compute_s, comm) + (1 - overlap) * min(compute_s, comm)


def fit():
    """Per-system link efficiency at 25 Gbit/s: the mean over the measured layouts."""
    compute = 4 * BATCH_PER_GPU / ONE_MACHINE_SAMPLES_PER_S
    efficiency = {}
    for system in ("byteps", "ring"):
        rows = [m for m in MEASURED if m["system"] == system]
        used = []
        for m in rows:
            step = m["n"] * m["g"] * BATCH_PER_GPU / m["samples_per_s"]
            used.append(m["gb_per_step"] * 1e9 / step / (m["gbit"] / 8 * 1e9))
        efficiency[system] = sum(used) / len(used)
    return compute, efficiency


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--overlap", type=float, default=1.0,
                   help="fraction of the shorter of compute and communication hidden behind the other")
    p.add_argument("--json", help="also write the validation and the predictions here")
    args = p.parse_args()
    compute, efficiency = fit()
    print(f"compute per step (one GPU): {compute * 1e3:.1f} ms; link efficiency at 25 Gbit/s: "
          + ", ".join(f"{s} {e:.0%}" for s, e in efficiency.items()))
    print("\nvalidation (measured layouts):")
    print(f"  {'layout':14} {'system':7} {'measured':>9} {'predicted':>9} {'error':>7}")
    validation = []
    for m in MEASURED:
        step = step_seconds(m["system"], m["n"], m["g"], m["gbit"], compute, efficiency[m["system"]], args.overlap)
        predicted = m["n"] * m["g"] * BATCH_PER_GPU / step
        err = predicted / m["samples_per_s"] - 1
        validation.append(dict(m, predicted=predicted, error=err))
        print(f"  {m['n']}x{m['g']} {m['gbit']}G    {m['system']:7} {m['samples_per_s']:9.1f} {predicted:9.1f} {err:+7.1%}")
    print("\npredicted scaling efficiency (8 GPUs per machine; throughput / (GPUs x one GPU's)):")
    print(f"  {'GPUs':>5} {'Gbit/s':>6} {'byteps':>7} {'ring':>7}")
    predictions = []
    single = BATCH_PER_GPU / compute
    for gbit in (25, 100):
        for gpus in (8, 32, 64, 256):
            n, g = max(1, gpus // 8), min(8, gpus)
            row = {"gpus": gpus, "gbit": gbit}
            for system in ("byteps", "ring"):
                if n == 1:
                    row[system] = 1.0
                    continue
                step = step_seconds(system, n, g, gbit, compute, efficiency[system], args.overlap)
                row[system] = gpus * BATCH_PER_GPU / step / (gpus * single)
            predictions.append(row)
            print(f"  {gpus:5d} {gbit:6d} {row['byteps']:7.0%} {row['ring']:7.0%}")
    print("\npublished: BytePS 90% at 256 GPUs, 100 Gbit/s RDMA; Horovod+NCCL 70% (BytePS, OSDI'20)."
          "\nThe efficiencies here are for this BERT-large-sized job at 8 samples per GPU, whose"
          " gradient (1.46 GB) takes longer to move than a step takes to compute.")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"compute_s": compute, "efficiency": efficiency, "validation": validation,
                       "predictions": predictions}, f, indent=1)


if __name__ == "__main__":
    main()
