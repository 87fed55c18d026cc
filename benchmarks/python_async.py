#!/usr/bin/env python3
"""What a non-blocking execute buys a Python frontend (python/kiln): a loop of steps, each an
execute of a program that updates its state in place (the state donated, as a training
step's parameters are) followed by Python work of the frontend's own (tracing the next call,
loading the next batch), the state read once at the end. Two ways in the same run, on one
client: "awaited" blocks on each step's output before the Python work (what
Executable.execute did before session 38), "overlapped" does not (the run goes on the
device's queue and overlaps the Python work).

    PYTHONPATH=python /usr/bin/python3 benchmarks/python_async.py [steps] [rounds]

The Python work per step is calibrated to the run's own time first (where overlap can save
the most: up to half the loop). Rounds alternate the two ways so load drift hits both;
prints per-step times (best round and median), the ratio awaited / overlapped, and checks
that both final states agree bit for bit.
"""
import statistics
import sys
import time

import numpy as np

import kiln

N = 1 << 20
STEP = f"""HloModule python_async_step, input_output_alias={{ {{}}: (0, {{}}, may-alias) }}

ENTRY main {{
  x = f32[{N}] parameter(0)
  t = f32[{N}] tanh(x)
  a = f32[] constant(0.9)
  b = f32[] constant(0.01)
  ab = f32[{N}] broadcast(a), dimensions={{}}
  bb = f32[{N}] broadcast(b), dimensions={{}}
  m = f32[{N}] multiply(t, ab)
  ROOT s = f32[{N}] add(m, bb)
}}
"""


def python_work(seconds):
    """Pure-Python work (it holds the GIL, as tracing does) for about `seconds`."""
    end = time.perf_counter() + seconds
    n = 0
    while time.perf_counter() < end:
        n += 1
    return n


def loop(client, exe, x0, steps, work_s, awaited):
    state = client.buffer(x0)
    t0 = time.perf_counter()
    for _ in range(steps):
        (state,) = exe.execute(state)
        if awaited:
            state.block_until_ready()
        python_work(work_s)
    out = state.to_numpy()
    return (time.perf_counter() - t0) / steps, out


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    client = kiln.Client(platform="cpu")
    exe = client.compile(STEP)
    x0 = np.linspace(-2, 2, N, dtype=np.float32)
    # The run's own time: awaited steps without Python work.
    loop(client, exe, x0, 5, 0.0, True)  # warm-up (code generation on the first execute)
    run_s = min(loop(client, exe, x0, steps, 0.0, True)[0] for _ in range(3))
    print(f"run alone: {run_s * 1e3:.3f} ms per step; Python work per step set to the same")
    times = {True: [], False: []}
    finals = {}
    for _ in range(rounds):
        for awaited in (True, False):
            t, out = loop(client, exe, x0, steps, run_s, awaited)
            times[awaited].append(t)
            finals[awaited] = out
    for awaited, name in ((True, "awaited"), (False, "overlapped")):
        ts = times[awaited]
        print(f"{name:>10}: best {min(ts) * 1e3:.3f} ms, median {statistics.median(ts) * 1e3:.3f} ms"
              f" per step ({steps} steps x {rounds} rounds)")
    ratios = [a / o for a, o in zip(times[True], times[False])]
    print(f"awaited / overlapped: best-round ratio {min(times[True]) / min(times[False]):.2f}x, "
          f"per-round {min(ratios):.2f}x..{max(ratios):.2f}x (2x would be full overlap)")
    if not np.array_equal(finals[True], finals[False]):
        print("FAILED: the two ways' final states differ")
        return 1
    print("final states: bit-equal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
