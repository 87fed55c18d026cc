/* Warp chains on the host (kir_to_llvm_host.c): a run of shuffles and the element-wise ops
 * combining them lowers to one warp loop of 32-lane vectors instead of a warp loop and a
 * thread loop per step. The lowered IR has one warp loop per chain, and each op kind the
 * chain takes (add, sub, mul, min, max, and, or, xor on f32 / f64 / s32 / s64 / u32 / u64,
 * with a uniform operand) gives the scalar tree's result bit for bit, NaN included. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <llvm-c/Core.h>

#include "compiler/codegen/kir_pipeline.h"
#include "tests/kir_test_kernels.h"

static kiln_host_pool_t *g_pool;

static int setup(void **state) {
  (void)state;
  return kiln_host_pool_create(3, &g_pool) ? -1 : 0;
}
static int teardown(void **state) {
  (void)state;
  kiln_host_pool_destroy(g_pool);
  return 0;
}

enum { kThreads = 64, kBlocks = 5 };

/* out[bl * 2 + warp] = the shuffle-down tree of op over the warp's in[bl * 64 + th], whose
 * first step also applies op with the constant c. */
static kiln_kir_module_t *build_tree(kiln_elem_type_t e, kiln_kir_opcode_t op, double c) {
  kiln_kir_module_t *m = kiln_kir_module_create("tree", NULL);
  int64_t n_in = kThreads * kBlocks, n_out = 2 * kBlocks;
  const kiln_kir_type_t *tin = kiln_kir_type_tensor(m, e, 1, &n_in, KILN_KIR_SPACE_GLOBAL);
  const kiln_kir_type_t *tout = kiln_kir_type_tensor(m, e, 1, &n_out, KILN_KIR_SPACE_GLOBAL);
  const kiln_kir_type_t *kp[2] = {tin, tout};
  const char *kn[2] = {"in", "out"};
  kiln_kir_func_t *k = kiln_kir_func_create(m, "tree", KILN_KIR_FUNC_KERNEL, kp, kn, 2, &tout, 1);
  kiln_kir_func_set_written(k, 1, true);
  int64_t block[3] = {kThreads, 1, 1}, grid[3] = {kBlocks, 1, 1};
  kiln_kir_func_set_launch(k, block, grid);
  kiln_kir_builder_t b;
  kiln_kir_builder_init(&b, m, kiln_kir_func_body(k));
  kiln_kir_value_t *th = kiln_kir_thread_id(&b, 0, 0, kThreads - 1);
  kiln_kir_value_t *bl = kiln_kir_block_id(&b, 0, 0, kBlocks - 1);
  kiln_kir_value_t *ids[2] = {th, bl};
  char text[256];
  snprintf(text, sizeof(text),
           "(th_x, bl_x) -> (bl_x * 64 + th_x), domain: th_x in [0, 63], bl_x in [0, %d]",
           kBlocks - 1);
  kiln_kir_value_t *idx = kiln_kir_apply_indexing1(&b, kir_test_map(m, text), ids, 2);
  kiln_kir_value_t *v = kiln_kir_extract(&b, kiln_kir_func_param(k, 0), &idx, 1);
  bool fp = e == KILN_F32 || e == KILN_F64;
  kiln_kir_value_t *cv =
      fp ? kiln_kir_const_float(&b, e, c) : kiln_kir_const_int(&b, e, (int64_t)c);
  for (int off = 16; off >= 1; off /= 2) {
    v = kiln_kir_binary(&b, op, v, kiln_kir_shuffle(&b, KILN_KIR_SHUFFLE_DOWN, v, off, 32));
    if (off == 16) v = kiln_kir_binary(&b, op, v, cv);
  }
  kiln_kir_value_t *lane = kiln_kir_binary(&b, KILN_KIR_AND, th, kiln_kir_const_index(&b, 31));
  kiln_kir_value_t *is_lane0 = kiln_kir_cmp(&b, KILN_KIR_CMP_EQ, lane, kiln_kir_const_index(&b, 0));
  snprintf(
      text, sizeof(text),
      "(th_x, bl_x) -> (bl_x * 2 + th_x floordiv 32), domain: th_x in [0, 63], bl_x in [0, %d]",
      kBlocks - 1);
  kiln_kir_value_t *o = kiln_kir_apply_indexing1(&b, kir_test_map(m, text), ids, 2);
  kiln_kir_value_t *res = kir_test_insert_if(&b, is_lane0, v, kiln_kir_func_param(k, 1), &o, 1);
  kiln_kir_return(&b, &res, 1);
  return kir_test_finish(&b, m);
}

/* The scalar op on doubles / 64-bit integers, as the kernel's types compute it. */
static double fop(kiln_kir_opcode_t op, double x, double y, bool f32) {
  double r;
  switch (op) {
    case KILN_KIR_ADD:
      r = f32 ? (double)((float)x + (float)y) : x + y;
      break;
    case KILN_KIR_SUB:
      r = f32 ? (double)((float)x - (float)y) : x - y;
      break;
    case KILN_KIR_MUL:
      r = f32 ? (double)((float)x * (float)y) : x * y;
      break;
    case KILN_KIR_MIN:
      r = isnan(x) || isnan(y) ? NAN : (x == y ? (signbit(x) ? x : y) : fmin(x, y));
      break;
    default:
      r = isnan(x) || isnan(y) ? NAN : (x == y ? (signbit(x) ? y : x) : fmax(x, y));
      break;
  }
  return r;
}

static uint64_t iop(kiln_kir_opcode_t op, uint64_t x, uint64_t y, kiln_elem_type_t e) {
  bool sgn = e == KILN_S32 || e == KILN_S64;
  int bits = e == KILN_S32 || e == KILN_U32 ? 32 : 64;
  uint64_t mask = bits == 32 ? 0xffffffffull : ~0ull, r;
  int64_t sx = bits == 32 ? (int64_t)(int32_t)x : (int64_t)x,
          sy = bits == 32 ? (int64_t)(int32_t)y : (int64_t)y;
  switch (op) {
    case KILN_KIR_ADD:
      r = x + y;
      break;
    case KILN_KIR_SUB:
      r = x - y;
      break;
    case KILN_KIR_MUL:
      r = x * y;
      break;
    case KILN_KIR_AND:
      r = x & y;
      break;
    case KILN_KIR_OR:
      r = x | y;
      break;
    case KILN_KIR_XOR:
      r = x ^ y;
      break;
    case KILN_KIR_MIN:
      r = sgn ? (sx < sy ? x : y) : ((x & mask) < (y & mask) ? x : y);
      break;
    default:
      r = sgn ? (sx > sy ? x : y) : ((x & mask) > (y & mask) ? x : y);
      break;
  }
  return r & mask;
}

typedef struct tcase {
  kiln_elem_type_t e;
  kiln_kir_opcode_t op;
} tcase_t;

static size_t esize(kiln_elem_type_t e) {
  return e == KILN_F32 || e == KILN_S32 || e == KILN_U32 ? 4 : 8;
}

/* Element i of the input, as a double (floats, with a NaN and signed zeros) or bits. */
static double fin(int i) {
  if (i == 77) return NAN;
  if (i % 13 == 0) return i % 2 ? -0.0 : 0.0;
  return (double)((i * 2654435761u) % 1000) / 64.0 - 7.0;
}
static uint64_t iin(int i) {
  return (uint64_t)(i * 2654435761u) * 0x9E3779B97F4A7C15ull;
}

static void run_case(tcase_t t) {
  kiln_kir_module_t *m = build_tree(t.e, t.op, 3.0);
  kiln_host_jit_t *jit;
  kiln_kir_host_kernel_t k = kir_test_compile_host(m, &jit);
  size_t es = esize(t.e);
  bool fp = t.e == KILN_F32 || t.e == KILN_F64, f32 = t.e == KILN_F32;
  uint64_t mask = es == 4 ? 0xffffffffull : ~0ull;
  unsigned char *in = calloc(kThreads * kBlocks, es), *out = calloc(2 * kBlocks, es);
  for (int i = 0; i < kThreads * kBlocks; i++) {
    if (f32) {
      float f = (float)fin(i);
      memcpy(in + i * es, &f, es);
    } else if (fp) {
      double d = fin(i);
      memcpy(in + i * es, &d, es);
    } else {
      uint64_t u = iin(i) & mask;
      memcpy(in + i * es, &u, es); /* little endian: the low bytes */
    }
  }
  void *args[2] = {in, out};
  assert_null(kiln_kir_host_kernel_run(&k, g_pool, args));
  for (int w = 0; w < 2 * kBlocks; w++) {
    double fl[32];
    uint64_t il[32];
    for (int i = 0; i < 32; i++) {
      int src = w * 32 + i;
      if (f32) {
        float f;
        memcpy(&f, in + src * es, 4);
        fl[i] = f;
      } else if (fp) {
        memcpy(&fl[i], in + src * es, 8);
      } else {
        il[i] = 0;
        memcpy(&il[i], in + src * es, es);
      }
    }
    for (int off = 16; off >= 1; off /= 2) {
      double nf[32];
      uint64_t ni[32];
      for (int i = 0; i < 32; i++) {
        int s = i + off < 32 ? i + off : i;
        if (fp)
          nf[i] = fop(t.op, fl[i], fl[s], f32);
        else
          ni[i] = iop(t.op, il[i], il[s], t.e);
        if (off == 16) {
          if (fp)
            nf[i] = fop(t.op, nf[i], 3.0, f32);
          else
            ni[i] = iop(t.op, ni[i], 3, t.e);
        }
      }
      memcpy(fl, nf, sizeof(fl));
      memcpy(il, ni, sizeof(il));
    }
    unsigned char want[8] = {0};
    if (f32) {
      float f = (float)fl[0];
      memcpy(want, &f, 4);
    } else if (fp) {
      memcpy(want, &fl[0], 8);
    } else {
      memcpy(want, &il[0], es);
    }
    bool nan_ok = false;
    if (fp) { /* any NaN matches a NaN (the payload is not HLO's concern) */
      double got = f32 ? (double)((float *)(void *)out)[w] : ((double *)(void *)out)[w];
      nan_ok = isnan(got) && isnan(fl[0]);
    }
    if (!nan_ok && memcmp(want, out + w * es, es) != 0) {
      fprintf(stderr, "type %d op %s warp %d: result differs from the scalar tree\n", (int)t.e,
              kiln_kir_opcode_name(t.op), w);
      fail();
    }
  }
  free(in);
  free(out);
  kiln_host_jit_destroy(jit);
  kiln_kir_module_destroy(m);
}

static void test_every_chain_op_matches_the_scalar_shuffle_tree_bit_for_bit(void **state) {
  (void)state;
  static const kiln_kir_opcode_t kFloat[] = {KILN_KIR_ADD, KILN_KIR_SUB, KILN_KIR_MUL, KILN_KIR_MIN,
                                             KILN_KIR_MAX};
  static const kiln_kir_opcode_t kInt[] = {KILN_KIR_ADD, KILN_KIR_SUB, KILN_KIR_MUL, KILN_KIR_MIN,
                                           KILN_KIR_MAX, KILN_KIR_AND, KILN_KIR_OR,  KILN_KIR_XOR};
  static const kiln_elem_type_t kFloats[] = {KILN_F32, KILN_F64};
  static const kiln_elem_type_t kInts[] = {KILN_S32, KILN_S64, KILN_U32, KILN_U64};
  for (size_t e = 0; e < 2; e++)
    for (size_t o = 0; o < sizeof(kFloat) / sizeof(kFloat[0]); o++)
      run_case((tcase_t){kFloats[e], kFloat[o]});
  for (size_t e = 0; e < 4; e++)
    for (size_t o = 0; o < sizeof(kInt) / sizeof(kInt[0]); o++)
      run_case((tcase_t){kInts[e], kInt[o]});
}

/* Loops of the lowered kernel whose header is named `name` (kir_to_llvm_host.c's names). */
static int count_blocks(LLVMModuleRef mod, const char *name) {
  int n = 0;
  size_t len = strlen(name);
  for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f))
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(f); bb; bb = LLVMGetNextBasicBlock(bb)) {
      const char *bn = LLVMGetBasicBlockName(bb);
      if (!strncmp(bn, name, len) && (bn[len] == '\0' || (bn[len] >= '0' && bn[len] <= '9'))) n++;
    }
  return n;
}

static void test_row_reduction_tail_lowers_to_one_warp_loop_per_shuffle_tree(void **state) {
  (void)state;
  /* Two trees (5 and 3 shuffles): as segments, a warp loop per shuffle and a thread loop per
   * add (8 + 8). As chains: per tree one warp loop for all but the last shuffle and its add,
   * and the last shuffle's own warp loop (its add shares a thread loop with the lane tests,
   * which a chain does not take). Thread loops left: the column loop, the last add with
   * lane 0's store to shared memory, the read of shared memory (and its predicate), and the
   * second tree's last add with thread 0's store. */
  kiln_kir_module_t *m = kir_test_build_row_reduce(4, 512);
  assert_non_null(m);
  assert_null(kiln_kir_pipeline_run(m, NULL));
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef mod = NULL;
  assert_null(kiln_kir_lower_host(m, ctx, &mod));
  assert_int_equal(count_blocks(mod, "warp"), 4);
  assert_int_equal(count_blocks(mod, "tx"), 6);
  LLVMDisposeModule(mod);
  LLVMContextDispose(ctx);
  kiln_kir_module_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_chain_op_matches_the_scalar_shuffle_tree_bit_for_bit),
      cmocka_unit_test(test_row_reduction_tail_lowers_to_one_warp_loop_per_shuffle_tree),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
