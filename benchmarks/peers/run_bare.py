"""The floor (issue 38): FedAvg of a workload as a bare PyTorch loop on one core, nothing but the work every
system must do: per sampled client, load the round's weights, run `local_steps` mini-batch SGD steps on its
shard, add its weights × samples to the sum; then the weighted mean; and the same tests of the global model.
No simulator, no messages, no records: no system running the same steps can be faster. Synchronous workloads
only (W1, W2). The step is benchmarks/sim_overhead.py's bare step, the fastest plain one: channels-last layout
(EdgeSync's trainer uses it too), gradients kept between steps (zero_grad without freeing), SGD as one in-place
add per tensor (no optimizer object).

    python benchmarks/peers/run_bare.py --spec SPEC.json --out RESULT.json
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402


def main() -> None:
    a = common.args()
    spec = common.load_spec(a.spec)
    if spec["mode"] != "sync":
        raise SystemExit(f"run_bare.py: {spec['workload']} is {spec['mode']}; the bare loop is synchronous FedAvg")
    timer = common.Timer()
    d = common.data(spec)
    net = common.model(spec).to(memory_format=torch.channels_last)
    x_train = d["x_train"].contiguous(memory_format=torch.channels_last)
    x_test = d["x_test"].contiguous(memory_format=torch.channels_last)
    rng = np.random.default_rng(spec["seed"])
    glob = [p.detach().clone() for p in net.parameters()]
    total = [torch.zeros_like(p) for p in glob]
    params = list(net.parameters())
    if spec["momentum"]:
        raise SystemExit("run_bare.py: the workloads' SGD has no momentum; this loop has none")
    cursor = [0] * spec["clients"]  # each client's place in its shuffled shard
    order = [rng.permutation(p) for p in d["parts"]]
    curve, steps = [], 0
    for rnd in range(1, spec["rounds"] + 1):
        chosen = rng.choice(spec["clients"], size=spec["per_round"], replace=False)
        weight_sum = 0.0
        for t in total:
            t.zero_()
        for c in chosen:
            with torch.no_grad():
                for p, g in zip(net.parameters(), glob):
                    p.copy_(g)
            for _ in range(spec["local_steps"]):
                if cursor[c] + spec["batch_size"] > len(order[c]):  # a new pass over the shard
                    order[c], cursor[c] = rng.permutation(d["parts"][c]), 0
                idx = torch.from_numpy(order[c][cursor[c]:cursor[c] + spec["batch_size"]])
                cursor[c] += spec["batch_size"]
                net.zero_grad(set_to_none=False)
                xb = x_train[idx].contiguous(memory_format=torch.channels_last)
                nn.functional.cross_entropy(net(xb), d["y_train"][idx]).backward()
                with torch.no_grad():
                    for p in params:
                        p.add_(p.grad, alpha=-spec["lr"])
                steps += 1
            w = float(len(d["parts"][c]))
            weight_sum += w
            with torch.no_grad():
                for t, p in zip(total, net.parameters()):
                    t.add_(p, alpha=w)
        with torch.no_grad():
            for g, t in zip(glob, total):
                g.copy_(t / weight_sum)
        if rnd in common.eval_rounds(spec):
            with torch.no_grad():
                for p, g in zip(net.parameters(), glob):
                    p.copy_(g)
            acc, loss = common.evaluate(net, x_test, d["y_test"])
            curve.append({"round": rnd, "acc": acc, "loss": loss})
            print(f"round {rnd}: acc {acc:.4f} loss {loss:.4f}", flush=True)
    common.write(a.out, common.result("bare", f"torch {torch.__version__}", curve, spec, steps=steps,
                                      work_s=timer.seconds()))


if __name__ == "__main__":
    main()
