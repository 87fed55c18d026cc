#!/usr/bin/python3
"""Emits one training step of a decoder-only transformer as an HLO module (text).

No JAX here: the forward pass, its backward pass and the AdamW update are written out op by
op, the way jax.grad + optax would trace them. Defaults (issue 21): 4 layers, d_model 256,
8 heads, MLP 1024, a batch of 8 x 128 tokens, a 32,000-word vocabulary.

  /usr/bin/python3 examples/transformer/gen_train_step.py [--dtype=f32|bf16] [--layers=4]
      [--d-model=256] [--heads=8] [--mlp=1024] [--batch=8] [--seq=128] [--vocab=32000] > step.hlo

Entry parameters: tokens s32[N], targets s32[N] (N = batch * seq), step f32[] (>= 1), then
the parameters, AdamW's first moments and second moments (f32, same shapes, same order).
Result: (loss f32[], new parameters..., new first moments..., new second moments...).
With --dtype=bf16 the parameters and optimizer state stay f32 (master weights); the
activations, matmuls and their gradients run in bf16, with layer-norm, softmax and loss
statistics in f32 (mixed precision as usual).
"""
import argparse
import math
import sys


class Val:
    def __init__(self, name, dt, dims):
        self.name, self.dt, self.dims = name, dt, tuple(dims)

    @property
    def shape(self):
        return "%s[%s]" % (self.dt, ",".join(str(d) for d in self.dims))


def lst(xs):
    return "{" + ",".join(str(x) for x in xs) + "}"


class Builder:
    def __init__(self):
        self.lines = []
        self.params = []
        self.count = 0

    def emit(self, op, dt, dims, operands, attrs="", hint=None):
        self.count += 1
        name = "%s.%d" % (hint or op.replace("-", "_"), self.count)
        v = Val(name, dt, dims)
        ops = ", ".join(o.name for o in operands)
        self.lines.append("  %s = %s %s(%s)%s" % (name, v.shape, op, ops, (", " + attrs) if attrs else ""))
        return v

    def param(self, dt, dims, hint):
        v = Val("%s.p%d" % (hint, len(self.params)), dt, dims)
        self.lines.append("  %s = %s parameter(%d)" % (v.name, v.shape, len(self.params)))
        self.params.append(v)
        return v

    def const(self, dt, value):
        self.count += 1
        name = "c.%d" % self.count
        self.lines.append("  %s = %s[] constant(%s)" % (name, dt, value))
        return Val(name, dt, ())

    # elementwise (scalars broadcast to the other operand)
    def bin(self, op, a, b):
        if isinstance(b, (int, float)):
            b = self.splat(self.const(a.dt, repr(float(b))), a.dims)
        if isinstance(a, (int, float)):
            a = self.splat(self.const(b.dt, repr(float(a))), b.dims)
        if a.dims != b.dims:
            if not a.dims:
                a = self.splat(a, b.dims)
            elif not b.dims:
                b = self.splat(b, a.dims)
        assert a.dims == b.dims and a.dt == b.dt, (op, a.shape, b.shape)
        return self.emit(op, a.dt, a.dims, [a, b])

    def add(self, a, b): return self.bin("add", a, b)
    def sub(self, a, b): return self.bin("subtract", a, b)
    def mul(self, a, b): return self.bin("multiply", a, b)
    def div(self, a, b): return self.bin("divide", a, b)
    def pow(self, a, b): return self.bin("power", a, b)

    def un(self, op, a):
        return self.emit(op, a.dt, a.dims, [a])

    def convert(self, a, dt):
        return a if a.dt == dt else self.emit("convert", dt, a.dims, [a])

    def splat(self, s, dims):
        return self.emit("broadcast", s.dt, dims, [s], "dimensions={}")

    def bcast(self, a, dims, mapping):
        return self.emit("broadcast", a.dt, dims, [a], "dimensions=" + lst(mapping))

    def reshape(self, a, dims):
        return self.emit("reshape", a.dt, dims, [a])

    def transpose(self, a, perm):
        return self.emit("transpose", a.dt, [a.dims[p] for p in perm], [a], "dimensions=" + lst(perm))

    def reduce(self, a, dims, kind):
        init = self.const(a.dt, "0" if kind == "add" else "-inf")
        out = [d for i, d in enumerate(a.dims) if i not in dims]
        return self.emit("reduce", a.dt, out, [a, init],
                         "dimensions=%s, to_apply=%s_%s" % (lst(dims), kind, a.dt))

    def dot(self, a, b, lb, lc, rb, rc):
        dims = [a.dims[i] for i in lb]
        dims += [d for i, d in enumerate(a.dims) if i not in lb and i not in lc]
        dims += [d for i, d in enumerate(b.dims) if i not in rb and i not in rc]
        attrs = "lhs_batch_dims=%s, lhs_contracting_dims=%s, rhs_batch_dims=%s, rhs_contracting_dims=%s" % (
            lst(lb), lst(lc), lst(rb), lst(rc))
        if not lb:
            attrs = "lhs_contracting_dims=%s, rhs_contracting_dims=%s" % (lst(lc), lst(rc))
        return self.emit("dot", a.dt, dims, [a, b], attrs)

    def iota(self, dt, dims, d):
        return self.emit("iota", dt, dims, [], "iota_dimension=%d" % d)

    def compare(self, a, b, direction):
        return self.emit("compare", "pred", a.dims, [a, b], "direction=" + direction)

    def select(self, p, a, b):
        return self.emit("select", a.dt, a.dims, [p, a, b])


def generate(cfg):
    b = Builder()
    DT = cfg.dtype
    B, T, D, H, F, V, L = cfg.batch, cfg.seq, cfg.d_model, cfg.heads, cfg.mlp, cfg.vocab, cfg.layers
    N, hd = B * T, D // H
    assert D % H == 0
    f32 = "f32"

    tokens = b.param("s32", [N], "tokens")
    targets = b.param("s32", [N], "targets")
    step = b.param(f32, [], "step")
    shapes = [("embed", [V, D])]
    for l in range(L):
        shapes += [("l%d_ln1_g" % l, [D]), ("l%d_ln1_b" % l, [D]), ("l%d_wq" % l, [D, D]),
                   ("l%d_wk" % l, [D, D]), ("l%d_wv" % l, [D, D]), ("l%d_wo" % l, [D, D]),
                   ("l%d_ln2_g" % l, [D]), ("l%d_ln2_b" % l, [D]), ("l%d_w1" % l, [D, F]),
                   ("l%d_b1" % l, [F]), ("l%d_w2" % l, [F, D]), ("l%d_b2" % l, [D])]
    shapes += [("lnf_g", [D]), ("lnf_b", [D]), ("unembed", [D, V])]
    P = {n: b.param(f32, s, n) for n, s in shapes}
    M = {n: b.param(f32, s, n + "_m") for n, s in shapes}
    S = {n: b.param(f32, s, n + "_v") for n, s in shapes}
    W = {n: b.convert(p, DT) for n, p in P.items()}  # compute copies of the weights
    grads = {}

    def ln_fwd(x, g, beta):
        xf = b.convert(x, f32)
        mu = b.div(b.reduce(xf, [1], "add"), float(D))
        xc = b.sub(xf, b.bcast(mu, [N, D], [0]))
        var = b.div(b.reduce(b.mul(xc, xc), [1], "add"), float(D))
        rstd = b.un("rsqrt", b.add(var, 1e-5))
        xhat = b.mul(xc, b.bcast(rstd, [N, D], [0]))
        y = b.add(b.mul(xhat, b.bcast(g, [N, D], [1])), b.bcast(beta, [N, D], [1]))
        return b.convert(y, DT), (xhat, rstd)

    def ln_bwd(dy, cache, g, gname, bname):
        xhat, rstd = cache
        dyf = b.convert(dy, f32)
        grads[gname] = b.reduce(b.mul(dyf, xhat), [0], "add")
        grads[bname] = b.reduce(dyf, [0], "add")
        dxhat = b.mul(dyf, b.bcast(g, [N, D], [1]))
        m1 = b.div(b.reduce(dxhat, [1], "add"), float(D))
        m2 = b.div(b.reduce(b.mul(dxhat, xhat), [1], "add"), float(D))
        inner = b.sub(b.sub(dxhat, b.bcast(m1, [N, D], [0])), b.mul(xhat, b.bcast(m2, [N, D], [0])))
        return b.convert(b.mul(b.bcast(rstd, [N, D], [0]), inner), DT)

    def mm(x, w):      # [N,K] x [K,M]
        return b.dot(x, w, [], [1], [], [0])

    def mm_tn(x, dy):  # weight gradient: x^T dy
        return b.dot(x, dy, [], [0], [], [0])

    def mm_nt(dy, w):  # input gradient: dy w^T
        return b.dot(dy, w, [], [1], [], [1])

    def wgrad(name, x, dy):
        grads[name] = b.convert(mm_tn(x, dy), f32)

    # ---- forward ----
    x = b.emit("gather", DT, [N, D], [W["embed"], tokens],
               "offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, "
               "slice_sizes={1,%d}" % D)
    scale = 1.0 / math.sqrt(hd)
    qi = b.iota("s32", [T, T], 0)
    ki = b.iota("s32", [T, T], 1)
    causal = b.bcast(b.compare(qi, ki, "GE"), [B, H, T, T], [2, 3])
    neg = b.splat(b.const(DT, "-1e9"), [B, H, T, T])
    caches = []
    for l in range(L):
        p = "l%d_" % l
        h, c1 = ln_fwd(x, P[p + "ln1_g"], P[p + "ln1_b"])
        q, k, v = mm(h, W[p + "wq"]), mm(h, W[p + "wk"]), mm(h, W[p + "wv"])
        q4, k4, v4 = (b.reshape(t, [B, T, H, hd]) for t in (q, k, v))
        s = b.mul(b.dot(q4, k4, [0, 2], [3], [0, 2], [3]), scale)  # [B,H,Tq,Tk]
        s = b.select(causal, s, neg)
        sf = b.convert(s, f32)
        e = b.un("exponential", b.sub(sf, b.bcast(b.reduce(sf, [3], "max"), [B, H, T, T], [0, 1, 2])))
        pr = b.div(e, b.bcast(b.reduce(e, [3], "add"), [B, H, T, T], [0, 1, 2]))
        pd = b.convert(pr, DT)
        o = b.dot(pd, v4, [0, 1], [3], [0, 2], [1])  # [B,H,T,hd]
        o2 = b.reshape(b.transpose(o, [0, 2, 1, 3]), [N, D])
        x1 = b.add(x, mm(o2, W[p + "wo"]))
        h2, c2 = ln_fwd(x1, P[p + "ln2_g"], P[p + "ln2_b"])
        u = b.add(mm(h2, W[p + "w1"]), b.bcast(W[p + "b1"], [N, F], [1]))
        t = b.un("tanh", b.mul(b.add(u, b.mul(b.mul(b.mul(u, u), u), 0.044715)), math.sqrt(2 / math.pi)))
        a = b.mul(b.mul(u, 0.5), b.add(t, 1.0))
        x2 = b.add(x1, b.add(mm(a, W[p + "w2"]), b.bcast(W[p + "b2"], [N, D], [1])))
        caches.append((x, h, c1, q4, k4, v4, pd, pr, o2, x1, h2, c2, u, t, a))
        x = x2
    hf, cf = ln_fwd(x, P["lnf_g"], P["lnf_b"])
    logits = b.convert(mm(hf, W["unembed"]), f32)  # [N,V]
    mx = b.reduce(logits, [1], "max")
    e = b.un("exponential", b.sub(logits, b.bcast(mx, [N, V], [0])))
    z = b.reduce(e, [1], "add")
    lse = b.add(b.un("log", z), mx)
    onehot = b.compare(b.iota("s32", [N, V], 1), b.bcast(targets, [N, V], [0]), "EQ")
    zeros_nv = b.splat(b.const(f32, "0"), [N, V])
    tl = b.reduce(b.select(onehot, logits, zeros_nv), [1], "add")
    loss = b.div(b.reduce(b.sub(lse, tl), [0], "add"), float(N))

    # ---- backward ----
    probs = b.div(e, b.bcast(z, [N, V], [0]))
    ones_nv = b.splat(b.const(f32, "1"), [N, V])
    dlogits = b.convert(b.div(b.sub(probs, b.select(onehot, ones_nv, zeros_nv)), float(N)), DT)
    wgrad("unembed", hf, dlogits)
    dx = ln_bwd(mm_nt(dlogits, W["unembed"]), cf, P["lnf_g"], "lnf_g", "lnf_b")
    for l in reversed(range(L)):
        p = "l%d_" % l
        (x0, h, c1, q4, k4, v4, pd, pr, o2, x1, h2, c2, u, t, a) = caches[l]
        # MLP
        wgrad(p + "w2", a, dx)
        grads[p + "b2"] = b.reduce(b.convert(dx, f32), [0], "add")
        da = mm_nt(dx, W[p + "w2"])
        c = math.sqrt(2 / math.pi)
        dgelu = b.add(b.mul(b.add(t, 1.0), 0.5),
                      b.mul(b.mul(b.mul(u, 0.5), b.sub(b.splat(b.const(DT, "1"), [N, F]), b.mul(t, t))),
                            b.mul(b.add(b.mul(b.mul(u, u), 3 * 0.044715), 1.0), c)))
        du = b.mul(da, dgelu)
        wgrad(p + "w1", h2, du)
        grads[p + "b1"] = b.reduce(b.convert(du, f32), [0], "add")
        dx1 = b.add(dx, ln_bwd(mm_nt(du, W[p + "w1"]), c2, P[p + "ln2_g"], p + "ln2_g", p + "ln2_b"))
        # attention
        wgrad(p + "wo", o2, dx1)
        do4 = b.reshape(mm_nt(dx1, W[p + "wo"]), [B, T, H, hd])
        dp = b.convert(b.dot(do4, v4, [0, 2], [3], [0, 2], [3]), f32)  # [B,H,Tq,Tk]
        dv = b.reshape(b.transpose(b.dot(pd, do4, [0, 1], [2], [0, 2], [1]), [0, 2, 1, 3]), [N, D])
        rowsum = b.bcast(b.reduce(b.mul(dp, pr), [3], "add"), [B, H, T, T], [0, 1, 2])
        ds = b.convert(b.mul(b.mul(pr, b.sub(dp, rowsum)), scale), DT)
        dq = b.reshape(b.transpose(b.dot(ds, k4, [0, 1], [3], [0, 2], [1]), [0, 2, 1, 3]), [N, D])
        dk = b.reshape(b.transpose(b.dot(ds, q4, [0, 1], [2], [0, 2], [1]), [0, 2, 1, 3]), [N, D])
        wgrad(p + "wq", h, dq)
        wgrad(p + "wk", h, dk)
        wgrad(p + "wv", h, dv)
        dh = b.add(b.add(mm_nt(dq, W[p + "wq"]), mm_nt(dk, W[p + "wk"])), mm_nt(dv, W[p + "wv"]))
        dx = b.add(dx1, ln_bwd(dh, c1, P[p + "ln1_g"], p + "ln1_g", p + "ln1_b"))
    zeros_vd = b.splat(b.const(f32, "0"), [V, D])
    grads["embed"] = b.emit("scatter", f32, [V, D], [zeros_vd, tokens, b.convert(dx, f32)],
                            "update_window_dims={1}, inserted_window_dims={0}, "
                            "scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add_f32")

    # ---- AdamW ----
    lr, b1, b2, eps, wd = 1e-3, 0.9, 0.999, 1e-8, 0.01
    one = b.const(f32, "1")
    bc1 = b.sub(one, b.pow(b.const(f32, repr(b1)), step))
    bc2 = b.sub(one, b.pow(b.const(f32, repr(b2)), step))
    new_p, new_m, new_v = [], [], []
    for n, _ in shapes:
        g, p, m, v = grads[n], P[n], M[n], S[n]
        m2 = b.add(b.mul(m, b1), b.mul(g, 1 - b1))
        v2 = b.add(b.mul(v, b2), b.mul(b.mul(g, g), 1 - b2))
        mhat = b.div(m2, b.splat(bc1, p.dims))
        vhat = b.div(v2, b.splat(bc2, p.dims))
        upd = b.add(b.div(mhat, b.add(b.un("sqrt", vhat), eps)), b.mul(p, wd))
        new_p.append(b.sub(p, b.mul(upd, lr)))
        new_m.append(m2)
        new_v.append(v2)
    outs = [loss] + new_p + new_m + new_v
    root = "  ROOT result = (%s) tuple(%s)" % (", ".join(o.shape for o in outs), ", ".join(o.name for o in outs))

    text = ["HloModule transformer_train_step_%s, entry_computation_layout={(%s)->(%s)}" % (
        DT, ", ".join(p.shape for p in b.params), ", ".join(o.shape for o in outs)), ""]
    for dt in sorted({f32, DT}):
        for kind, op in (("add", "add"), ("max", "maximum")):
            text += ["%s_%s {" % (kind, dt), "  a = %s[] parameter(0)" % dt, "  b = %s[] parameter(1)" % dt,
                     "  ROOT r = %s[] %s(a, b)" % (dt, op), "}", ""]
    text += ["ENTRY train_step {"] + b.lines + [root, "}"]
    return "\n".join(text) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--mlp", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=32000)
    sys.stdout.write(generate(ap.parse_args()))


if __name__ == "__main__":
    main()
