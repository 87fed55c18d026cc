"""JAX loads kiln: registers libkiln_pjrt.so as a PJRT plugin, runs jax.jit programs on kiln's
device and compares them with JAX's own CPU backend; times each on kiln and on XLA:GPU (JAX's
CUDA backend) in the same run. Part of scripts/run-gpu.sh (the device half).

    python3 jax_kiln.py /path/to/libkiln_pjrt.so

Prints one line per program ("<name>: match|MISMATCH|ERROR ... kiln X ms, xla:gpu Y ms, ratio
Z") and a last line "jax: N of M match"; exit status 1 unless all match.
"""
import os
import sys
import time
import traceback

import numpy as np

PLUGIN = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("KILN_PJRT_PLUGIN", "libkiln_pjrt.so")
os.environ.setdefault("KILN_PLATFORM", "cuda")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # XLA:GPU shares the GPU with kiln

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax._src import xla_bridge  # noqa: E402

xla_bridge.register_plugin("kiln", library_path=PLUGIN)
jax.config.update("jax_platforms", "kiln,cuda,cpu")


def devices(name):
    try:
        return jax.devices(name)
    except RuntimeError:
        return []


KILN, CPU, GPU = devices("kiln"), devices("cpu"), devices("cuda")
if not KILN:
    print("jax: kiln's plugin did not load (no 'kiln' devices)")
    sys.exit(1)
print(f"jax {jax.__version__}: kiln {KILN[0]}, cpu {CPU[0] if CPU else None}, cuda {GPU[0] if GPU else None}")

rng = np.random.default_rng(0)


def mlp_step(params, x, y):
    def loss(p):
        h = jnp.tanh(x @ p["w1"] + p["b1"])
        return jnp.mean((h @ p["w2"] - y) ** 2)

    g = jax.grad(loss)(params)
    return jax.tree_util.tree_map(lambda p, d: p - 0.01 * d, params, g)


def attention(q, k, v):
    s = jnp.einsum("bqd,bkd->bqk", q, k) / np.sqrt(q.shape[-1])
    return jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(s, axis=-1), v)


def layer_norm(x, g, b):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / jnp.sqrt(v + 1e-5) * g + b


def transformer_layer(x, p):
    # pre-norm attention (8 heads) + GELU MLP, as in a GPT block
    b, t, d = x.shape
    h = layer_norm(x, p["g1"], p["b1"])
    q, k, v = (jnp.einsum("btd,de->bte", h, p[w]).reshape(b, t, 8, d // 8) for w in ("wq", "wk", "wv"))
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(d // 8)
    s = jnp.where(jnp.tril(jnp.ones((t, t), bool)), s, -1e9)
    a = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, axis=-1), v).reshape(b, t, d)
    x = x + a @ p["wo"]
    h = layer_norm(x, p["g2"], p["b2"])
    return x + jax.nn.gelu(h @ p["w1"]) @ p["w2"]


def scan_cumsum(x):
    return jax.lax.scan(lambda c, e: (c + e, c * e), jnp.zeros_like(x[0]), x)


def sort_rows(x):
    return jnp.sort(x, axis=-1), jnp.argsort(x, axis=-1)


def long_argsort(x):
    # Rows past 12,288 elements: kiln's merge sort (sort_emitter.h), stable as jnp.argsort is.
    return jnp.argsort(x, axis=-1)


def ffi_gather_add(b, c):
    # kiln's example handler (examples/ffi/gather_add.c): A[i] = B[i % 128] + C[i].
    return jax.ffi.ffi_call("kiln_gather_add", jax.ShapeDtypeStruct(c.shape, c.dtype))(b, c)


f32 = np.float32
PROGRAMS = [
    ("mlp training step", mlp_step,
     ({"w1": rng.standard_normal((256, 512), f32) * 0.05, "b1": np.zeros(512, f32),
       "w2": rng.standard_normal((512, 10), f32) * 0.05},
      rng.standard_normal((128, 256), f32), rng.standard_normal((128, 10), f32))),
    ("attention", attention, tuple(rng.standard_normal((8, 128, 64), f32) for _ in range(3))),
    ("transformer layer", transformer_layer,
     (rng.standard_normal((4, 256, 512), f32),
      {"g1": np.ones(512, f32), "b1": np.zeros(512, f32), "g2": np.ones(512, f32), "b2": np.zeros(512, f32),
       **{w: rng.standard_normal((512, 512), f32) * 0.04 for w in ("wq", "wk", "wv", "wo")},
       "w1": rng.standard_normal((512, 2048), f32) * 0.04, "w2": rng.standard_normal((2048, 512), f32) * 0.02})),
    ("layer norm", layer_norm, (rng.standard_normal((1024, 768), f32), np.ones(768, f32), np.zeros(768, f32))),
    ("scan", scan_cumsum, (rng.standard_normal((256, 1024), f32),)),
    ("sort", sort_rows, (rng.standard_normal((64, 1024), f32),)),
    ("long stable argsort", long_argsort, (np.floor(rng.standard_normal((4, 100000)) * 50).astype(f32),)),
    ("ffi call", ffi_gather_add, (rng.standard_normal(128, f32), rng.standard_normal(128 * 64, f32))),
]


def reference(name, fn, args):
    if name == "ffi call":
        b, c = args
        return b[np.arange(c.size) % 128] + c
    return jax.jit(fn, device=CPU[0])(*args) if CPU else None


def timed(fn, args, device, reps=20):
    f = jax.jit(fn, device=device)
    jax.block_until_ready(f(*args))
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(f(*args))
        t.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(t)), f(*args)


matched = 0
DUMP = os.environ.get("KILN_JAX_DUMP")  # a folder: each program's StableHLO text, as lowered
for i, (name, fn, args) in enumerate(PROGRAMS):
    if DUMP:
        try:
            with open(os.path.join(DUMP, f"jax_{i}_{name.replace(' ', '_')}.mlir.txt"), "w") as f:
                f.write(jax.jit(fn).lower(*args).as_text())
        except Exception as e:
            print(f"{name}: lowering for the dump failed: {type(e).__name__}: {e}", flush=True)
    try:
        kiln_ms, got = timed(fn, args, KILN[0])
        want = reference(name, fn, args)
        tol = 1e-2 if name == "transformer layer" else 2e-3  # TF32 may be allowed for its f32 dots
        # Integer results (argsort's indices) must be equal; floats within the tolerance.
        ok = all(np.array_equal(np.asarray(g), np.asarray(w)) if np.issubdtype(np.asarray(w).dtype, np.integer)
                 else np.allclose(np.asarray(g), np.asarray(w), rtol=tol, atol=tol)
                 for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)))
        line = f"{name}: {'match' if ok else 'MISMATCH'} vs jax cpu, kiln {kiln_ms:.3f} ms"
        if GPU and name != "ffi call":
            gpu_ms, _ = timed(fn, args, GPU[0])
            line += f", xla:gpu {gpu_ms:.3f} ms, kiln/xla {kiln_ms / gpu_ms:.2f}x"
        matched += ok
        print(line, flush=True)
    except Exception as e:  # one program's failure must not hide the others'
        print(f"{name}: ERROR {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", flush=True)
        traceback.print_exc(limit=2)
print(f"jax: {matched} of {len(PROGRAMS)} match JAX's CPU backend")
sys.exit(0 if matched == len(PROGRAMS) else 1)
