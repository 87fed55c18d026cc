/* libFuzzer target for the PJRT plugin's serialized executables (plugin/pjrt_blob.h:
 * PJRT_Executable_DeserializeAndLoad of a blob PJRT_Executable_Serialize wrote): any input
 * must be loaded or refused, never crash, leak or hang, and an executable that loads must run
 * or fail with an error. One host client of the plugin linked into the fuzzer (GetPjrtApi(),
 * made on the first input, the disk cache off) serves every input. Seeds are real blobs
 * (gen_pjrt_seeds: corpus modules compiled and serialized through the plugin). The first byte
 * picks the mode:
 *   even: the rest is the blob with its checksum recomputed first (kiln_pjrt_blob_reseal), so
 *         the mutations reach the compile options and the module text behind it (a hostile
 *         writer could do the same);
 *   odd:  the rest as is (the header checks and the checksum).
 * An executable that loads is executed once on zero-filled arguments of its parameters'
 * shapes (and layouts) when that is cheap: one participant, at most 64 instructions in all
 * its computations, every instruction's shape at most 16 KiB, no while loop (a loop's trip
 * count is the input's to choose). Otherwise only loading is fuzzed; lowering (buffer
 * assignment, emission, LLVM) happens on the first execute, so it is covered where the bound
 * lets the execute happen.
 * The execute found (session 13) that clang's -fsanitize=function check of the host pool's
 * call into a JIT kernel reads the bytes before the kernel (base/host_pool.c, fixed: the call
 * is not checked). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/hlo/ir.h"
#include "compiler/hlo/shape.h"
#include "tools/common/pjrt_inproc.h"
#include "plugin/pjrt_blob.h"
#include "plugin/pjrt_executable.h"

enum { MAX_INSTRUCTIONS = 64, MAX_SHAPE_BYTES = 16384 };

static const PJRT_Api *api;
static PJRT_Client *client;
static PJRT_Device *device;

static int cheap_to_run(const PJRT_Executable *e) {
  if (e->num_participants != 1 || e->device_index < 0) return 0;
  const kiln_hlo_module_t *m = e->optimized;
  int64_t count = 0;
  for (size_t c = 0; c < m->computations.len; c++) {
    const kiln_hlo_computation_t *comp = m->computations.data[c];
    for (size_t i = 0; i < comp->instructions.len; i++) {
      const kiln_hlo_instruction_t *instr = comp->instructions.data[i];
      if (!instr) continue;
      if (++count > MAX_INSTRUCTIONS || instr->opcode == KILN_OP_WHILE ||
          kiln_shape_byte_size(instr->shape) > MAX_SHAPE_BYTES)
        return 0;
    }
  }
  return 1;
}

static void buffer_destroy(PJRT_Buffer *b) {
  if (!b) return;
  PJRT_Buffer_Destroy_Args a = {.struct_size = PJRT_Buffer_Destroy_Args_STRUCT_SIZE, .buffer = b};
  pjrt_inproc_error(api, api->PJRT_Buffer_Destroy(&a), NULL);
}

static void await(PJRT_Event *ev) {
  if (!ev) return;
  PJRT_Event_Await_Args a = {.struct_size = PJRT_Event_Await_Args_STRUCT_SIZE, .event = ev};
  pjrt_inproc_error(api, api->PJRT_Event_Await(&a), NULL);
  PJRT_Event_Destroy_Args d = {.struct_size = PJRT_Event_Destroy_Args_STRUCT_SIZE, .event = ev};
  pjrt_inproc_error(api, api->PJRT_Event_Destroy(&d), NULL);
}

/* One execute of `l` on zero-filled arguments; every error is the input's, not a failure. */
static void run_once(PJRT_LoadedExecutable *l) {
  const PJRT_Executable *e = l->exec;
  int32_t np = e->num_params, no = e->num_outputs;
  PJRT_Buffer **in = calloc((size_t)np + 1, sizeof(*in));
  PJRT_Buffer **out = calloc((size_t)no + 1, sizeof(*out));
  int ok = 1;
  for (int32_t i = 0; i < np && ok; i++) {
    const kiln_pjrt_leaf_t *p = &e->params[i];
    void *zeros = calloc(1, (size_t)p->bytes + 16);
    PJRT_Buffer_MemoryLayout layout;
    memset(&layout, 0, sizeof(layout));
    layout.struct_size = PJRT_Buffer_MemoryLayout_STRUCT_SIZE;
    layout.type = PJRT_Buffer_MemoryLayout_Type_Tiled;
    layout.tiled.struct_size = PJRT_Buffer_MemoryLayout_Tiled_STRUCT_SIZE;
    layout.tiled.minor_to_major = p->m2m;
    layout.tiled.minor_to_major_size = (size_t)p->rank;
    PJRT_Client_BufferFromHostBuffer_Args a = {
        .struct_size = PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE,
        .client = client,
        .data = zeros,
        .type = p->type,
        .dims = p->dims,
        .num_dims = (size_t)p->rank,
        .host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableOnlyDuringCall,
        .device = device,
        .device_layout = p->m2m_default ? NULL : &layout};
    ok = !pjrt_inproc_error(api, api->PJRT_Client_BufferFromHostBuffer(&a), NULL);
    if (ok) {
      await(a.done_with_host_buffer);
      in[i] = a.buffer;
    }
    free(zeros);
  }
  if (ok) {
    PJRT_ExecuteOptions eo = {.struct_size = PJRT_ExecuteOptions_STRUCT_SIZE};
    PJRT_Buffer *const *arg_lists[1] = {in};
    PJRT_Buffer **out_lists[1] = {out};
    PJRT_Event *done[1] = {NULL};
    PJRT_LoadedExecutable_Execute_Args a = {
        .struct_size = PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE,
        .executable = l,
        .options = &eo,
        .argument_lists = arg_lists,
        .num_devices = 1,
        .num_args = (size_t)np,
        .output_lists = out_lists,
        .device_complete_events = done};
    if (!pjrt_inproc_error(api, api->PJRT_LoadedExecutable_Execute(&a), NULL)) await(done[0]);
  }
  for (int32_t i = 0; i < no; i++) buffer_destroy(out[i]);
  for (int32_t i = 0; i < np; i++) buffer_destroy(in[i]);
  free(out);
  free(in);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!client) {
    api = GetPjrtApi();
    client = pjrt_inproc_client(api);
    device = pjrt_inproc_device(api, client);
  }
  if (size == 0) return 0;
  size_t len = size - 1;
  unsigned char *b = malloc(len ? len : 1);
  if (len) memcpy(b, data + 1, len);
  if (data[0] % 2 == 0) kiln_pjrt_blob_reseal(b, len);
  PJRT_LoadedExecutable *l = pjrt_inproc_load(api, client, b, len, NULL);
  free(b);
  if (!l) return 0;
  if (cheap_to_run(l->exec)) run_once(l);
  pjrt_inproc_destroy(api, l);
  return 0;
}
