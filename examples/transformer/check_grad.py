#!/usr/bin/python3
"""Checks the generated training step's backward pass by finite differences.

A tiny f32 configuration (1 layer, d_model 16, 2 heads, 8 tokens x 2, vocabulary 50) is
generated, and run on the reference evaluator (`kiln-run`, default backend) with the
AdamW state at zero and step 1, so each new first moment is 0.1 x the gradient. For every
parameter tensor p and a random direction d, the central difference
(loss(p + h d) - loss(p - h d)) / 2h must match <grad p, d> (relative error below 5%,
f32 arithmetic). Prints one line per tensor; exit status 1 on a mismatch.

  /usr/bin/python3 examples/transformer/check_grad.py [path/to/kiln-run]
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TINY = ["--layers=1", "--d-model=16", "--heads=2", "--mlp=32", "--batch=2", "--seq=8", "--vocab=50"]


def run(kiln_run, hlo, inputs, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    subprocess.run([kiln_run, "--inputs=" + inputs, "--output=" + out_dir, hlo], check=True,
                   stdout=subprocess.DEVNULL)


def main():
    kiln_run = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "build", "kiln-run")
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        hlo = os.path.join(tmp, "tiny.hlo")
        with open(hlo, "w") as f:
            subprocess.run([sys.executable, os.path.join(HERE, "gen_train_step.py")] + TINY, stdout=f, check=True)
        # Parameter shapes from the entry computation layout.
        with open(hlo) as f:
            head = f.readline()
        shapes = head.split("entry_computation_layout={(")[1].split(")->")[0].split(", ")
        dims = [tuple(int(d) for d in s[s.index("[") + 1:-1].split(",") if d) for s in shapes]
        n = (len(dims) - 3) // 3  # parameters, first moments, second moments
        args = [rng.integers(0, 50, dims[0]).astype(np.int32), rng.integers(0, 50, dims[1]).astype(np.int32),
                np.array(1.0, np.float32)]
        args += [(rng.standard_normal(d) * 0.3).astype(np.float32) for d in dims[3:3 + n]]
        args += [np.zeros(d, np.float32) for d in dims[3 + n:]]

        def write(dirname, values):
            os.makedirs(dirname, exist_ok=True)
            for i, a in enumerate(values):
                np.save(os.path.join(dirname, "arg%d.npy" % i), a)

        write(os.path.join(tmp, "in"), args)
        run(kiln_run, hlo, os.path.join(tmp, "in"), os.path.join(tmp, "out"))
        grads = [np.load(os.path.join(tmp, "out", "out%d.npy" % (1 + n + i))) / 0.1 for i in range(n)]
        loss = float(np.load(os.path.join(tmp, "out", "out0.npy")))
        print("loss %.6f (log of the vocabulary: %.6f)" % (loss, np.log(50)))
        h, bad = 1e-2, 0
        for i in range(n):
            d = rng.standard_normal(dims[3 + i]).astype(np.float32)
            losses = []
            for sign in (1, -1):
                a = list(args)
                a[3 + i] = (args[3 + i] + sign * h * d).astype(np.float32)
                write(os.path.join(tmp, "in%d" % sign), a)
                run(kiln_run, hlo, os.path.join(tmp, "in%d" % sign), os.path.join(tmp, "out%d" % sign))
                losses.append(float(np.load(os.path.join(tmp, "out%d" % sign, "out0.npy"))))
            numeric = (losses[0] - losses[1]) / (2 * h)
            analytic = float(np.sum(grads[i].astype(np.float64) * d))
            err = abs(numeric - analytic) / max(abs(numeric), abs(analytic), 1e-3)
            ok = err < 0.05
            bad += not ok
            print("%-3s parameter %2d %-12s numeric %+.6f analytic %+.6f rel err %.2e" % (
                "ok" if ok else "BAD", i, str(dims[3 + i]), numeric, analytic, err))
        print("%d of %d parameter gradients match finite differences" % (n - bad, n))
        return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
