/* A roofline cost model for fusion decisions, in the spirit of XLA:GPU's performance model.
 *
 * A kernel's time is its launch overhead plus the larger of its memory time (bytes read +
 * bytes written over the device bandwidth) and its compute time (weighted flops over the
 * device's flop rate). Free instructions (parameters, constants, tuples, bitcast-like ops)
 * cost nothing.
 *
 * "Utilization" says how many times, per run of a consumer, each element of one of its
 * operands is read: 1 for elementwise use, out/in for a broadcast (elements are read again,
 * and a fused producer recomputed, that many times), less than 1 for a slice or a gather,
 * the window size for a reduce-window, 0 for the operand a scatter/dynamic-update-slice
 * updates in place. Through a fusion it is accumulated from the root back to the
 * parameters. Bytes read from an operand are its size times min(1, utilization); flops of a
 * fused instruction are multiplied by its utilization (recomputation). */
#ifndef KILN_PASSES_COST_MODEL_H_
#define KILN_PASSES_COST_MODEL_H_

#include <stdint.h>

#include "base/hashmap.h"
#include "compiler/hlo/ir.h"

typedef struct kiln_cost_device {
  const char *name;
  double memory_bytes_per_s; /* DRAM bandwidth */
  double flops_per_s;        /* f32 rate */
  double launch_s;           /* fixed cost per kernel */
} kiln_cost_device_t;

/* An H100/H200-like GPU: 3.3 TB/s, 60 TFLOP/s f32, 5 us per launch. */
const kiln_cost_device_t *kiln_cost_device_default(void);

/* Flops for one output element of an elementwise op on element type `t`: 1 for cheap
 * arithmetic, more for divide/sqrt and the transcendental functions; f64 and complex
 * scale it up. 0 for data movement. */
double kiln_cost_elementwise_flops(kiln_hlo_opcode_t op, kiln_elem_type_t t);
/* Bytes of the array leaves of a shape (tuples summed). */
int64_t kiln_cost_shape_bytes(const kiln_shape_t *s);
/* Elements of every array leaf of `s`, added up. */
double kiln_cost_shape_elements(const kiln_shape_t *s);

/* How many times each element of operand `k` of `in` is read per run of `in` (for a
 * fusion: through its fused computation). */
double kiln_cost_operand_utilization(const kiln_hlo_instruction_t *in, int k);
/* Utilization of `operand` by `consumer`, summed over the operand slots it fills. */
double kiln_cost_utilization_of(const kiln_hlo_instruction_t *consumer,
                                const kiln_hlo_instruction_t *operand);

/* Weighted flops of one run (a fusion: its fused instructions times their utilization;
 * reduce: input elements times the reducer's cost; dot/convolution: 2 per multiply-add). */
double kiln_cost_flops(const kiln_hlo_instruction_t *in);
double kiln_cost_bytes_read(const kiln_hlo_instruction_t *in);
double kiln_cost_bytes_written(const kiln_hlo_instruction_t *in);

/* The time of one kernel from its totals: launch + max(memory, compute). */
double kiln_cost_kernel_time(const kiln_cost_device_t *d, double bytes_read, double bytes_written,
                             double flops);
/* The time of `in` run as its own kernel (0 for free instructions). */
double kiln_cost_instruction_time(const kiln_cost_device_t *d, const kiln_hlo_instruction_t *in);
/* The estimated time of the kernel made by fusing `producer` into `consumer` (one of its
 * users), without building it: the consumer stops reading the producer's output and reads
 * the producer's operands instead (scaled by how much of the producer it uses), and
 * recomputes the producer as many times as it reads each element. `extra_output` keeps the
 * producer's result as an additional output (multi-output fusion). */
double kiln_cost_fused_time(const kiln_cost_device_t *d, const kiln_hlo_instruction_t *producer,
                            const kiln_hlo_instruction_t *consumer, bool extra_output);

/* Cost results cached per instruction. Pricing an instruction walks its fused computation;
 * a pass that prices the same instructions again and again (priority fusion re-prices the
 * neighbours of every fusion it makes) keeps one cache for the computation it rewrites and
 * calls kiln_cost_cache_forget for every instruction it replaces, removes or changes in
 * place, so each walk happens once per version of an instruction. An entry is also
 * recomputed when the instruction's operand count changed. Not thread-safe: one cache per
 * pass run. */
typedef struct kiln_cost_cache {
  kiln_ptrmap_t summaries; /* instruction -> its summary (cost_model.c) */
} kiln_cost_cache_t;

void kiln_cost_cache_init(kiln_cost_cache_t *cache);
void kiln_cost_cache_free(kiln_cost_cache_t *cache);
void kiln_cost_cache_forget(kiln_cost_cache_t *cache, const kiln_hlo_instruction_t *in);

/* kiln_cost_instruction_time and kiln_cost_fused_time through `cache` (NULL: uncached). */
double kiln_cost_instruction_time_cached(kiln_cost_cache_t *cache, const kiln_cost_device_t *d,
                                         const kiln_hlo_instruction_t *in);
double kiln_cost_fused_time_cached(kiln_cost_cache_t *cache, const kiln_cost_device_t *d,
                                   const kiln_hlo_instruction_t *producer,
                                   const kiln_hlo_instruction_t *consumer, bool extra_output);

#endif /* KILN_PASSES_COST_MODEL_H_ */
