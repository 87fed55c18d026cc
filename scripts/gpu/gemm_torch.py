"""Matrix products on kiln's GPU device (through JAX and the PJRT plugin) against PyTorch's
torch.matmul on the same GPU, same shapes, same process (issue 21's GPU row; goal >= 0.9x).
Part of scripts/run-gpu.sh (the device half).

    python3 gemm_torch.py /path/to/libkiln_pjrt.so

For bf16, f16 and f32 and each shape (M, N, K): both sides get the same random operands
already on the GPU; each timing is the median of 5 batches of back-to-back products (about
0.1 s each), one synchronization per batch, after a warm-up. Prints one line per row
("gemm <dtype> MxNxK: kiln X TFLOP/s, torch Y TFLOP/s, kiln/torch Z, max rel err E") and a
last line "gemm: geomean kiln/torch R over N rows". PyTorch's f32 matmul runs without TF32
(its default; the f32 rows also time it with TF32); kiln's f32 dot follows the HLO's precision
(DEFAULT). Exit status 1 when a
row fails (an error or a result off by more than 2e-2 relative)."""
import math
import os
import sys
import time

import numpy as np

PLUGIN = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("KILN_PJRT_PLUGIN", "libkiln_pjrt.so")
os.environ.setdefault("KILN_PLATFORM", "cuda")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import torch  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax._src import xla_bridge  # noqa: E402

xla_bridge.register_plugin("kiln", library_path=PLUGIN)
jax.config.update("jax_platforms", "kiln,cpu")
KILN = jax.devices("kiln")[0]
print(f"gemm: kiln {KILN}, torch {torch.__version__} on {torch.cuda.get_device_name(0)}", flush=True)

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 4096, 1024), (8192, 1024, 4096)]
DTYPES = [("bf16", jnp.bfloat16, torch.bfloat16), ("f16", jnp.float16, torch.float16),
          ("f32", jnp.float32, torch.float32)]


def batch_time(fn, sync):
    sync(fn())  # warm-up (compiles on first use)
    t0 = time.perf_counter()
    sync(fn())
    one = time.perf_counter() - t0
    reps = max(1, min(50, int(0.1 / max(one, 1e-6))))  # batches of about 0.1 s
    times = []
    for _ in range(5 if one < 0.5 else 1):
        t0 = time.perf_counter()
        for _ in range(reps):
            out = fn()
        sync(out)
        times.append((time.perf_counter() - t0) / reps)
    return float(np.median(times))


rng = np.random.default_rng(0)
ratios, failed = [], 0
matmul = jax.jit(lambda a, b: a @ b)
for m, n, k in SHAPES:
    a32 = rng.standard_normal((m, k), np.float32)
    b32 = rng.standard_normal((k, n), np.float32)
    for name, jdt, tdt in DTYPES:
        label = f"gemm {name} {m}x{n}x{k}"
        try:
            ta = torch.from_numpy(a32).cuda().to(tdt)
            tb = torch.from_numpy(b32).cuda().to(tdt)
            ka = jax.device_put(np.asarray(ta.float().cpu()).astype(jdt), KILN)
            kb = jax.device_put(np.asarray(tb.float().cpu()).astype(jdt), KILN)
            flops = 2.0 * m * n * k
            t_torch = batch_time(lambda: torch.matmul(ta, tb), lambda _: torch.cuda.synchronize())
            t_kiln = batch_time(lambda: matmul(ka, kb), lambda o: o.block_until_ready())
            want = torch.matmul(ta, tb).float().cpu().numpy()
            got = np.asarray(matmul(ka, kb)).astype(np.float32)
            err = float(np.max(np.abs(got - want)) / (np.max(np.abs(want)) + 1e-30))
            r = t_torch / t_kiln
            ratios.append(r)
            ok = err <= 2e-2
            failed += not ok
            extra = ""
            if name == "f32":  # torch with TF32 too: which one kiln's DEFAULT precision is near
                torch.backends.cuda.matmul.allow_tf32 = True
                t_tf32 = batch_time(lambda: torch.matmul(ta, tb), lambda _: torch.cuda.synchronize())
                torch.backends.cuda.matmul.allow_tf32 = False
                extra = f", torch tf32 {flops / t_tf32 / 1e12:.1f} TFLOP/s (kiln/tf32 {t_tf32 / t_kiln:.2f}x)"
            print(f"{label}: kiln {flops / t_kiln / 1e12:.1f} TFLOP/s, torch {flops / t_torch / 1e12:.1f} "
                  f"TFLOP/s, kiln/torch {r:.2f}x{extra}, max rel err {err:.1e}{'' if ok else ' MISMATCH'}",
                  flush=True)
            del ta, tb, ka, kb
        except Exception as e:  # one row's failure must not hide the others'
            failed += 1
            print(f"{label}: ERROR {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", flush=True)
if ratios:
    g = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    print(f"gemm: geomean kiln/torch {g:.2f}x over {len(ratios)} rows, {failed} failed (goal >= 0.9x)")
else:
    print(f"gemm: no row ran, {failed} failed")
sys.exit(1 if failed else 0)
