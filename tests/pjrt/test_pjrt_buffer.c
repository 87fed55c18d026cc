/* PJRT conformance for buffers: BufferFromHostBuffer (every element type, the host-buffer
 * semantics and their done events, byte strides, device layouts, memories), ToHostBuffer
 * (size query, host layouts), the buffer queries, Delete/IsDeleted and deleted-buffer
 * errors, CopyToDevice between two host devices, CopyToMemory, CopyRawToHost and
 * CopyRawToHostFuture, error buffers (Client_CreateErrorBuffer), the async host-to-device
 * transfer manager, external
 * references, uninitialized buffers and views, memory statistics; and the error paths (NULL
 * args, short structs, NULL and foreign handles, wrong sizes). Built against OpenXLA's
 * pjrt_c_api.h; the plugin is loaded with dlopen(RTLD_LOCAL). Host platform ("cpu"), with a
 * pass over "cuda" where a GPU is present. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include <cmocka.h>

#include "pjrt_test_util.h"

static const PJRT_Api *api;
static PJRT_Client *g_client; /* cpu, 2 devices */
static PJRT_Device *g_dev[2];

#define ANY ""

static PJRT_Client *make_client(const char *platform, int64_t n) {
  PJRT_NamedValue o[2] = {pjrt_test_opt_string("platform", platform),
                          pjrt_test_opt_int("num_devices", n)};
  return pjrt_test_client(api, o, 2);
}

static void devices_of(PJRT_Client *c, PJRT_Device **out, size_t n) {
  PJRT_Client_Devices_Args d = {.struct_size = PJRT_Client_Devices_Args_STRUCT_SIZE, .client = c};
  PJRT_CHECK(api, api->PJRT_Client_Devices(&d));
  assert_true(d.num_devices >= n);
  for (size_t i = 0; i < n; i++) out[i] = d.devices[i];
}

static PJRT_Memory *memory_of(PJRT_Device *d, int kind) {
  PJRT_Device_AddressableMemories_Args a = {
      .struct_size = PJRT_Device_AddressableMemories_Args_STRUCT_SIZE, .device = d};
  PJRT_CHECK(api, api->PJRT_Device_AddressableMemories(&a));
  return a.memories[kind];
}

static void init_bfhb(PJRT_Client_BufferFromHostBuffer_Args *a, PJRT_Client *c, PJRT_Device *d,
                      const void *data, PJRT_Buffer_Type t, const int64_t *dims, size_t n) {
  memset(a, 0, sizeof(*a));
  a->struct_size = PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE;
  a->client = c;
  a->data = data;
  a->type = t;
  a->dims = dims;
  a->num_dims = n;
  a->host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableOnlyDuringCall;
  a->device = d;
}

static void await_destroy(PJRT_Event *e) {
  assert_non_null(e);
  PJRT_Event_Await_Args aw = {.struct_size = PJRT_Event_Await_Args_STRUCT_SIZE, .event = e};
  PJRT_CHECK(api, api->PJRT_Event_Await(&aw));
  PJRT_Event_Destroy_Args d = {.struct_size = PJRT_Event_Destroy_Args_STRUCT_SIZE, .event = e};
  PJRT_CHECK(api, api->PJRT_Event_Destroy(&d));
}

static PJRT_Buffer *from_host(PJRT_Client *c, PJRT_Device *d, const void *data, PJRT_Buffer_Type t,
                              const int64_t *dims, size_t n) {
  PJRT_Client_BufferFromHostBuffer_Args a;
  init_bfhb(&a, c, d, data, t, dims, n);
  PJRT_CHECK(api, api->PJRT_Client_BufferFromHostBuffer(&a));
  assert_non_null(a.buffer);
  await_destroy(a.done_with_host_buffer);
  return a.buffer;
}

static void buffer_destroy(PJRT_Buffer *b) {
  PJRT_Buffer_Destroy_Args d = {.struct_size = PJRT_Buffer_Destroy_Args_STRUCT_SIZE, .buffer = b};
  PJRT_CHECK(api, api->PJRT_Buffer_Destroy(&d));
}

/* The buffer's bytes in `layout` (NULL: its own); *size set. Caller frees. */
static void *to_host(PJRT_Buffer *b, PJRT_Buffer_MemoryLayout *layout, size_t *size) {
  PJRT_Buffer_ToHostBuffer_Args a = {
      .struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE, .src = b, .host_layout = layout};
  PJRT_CHECK(api, api->PJRT_Buffer_ToHostBuffer(&a));
  assert_null(a.event);
  void *dst = malloc(a.dst_size ? a.dst_size : 1);
  a.dst = dst;
  PJRT_CHECK(api, api->PJRT_Buffer_ToHostBuffer(&a));
  await_destroy(a.event);
  if (size) *size = a.dst_size;
  return dst;
}

static size_t on_device_size(PJRT_Buffer *b) {
  PJRT_Buffer_OnDeviceSizeInBytes_Args a = {
      .struct_size = PJRT_Buffer_OnDeviceSizeInBytes_Args_STRUCT_SIZE, .buffer = b};
  PJRT_CHECK(api, api->PJRT_Buffer_OnDeviceSizeInBytes(&a));
  return a.on_device_size_in_bytes;
}

static PJRT_Buffer_MemoryLayout tiled(const int64_t *m2m, size_t n) {
  PJRT_Buffer_MemoryLayout l;
  memset(&l, 0, sizeof(l));
  l.struct_size = PJRT_Buffer_MemoryLayout_STRUCT_SIZE;
  l.type = PJRT_Buffer_MemoryLayout_Type_Tiled;
  l.tiled.struct_size = PJRT_Buffer_MemoryLayout_Tiled_STRUCT_SIZE;
  l.tiled.minor_to_major = m2m;
  l.tiled.minor_to_major_size = n;
  return l;
}

/* ---- round trips ------------------------------------------------------------------------- */

typedef struct type_case {
  PJRT_Buffer_Type type;
  size_t bytes;
  const char *name;
} type_case_t;

static const type_case_t kTypes[] = {
    {PJRT_Buffer_Type_PRED, 1, "pred"},
    {PJRT_Buffer_Type_S8, 1, "s8"},
    {PJRT_Buffer_Type_S16, 2, "s16"},
    {PJRT_Buffer_Type_S32, 4, "s32"},
    {PJRT_Buffer_Type_S64, 8, "s64"},
    {PJRT_Buffer_Type_U8, 1, "u8"},
    {PJRT_Buffer_Type_U16, 2, "u16"},
    {PJRT_Buffer_Type_U32, 4, "u32"},
    {PJRT_Buffer_Type_U64, 8, "u64"},
    {PJRT_Buffer_Type_F16, 2, "f16"},
    {PJRT_Buffer_Type_F32, 4, "f32"},
    {PJRT_Buffer_Type_F64, 8, "f64"},
    {PJRT_Buffer_Type_BF16, 2, "bf16"},
    {PJRT_Buffer_Type_C64, 8, "c64"},
    {PJRT_Buffer_Type_C128, 16, "c128"},
    {PJRT_Buffer_Type_S4, 1, "s4"},
    {PJRT_Buffer_Type_U4, 1, "u4"},
    {PJRT_Buffer_Type_S2, 1, "s2"},
    {PJRT_Buffer_Type_U2, 1, "u2"},
    {PJRT_Buffer_Type_S1, 1, "s1"},
    {PJRT_Buffer_Type_U1, 1, "u1"},
    {PJRT_Buffer_Type_F8E5M2, 1, "f8e5m2"},
    {PJRT_Buffer_Type_F8E4M3FN, 1, "f8e4m3fn"},
};

/* Valid element bytes for `t`: pred 0/1, 4-, 2- and 1-bit in range, others anything. */
static void fill(PJRT_Buffer_Type t, unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) {
    unsigned v = (unsigned)(i * 2654435761u + seed * 40503u) >> 7;
    switch (t) {
      case PJRT_Buffer_Type_PRED:
        p[i] = v & 1;
        break;
      case PJRT_Buffer_Type_S4:
        p[i] = (unsigned char)(int8_t)((int)(v % 16) - 8);
        break;
      case PJRT_Buffer_Type_U4:
        p[i] = v % 16;
        break;
      case PJRT_Buffer_Type_S2:
        p[i] = (unsigned char)(int8_t)((int)(v % 4) - 2);
        break;
      case PJRT_Buffer_Type_U2:
        p[i] = v % 4;
        break;
      case PJRT_Buffer_Type_S1:
        p[i] = v & 1 ? 0xff : 0; /* -1 or 0 */
        break;
      case PJRT_Buffer_Type_U1:
        p[i] = v & 1;
        break;
      default:
        p[i] = (unsigned char)v;
    }
  }
}

static void roundtrip_all_types(PJRT_Client *c, PJRT_Device *dev) {
  const int64_t dims[3] = {3, 1, 5};
  for (size_t k = 0; k < sizeof(kTypes) / sizeof(kTypes[0]); k++) {
    const type_case_t *tc = &kTypes[k];
    size_t n = 15 * tc->bytes;
    unsigned char *src = malloc(n);
    fill(tc->type, src, n, (unsigned)k);
    PJRT_Buffer *b = from_host(c, dev, src, tc->type, dims, 3);
    PJRT_Buffer_ElementType_Args et = {.struct_size = PJRT_Buffer_ElementType_Args_STRUCT_SIZE,
                                       .buffer = b};
    PJRT_CHECK(api, api->PJRT_Buffer_ElementType(&et));
    assert_int_equal(et.type, tc->type);
    PJRT_Buffer_Dimensions_Args dd = {.struct_size = PJRT_Buffer_Dimensions_Args_STRUCT_SIZE,
                                      .buffer = b};
    PJRT_CHECK(api, api->PJRT_Buffer_Dimensions(&dd));
    assert_int_equal(dd.num_dims, 3);
    assert_memory_equal(dd.dims, dims, sizeof(dims));
    PJRT_Buffer_UnpaddedDimensions_Args ud = {
        .struct_size = PJRT_Buffer_UnpaddedDimensions_Args_STRUCT_SIZE, .buffer = b};
    PJRT_CHECK(api, api->PJRT_Buffer_UnpaddedDimensions(&ud));
    assert_int_equal(ud.num_dims, 3);
    assert_memory_equal(ud.unpadded_dims, dims, sizeof(dims));
    PJRT_Buffer_DynamicDimensionIndices_Args dyn = {
        .struct_size = PJRT_Buffer_DynamicDimensionIndices_Args_STRUCT_SIZE, .buffer = b};
    PJRT_CHECK(api, api->PJRT_Buffer_DynamicDimensionIndices(&dyn));
    assert_int_equal(dyn.num_dynamic_dims, 0);
    assert_int_equal(on_device_size(b), n);
    size_t got_n = 0;
    unsigned char *got = to_host(b, NULL, &got_n);
    assert_int_equal(got_n, n);
    if (memcmp(got, src, n)) fail_msg("%s: round trip differs", tc->name);
    free(got);
    buffer_destroy(b);
    free(src);
  }
  /* A scalar and an empty array. */
  double x = 2.5;
  PJRT_Buffer *b = from_host(c, dev, &x, PJRT_Buffer_Type_F64, NULL, 0);
  size_t sz;
  double *y = to_host(b, NULL, &sz);
  assert_int_equal(sz, 8);
  assert_true(*y == 2.5);
  free(y);
  buffer_destroy(b);
  const int64_t empty[2] = {4, 0};
  b = from_host(c, dev, NULL, PJRT_Buffer_Type_F32, empty, 2);
  assert_int_equal(on_device_size(b), 0);
  buffer_destroy(b);
}

static void test_roundtrip_every_type(void **state) {
  (void)state;
  roundtrip_all_types(g_client, g_dev[1]);
}

static void test_roundtrip_cuda(void **state) {
  (void)state;
  PJRT_NamedValue o = pjrt_test_opt_string("platform", "cuda");
  PJRT_Client_Create_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Client_Create_Args_STRUCT_SIZE;
  a.create_options = &o;
  a.num_options = 1;
  PJRT_Error *e = api->PJRT_Client_Create(&a);
  if (e) {
    pjrt_test_take_error(api, e, NULL, 0);
    skip();
  }
  PJRT_Device *d[1];
  devices_of(a.client, d, 1);
  roundtrip_all_types(a.client, d[0]);
  /* Pinned host memory and a copy back to the device. */
  float v[6] = {1, 2, 3, 4, 5, 6};
  const int64_t dims[2] = {2, 3};
  PJRT_Buffer *b = from_host(a.client, d[0], v, PJRT_Buffer_Type_F32, dims, 2);
  PJRT_Buffer_CopyToMemory_Args cm = {.struct_size = PJRT_Buffer_CopyToMemory_Args_STRUCT_SIZE,
                                      .buffer = b,
                                      .dst_memory = memory_of(d[0], 1)};
  PJRT_CHECK(api, api->PJRT_Buffer_CopyToMemory(&cm));
  float *h = to_host(cm.dst_buffer, NULL, NULL);
  assert_memory_equal(h, v, sizeof(v));
  free(h);
  /* Transposed host layout through a staging copy. */
  const int64_t cm_m2m[2] = {0, 1};
  PJRT_Buffer_MemoryLayout l = tiled(cm_m2m, 2);
  h = to_host(b, &l, NULL);
  const float want[6] = {1, 4, 2, 5, 3, 6};
  assert_memory_equal(h, want, sizeof(want));
  free(h);
  buffer_destroy(cm.dst_buffer);
  buffer_destroy(b);
  pjrt_test_client_destroy(api, a.client);
}

/* ---- strides and layouts ----------------------------------------------------------------- */

static void test_byte_strides_transposed(void **state) {
  (void)state;
  /* Logical dims {2, 3, 4} f32, value = 100i + 10j + k, stored in memory with the first
   * dimension minor-most and padding: strides {4, 2*4*... }. */
  const int64_t dims[3] = {2, 3, 4};
  /* layout: i fastest (stride 4), then k (stride 12: 3 floats, one of padding), then j. */
  const int64_t strides[3] = {4, 4 * 12, 12};
  float *mem = calloc(3 * 4 * 12, sizeof(float)); /* generous */
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++)
      for (int k = 0; k < 4; k++)
        *(float *)((char *)mem + i * strides[0] + j * strides[1] + k * strides[2]) =
            (float)(100 * i + 10 * j + k);
  PJRT_Client_BufferFromHostBuffer_Args a;
  init_bfhb(&a, g_client, g_dev[0], mem, PJRT_Buffer_Type_F32, dims, 3);
  a.byte_strides = strides;
  a.num_byte_strides = 3;
  PJRT_CHECK(api, api->PJRT_Client_BufferFromHostBuffer(&a));
  await_destroy(a.done_with_host_buffer);
  float *got = to_host(a.buffer, NULL, NULL);
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++)
      for (int k = 0; k < 4; k++) assert_true(got[(i * 3 + j) * 4 + k] == 100 * i + 10 * j + k);
  free(got);
  buffer_destroy(a.buffer);

  /* Negative strides: `data` points at the last row; rows come in reverse. */
  float rows[2][3] = {{1, 2, 3}, {4, 5, 6}};
  const int64_t d2[2] = {2, 3};
  const int64_t neg[2] = {-12, 4};
  init_bfhb(&a, g_client, g_dev[0], rows[1], PJRT_Buffer_Type_F32, d2, 2);
  a.byte_strides = neg;
  a.num_byte_strides = 2;
  PJRT_CHECK(api, api->PJRT_Client_BufferFromHostBuffer(&a));
  await_destroy(a.done_with_host_buffer);
  got = to_host(a.buffer, NULL, NULL);
  const float want[6] = {4, 5, 6, 1, 2, 3};
  assert_memory_equal(got, want, sizeof(want));
  free(got);
  buffer_destroy(a.buffer);

  /* Wrong number of strides. */
  init_bfhb(&a, g_client, g_dev[0], mem, PJRT_Buffer_Type_F32, dims, 3);
  a.byte_strides = strides;
  a.num_byte_strides = 2;
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_BufferFromHostBuffer(&a),
                    PJRT_Error_Code_INVALID_ARGUMENT, "strides");
  free(mem);
}

static void test_device_layout(void **state) {
  (void)state;
  const int64_t dims[2] = {3, 4};
  float v[12];
  for (int i = 0; i < 12; i++) v[i] = (float)i; /* row-major: v[r*4+c] */
  const int64_t col_major[2] = {0, 1};
  PJRT_Buffer_MemoryLayout l = tiled(col_major, 2);
  PJRT_Client_BufferFromHostBuffer_Args a;
  init_bfhb(&a, g_client, g_dev[0], v, PJRT_Buffer_Type_F32, dims, 2);
  a.device_layout = &l;
  PJRT_CHECK(api, api->PJRT_Client_BufferFromHostBuffer(&a));
  await_destroy(a.done_with_host_buffer);
  PJRT_Buffer *b = a.buffer;
  PJRT_Buffer_GetMemoryLayout_Args ml = {
      .struct_size = PJRT_Buffer_GetMemoryLayout_Args_STRUCT_SIZE, .buffer = b};
  PJRT_CHECK(api, api->PJRT_Buffer_GetMemoryLayout(&ml));
  assert_int_equal(ml.layout.type, PJRT_Buffer_MemoryLayout_Type_Tiled);
  assert_int_equal(ml.layout.tiled.minor_to_major_size, 2);
  assert_int_equal(ml.layout.tiled.minor_to_major[0], 0);
  assert_int_equal(ml.layout.tiled.minor_to_major[1], 1);
  assert_int_equal(ml.layout.tiled.num_tiles, 0);
  /* The raw bytes are column-major. */
  float raw[12];
  PJRT_Buffer_CopyRawToHost_Args cr = {.struct_size = PJRT_Buffer_CopyRawToHost_Args_STRUCT_SIZE,
                                       .buffer = b,
                                       .dst = raw,
                                       .offset = 0,
                                       .transfer_size = sizeof(raw)};
  PJRT_CHECK(api, api->PJRT_Buffer_CopyRawToHost(&cr));
  await_destroy(cr.event);
  for (int r = 0; r < 3; r++)
    for (int c = 0; c < 4; c++) assert_true(raw[c * 3 + r] == v[r * 4 + c]);
  /* Partial raw copy and its bounds. */
  float two[2];
  cr.dst = two;
  cr.offset = 4;
  cr.transfer_size = 8;
  PJRT_CHECK(api, api->PJRT_Buffer_CopyRawToHost(&cr));
  await_destroy(cr.event);
  assert_true(two[0] == raw[1] && two[1] == raw[2]);
  cr.offset = 44;
  PJRT_EXPECT_ERROR(api, api->PJRT_Buffer_CopyRawToHost(&cr), PJRT_Error_Code_INVALID_ARGUMENT,
                    "outside");
  /* ToHostBuffer without a layout: the buffer's own (column-major). */
  float *got = to_host(b, NULL, NULL);
  assert_memory_equal(got, raw, sizeof(raw));
  free(got);
  /* With a row-major host layout: the original. */
  const int64_t row_major[2] = {1, 0};
  PJRT_Buffer_MemoryLayout rl = tiled(row_major, 2);
  got = to_host(b, &rl, NULL);
  assert_memory_equal(got, v, sizeof(v));
  free(got);
  /* A strides-type host layout for the same thing. */
  PJRT_Buffer_MemoryLayout sl;
  memset(&sl, 0, sizeof(sl));
  sl.struct_size = PJRT_Buffer_MemoryLayout_STRUCT_SIZE;
  sl.type = PJRT_Buffer_MemoryLayout_Type_Strides;
  const int64_t rm_strides[2] = {16, 4};
  sl.strides.struct_size = PJRT_Buffer_MemoryLayout_Strides_STRUCT_SIZE;
  sl.strides.byte_strides = rm_strides;
  sl.strides.num_byte_strides = 2;
  got = to_host(b, &sl, NULL);
  assert_memory_equal(got, v, sizeof(v));
  free(got);
  /* Errors: not a permutation, tiles, non-dense strides, too small a destination. */
  const int64_t bad[2] = {0, 0};
  PJRT_Buffer_MemoryLayout bl = tiled(bad, 2);
  PJRT_Buffer_ToHostBuffer_Args th = {.struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE,
                                      .src = b,
                                      .host_layout = &bl,
                                      .dst = raw,
                                      .dst_size = 48};
  PJRT_EXPECT_ERROR(api, api->PJRT_Buffer_ToHostBuffer(&th), PJRT_Error_Code_INVALID_ARGUMENT,
                    "permutation");
  const int64_t tile_dims[2] = {8, 128};
  const size_t tile_sizes[1] = {2};
  PJRT_Buffer_MemoryLayout tl = tiled(row_major, 2);
  tl.tiled.tile_dims = tile_dims;
  tl.tiled.tile_dim_sizes = tile_sizes;
  tl.tiled.num_tiles = 1;
  init_bfhb(&a, g_client, g_dev[0], v, PJRT_Buffer_Type_F32, dims, 2);
  a.device_layout = &tl;
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_BufferFromHostBuffer(&a), PJRT_Error_Code_UNIMPLEMENTED,
                    "tiled");
  const int64_t trivial_dims[1] = {1};
  const size_t trivial_sizes[1] = {1};
  tl.tiled.tile_dims = trivial_dims;
  tl.tiled.tile_dim_sizes = trivial_sizes;
  PJRT_CHECK(api, api->PJRT_Client_BufferFromHostBuffer(&a)); /* a trivial tile is fine */
  await_destroy(a.done_with_host_buffer);
  buffer_destroy(a.buffer);
  const int64_t gap_strides[2] = {32, 4};
  sl.strides.byte_strides = gap_strides;
  a.device_layout = &sl;
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_BufferFromHostBuffer(&a), PJRT_Error_Code_UNIMPLEMENTED,
                    "dense");
  const int64_t cm_strides[2] = {4, 12};
  sl.strides.byte_strides = cm_strides;
  PJRT_CHECK(api, api->PJRT_Client_BufferFromHostBuffer(&a)); /* dense column-major strides */
  await_destroy(a.done_with_host_buffer);
  ml.buffer = a.buffer;
  PJRT_CHECK(api, api->PJRT_Buffer_GetMemoryLayout(&ml));
  assert_int_equal(ml.layout.tiled.minor_to_major[0], 0);
  buffer_destroy(a.buffer);
  th.host_layout = NULL;
  th.dst_size = 47;
  PJRT_EXPECT_ERROR(api, api->PJRT_Buffer_ToHostBuffer(&th), PJRT_Error_Code_INVALID_ARGUMENT,
                    "dst_size");
  buffer_destroy(b);
}

/* ---- semantics and done events ----------------------------------------------------------- */

static void test_host_buffer_semantics(void **state) {
  (void)state;
  /* (the zero-copy semantics: test_pjrt_zero_copy) */
  const PJRT_HostBufferSemantics sem[2] = {
      PJRT_HostBufferSemantics_kImmutableOnlyDuringCall,
      PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes};
  const int64_t dims[1] = {64};
  for (int s = 0; s < 2; s++) {
    int32_t *v = malloc(64 * sizeof(int32_t));
    for (int i = 0; i < 64; i++) v[i] = i * (s + 1);
    PJRT_Client_BufferFromHostBuffer_Args a;
    init_bfhb(&a, g_client, g_dev[0], v, PJRT_Buffer_Type_S32, dims, 1);
    a.host_buffer_semantics = sem[s];
    PJRT_CHECK(api, api->PJRT_Client_BufferFromHostBuffer(&a));
    assert_non_null(a.done_with_host_buffer);
    await_destroy(a.done_with_host_buffer);
    /* After the done event the host data may change or go; the buffer keeps its values. */
    memset(v, 0xff, 64 * sizeof(int32_t));
    free(v);
    int32_t *got = to_host(a.buffer, NULL, NULL);
    for (int i = 0; i < 64; i++) assert_int_equal(got[i], i * (s + 1));
    free(got);
    buffer_destroy(a.buffer);
  }
  int32_t v[64] = {0};
  PJRT_Client_BufferFromHostBuffer_Args a;
  init_bfhb(&a, g_client, g_dev[0], v, PJRT_Buffer_Type_S32, dims, 1);
  a.host_buffer_semantics = (PJRT_HostBufferSemantics)42;
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_BufferFromHostBuffer(&a),
                    PJRT_Error_Code_INVALID_ARGUMENT, "semantics");
}

/* ---- targets: devices, memories ---------------------------------------------------------- */

static void test_targets_and_copies(void **state) {
  (void)state;
  float v[4] = {1, 2, 3, 4};
  const int64_t dims[1] = {4};
  /* To a memory. */
  PJRT_Client_BufferFromHostBuffer_Args a;
  init_bfhb(&a, g_client, NULL, v, PJRT_Buffer_Type_F32, dims, 1);
  a.memory = memory_of(g_dev[1], 1);
  PJRT_CHECK(api, api->PJRT_Client_BufferFromHostBuffer(&a));
  await_destroy(a.done_with_host_buffer);
  PJRT_Buffer_Memory_Args bm = {.struct_size = PJRT_Buffer_Memory_Args_STRUCT_SIZE,
                                .buffer = a.buffer};
  PJRT_CHECK(api, api->PJRT_Buffer_Memory(&bm));
  assert_ptr_equal(bm.memory, memory_of(g_dev[1], 1));
  PJRT_Buffer_Device_Args bd = {.struct_size = PJRT_Buffer_Device_Args_STRUCT_SIZE,
                                .buffer = a.buffer};
  PJRT_CHECK(api, api->PJRT_Buffer_Device(&bd));
  assert_ptr_equal(bd.device, g_dev[1]);
  PJRT_Buffer *pinned = a.buffer;
  /* A device and a memory that disagree. */
  init_bfhb(&a, g_client, g_dev[0], v, PJRT_Buffer_Type_F32, dims, 1);
  a.memory = memory_of(g_dev[1], 0);
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_BufferFromHostBuffer(&a),
                    PJRT_Error_Code_INVALID_ARGUMENT, "does not belong");
  /* Another client's device and memory. */
  PJRT_Client *other = make_client("cpu", 1);
  PJRT_Device *od[1];
  devices_of(other, od, 1);
  init_bfhb(&a, g_client, od[0], v, PJRT_Buffer_Type_F32, dims, 1);
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_BufferFromHostBuffer(&a),
                    PJRT_Error_Code_INVALID_ARGUMENT, "device");
  init_bfhb(&a, g_client, NULL, v, PJRT_Buffer_Type_F32, dims, 1);
  a.memory = memory_of(od[0], 0);
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_BufferFromHostBuffer(&a),
                    PJRT_Error_Code_INVALID_ARGUMENT, "memory");
  pjrt_test_client_destroy(api, other);

  /* CopyToDevice between the two host devices, and back through a memory. */
  PJRT_Buffer *b0 = from_host(g_client, g_dev[0], v, PJRT_Buffer_Type_F32, dims, 1);
  PJRT_Buffer_CopyToDevice_Args cd = {.struct_size = PJRT_Buffer_CopyToDevice_Args_STRUCT_SIZE,
                                      .buffer = b0,
                                      .dst_device = g_dev[1]};
  PJRT_CHECK(api, api->PJRT_Buffer_CopyToDevice(&cd));
  bd.buffer = cd.dst_buffer;
  PJRT_CHECK(api, api->PJRT_Buffer_Device(&bd));
  assert_ptr_equal(bd.device, g_dev[1]);
  float *got = to_host(cd.dst_buffer, NULL, NULL);
  assert_memory_equal(got, v, sizeof(v));
  free(got);
  PJRT_Buffer_CopyToMemory_Args cm = {.struct_size = PJRT_Buffer_CopyToMemory_Args_STRUCT_SIZE,
                                      .buffer = pinned,
                                      .dst_memory = memory_of(g_dev[0], 0)};
  PJRT_CHECK(api, api->PJRT_Buffer_CopyToMemory(&cm));
  got = to_host(cm.dst_buffer, NULL, NULL);
  assert_memory_equal(got, v, sizeof(v));
  free(got);
  PJRT_Buffer_IsOnCpu_Args oc = {.struct_size = PJRT_Buffer_IsOnCpu_Args_STRUCT_SIZE,
                                 .buffer = cm.dst_buffer};
  PJRT_CHECK(api, api->PJRT_Buffer_IsOnCpu(&oc));
  assert_true(oc.is_on_cpu);
  /* Errors (they clear dst_buffer). */
  PJRT_Buffer *copied = cd.dst_buffer, *moved = cm.dst_buffer;
  cd.dst_device = NULL;
  PJRT_EXPECT_ERROR(api, api->PJRT_Buffer_CopyToDevice(&cd), PJRT_Error_Code_INVALID_ARGUMENT,
                    "dst_device");
  cd.dst_device = g_dev[0]; /* b0's own device: the header makes it an error */
  PJRT_EXPECT_ERROR(api, api->PJRT_Buffer_CopyToDevice(&cd), PJRT_Error_Code_INVALID_ARGUMENT,
                    "already on");
  cm.dst_memory = NULL;
  PJRT_EXPECT_ERROR(api, api->PJRT_Buffer_CopyToMemory(&cm), PJRT_Error_Code_INVALID_ARGUMENT,
                    "dst_memory");
  assert_null(cd.dst_buffer);
  assert_null(cm.dst_buffer);
  buffer_destroy(moved);
  buffer_destroy(copied);
  buffer_destroy(b0);
  buffer_destroy(pinned);
}

/* ---- deletion ---------------------------------------------------------------------------- */

static void test_delete_and_deleted_errors(void **state) {
  (void)state;
  int64_t v[3] = {7, 8, 9};
  const int64_t dims[1] = {3};
  PJRT_Buffer *b = from_host(g_client, g_dev[0], v, PJRT_Buffer_Type_S64, dims, 1);
  PJRT_Buffer_IsDeleted_Args id = {.struct_size = PJRT_Buffer_IsDeleted_Args_STRUCT_SIZE,
                                   .buffer = b};
  PJRT_CHECK(api, api->PJRT_Buffer_IsDeleted(&id));
  assert_false(id.is_deleted);
  PJRT_Buffer_ReadyEvent_Args re = {.struct_size = PJRT_Buffer_ReadyEvent_Args_STRUCT_SIZE,
                                    .buffer = b};
  PJRT_CHECK(api, api->PJRT_Buffer_ReadyEvent(&re));
  await_destroy(re.event);
  PJRT_Buffer_Delete_Args del = {.struct_size = PJRT_Buffer_Delete_Args_STRUCT_SIZE, .buffer = b};
  PJRT_CHECK(api, api->PJRT_Buffer_Delete(&del));
  PJRT_CHECK(api, api->PJRT_Buffer_Delete(&del)); /* twice is fine */
  PJRT_CHECK(api, api->PJRT_Buffer_IsDeleted(&id));
  assert_true(id.is_deleted);
  int64_t out[3];
  PJRT_Buffer_ToHostBuffer_Args th = {.struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE,
                                      .src = b,
                                      .dst = out,
                                      .dst_size = sizeof(out)};
  PJRT_EXPECT_ERROR(api, api->PJRT_Buffer_ToHostBuffer(&th), PJRT_Error_Code_FAILED_PRECONDITION,
                    "deleted");
  PJRT_Buffer_OnDeviceSizeInBytes_Args os = {
      .struct_size = PJRT_Buffer_OnDeviceSizeInBytes_Args_STRUCT_SIZE, .buffer = b};
  PJRT_EXPECT_ERROR(api, api->PJRT_Buffer_OnDeviceSizeInBytes(&os),
                    PJRT_Error_Code_FAILED_PRECONDITION, "deleted");
  PJRT_Buffer_UnsafePointer_Args up = {.struct_size = PJRT_Buffer_UnsafePointer_Args_STRUCT_SIZE,
                                       .buffer = b};
  PJRT_EXPECT_ERROR(api, api->PJRT_Buffer_UnsafePointer(&up), PJRT_Error_Code_FAILED_PRECONDITION,
                    "deleted");
  PJRT_Buffer_CopyToDevice_Args cd = {.struct_size = PJRT_Buffer_CopyToDevice_Args_STRUCT_SIZE,
                                      .buffer = b,
                                      .dst_device = g_dev[1]};
  PJRT_EXPECT_ERROR(api, api->PJRT_Buffer_CopyToDevice(&cd), PJRT_Error_Code_FAILED_PRECONDITION,
                    "deleted");
  PJRT_Buffer_IncreaseExternalReferenceCount_Args inc = {
      .struct_size = PJRT_Buffer_IncreaseExternalReferenceCount_Args_STRUCT_SIZE, .buffer = b};
  PJRT_EXPECT_ERROR(api, api->PJRT_Buffer_IncreaseExternalReferenceCount(&inc),
                    PJRT_Error_Code_FAILED_PRECONDITION, "deleted");
  re.buffer = b;
  PJRT_CHECK(api, api->PJRT_Buffer_ReadyEvent(&re));
  PJRT_Event_Await_Args aw = {.struct_size = PJRT_Event_Await_Args_STRUCT_SIZE, .event = re.event};
  PJRT_EXPECT_ERROR(api, api->PJRT_Event_Await(&aw), PJRT_Error_Code_FAILED_PRECONDITION,
                    "deleted");
  PJRT_Event_Destroy_Args ed = {.struct_size = PJRT_Event_Destroy_Args_STRUCT_SIZE,
                                .event = re.event};
  PJRT_CHECK(api, api->PJRT_Event_Destroy(&ed));
  /* Queries that need no memory still answer. */
  PJRT_Buffer_Dimensions_Args dd = {.struct_size = PJRT_Buffer_Dimensions_Args_STRUCT_SIZE,
                                    .buffer = b};
  PJRT_CHECK(api, api->PJRT_Buffer_Dimensions(&dd));
  assert_int_equal(dd.num_dims, 1);
  buffer_destroy(b);
  PJRT_Buffer_Destroy_Args dn = {.struct_size = PJRT_Buffer_Destroy_Args_STRUCT_SIZE};
  PJRT_CHECK(api, api->PJRT_Buffer_Destroy(&dn)); /* NULL is fine */
}

/* ---- external references, pointers, views, uninitialized ---------------------------------- */

static int64_t bytes_in_use(PJRT_Device *d, int64_t *peak, int64_t *allocs) {
  PJRT_Device_MemoryStats_Args a = {.struct_size = PJRT_Device_MemoryStats_Args_STRUCT_SIZE,
                                    .device = d};
  PJRT_CHECK(api, api->PJRT_Device_MemoryStats(&a));
  assert_true(a.peak_bytes_in_use_is_set);
  assert_true(a.num_allocs_is_set);
  if (peak) *peak = a.peak_bytes_in_use;
  if (allocs) *allocs = a.num_allocs;
  return a.bytes_in_use;
}

static void test_external_references(void **state) {
  (void)state;
  int32_t v[256];
  for (int i = 0; i < 256; i++) v[i] = i;
  const int64_t dims[1] = {256};
  int64_t before = bytes_in_use(g_dev[0], NULL, NULL);
  PJRT_Buffer *b = from_host(g_client, g_dev[0], v, PJRT_Buffer_Type_S32, dims, 1);
  PJRT_Buffer_IncreaseExternalReferenceCount_Args inc = {
      .struct_size = PJRT_Buffer_IncreaseExternalReferenceCount_Args_STRUCT_SIZE, .buffer = b};
  PJRT_CHECK(api, api->PJRT_Buffer_IncreaseExternalReferenceCount(&inc));
  PJRT_CHECK(api, api->PJRT_Buffer_IncreaseExternalReferenceCount(&inc));
  PJRT_Buffer_UnsafePointer_Args up = {.struct_size = PJRT_Buffer_UnsafePointer_Args_STRUCT_SIZE,
                                       .buffer = b};
  PJRT_CHECK(api, api->PJRT_Buffer_UnsafePointer(&up));
  PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args op = {
      .struct_size = PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args_STRUCT_SIZE, .buffer = b};
  PJRT_CHECK(api, api->PJRT_Buffer_OpaqueDeviceMemoryDataPointer(&op));
  assert_ptr_equal((void *)up.buffer_pointer, op.device_memory_ptr);
  const int32_t *p = op.device_memory_ptr; /* host platform: a host address */
  assert_int_equal(p[255], 255);
  /* Delete: the memory stays while an external reference is held. */
  PJRT_Buffer_Delete_Args del = {.struct_size = PJRT_Buffer_Delete_Args_STRUCT_SIZE, .buffer = b};
  PJRT_CHECK(api, api->PJRT_Buffer_Delete(&del));
  assert_int_equal(p[100], 100);
  assert_int_equal(bytes_in_use(g_dev[0], NULL, NULL), before + 1024);
  PJRT_Buffer_DecreaseExternalReferenceCount_Args dec = {
      .struct_size = PJRT_Buffer_DecreaseExternalReferenceCount_Args_STRUCT_SIZE, .buffer = b};
  PJRT_CHECK(api, api->PJRT_Buffer_DecreaseExternalReferenceCount(&dec));
  assert_int_equal(p[7], 7);
  PJRT_CHECK(api, api->PJRT_Buffer_DecreaseExternalReferenceCount(&dec));
  assert_int_equal(bytes_in_use(g_dev[0], NULL, NULL), before);
  PJRT_EXPECT_ERROR(api, api->PJRT_Buffer_DecreaseExternalReferenceCount(&dec),
                    PJRT_Error_Code_FAILED_PRECONDITION, "external");
  buffer_destroy(b);
}

typedef struct view_state {
  int calls;
  void *ptr;
} view_state_t;

static void on_view_delete(void *ptr, void *arg) {
  view_state_t *s = arg;
  s->calls++;
  s->ptr = ptr;
}

static void test_views_and_uninitialized(void **state) {
  (void)state;
  float mem[6] = {1, 2, 3, 4, 5, 6};
  const int64_t dims[2] = {2, 3};
  view_state_t vs = {0, NULL};
  PJRT_Client_CreateViewOfDeviceBuffer_Args va;
  memset(&va, 0, sizeof(va));
  va.struct_size = PJRT_Client_CreateViewOfDeviceBuffer_Args_STRUCT_SIZE;
  va.client = g_client;
  va.device_buffer_ptr = mem;
  va.dims = dims;
  va.num_dims = 2;
  va.element_type = PJRT_Buffer_Type_F32;
  va.device = g_dev[0];
  va.on_delete_callback = on_view_delete;
  va.on_delete_callback_arg = &vs;
  PJRT_CHECK(api, api->PJRT_Client_CreateViewOfDeviceBuffer(&va));
  float *got = to_host(va.buffer, NULL, NULL);
  assert_memory_equal(got, mem, sizeof(mem));
  free(got);
  assert_int_equal(vs.calls, 0);
  buffer_destroy(va.buffer);
  assert_int_equal(vs.calls, 1);
  assert_ptr_equal(vs.ptr, mem);
  va.device_buffer_ptr = NULL;
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_CreateViewOfDeviceBuffer(&va),
                    PJRT_Error_Code_INVALID_ARGUMENT, "device_buffer_ptr");

  PJRT_Client_CreateUninitializedBuffer_Args ua;
  memset(&ua, 0, sizeof(ua));
  ua.struct_size = PJRT_Client_CreateUninitializedBuffer_Args_STRUCT_SIZE;
  ua.client = g_client;
  ua.shape_dims = dims;
  ua.shape_num_dims = 2;
  ua.shape_element_type = PJRT_Buffer_Type_BF16;
  ua.device = g_dev[1];
  PJRT_CHECK(api, api->PJRT_Client_CreateUninitializedBuffer(&ua));
  assert_int_equal(on_device_size(ua.buffer), 12);
  buffer_destroy(ua.buffer);
  ua.shape_element_type = PJRT_Buffer_Type_INVALID;
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_CreateUninitializedBuffer(&ua),
                    PJRT_Error_Code_INVALID_ARGUMENT, "element type");
  ua.shape_element_type = PJRT_Buffer_Type_F32;
  ua.client = NULL;
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_CreateUninitializedBuffer(&ua),
                    PJRT_Error_Code_INVALID_ARGUMENT, "client");
}

/* ---- memory statistics ------------------------------------------------------------------- */

static void test_memory_stats(void **state) {
  (void)state;
  PJRT_Client *c = make_client("cpu", 1);
  PJRT_Device *d[1];
  devices_of(c, d, 1);
  int64_t peak0, allocs0;
  int64_t base = bytes_in_use(d[0], &peak0, &allocs0);
  assert_int_equal(base, 0);
  static float v[1000];
  const int64_t d1[1] = {1000}, d2[1] = {500};
  PJRT_Buffer *a = from_host(c, d[0], v, PJRT_Buffer_Type_F32, d1, 1);
  int64_t peak, allocs;
  assert_int_equal(bytes_in_use(d[0], &peak, &allocs), 4000);
  assert_int_equal(allocs, allocs0 + 1);
  PJRT_Buffer *b = from_host(c, d[0], v, PJRT_Buffer_Type_F32, d2, 1);
  assert_int_equal(bytes_in_use(d[0], &peak, &allocs), 6000);
  assert_int_equal(peak, 6000);
  assert_int_equal(allocs, allocs0 + 2);
  buffer_destroy(a);
  assert_int_equal(bytes_in_use(d[0], &peak, NULL), 2000);
  assert_int_equal(peak, 6000); /* the peak stays */
  /* pinned_host memory is not device memory. */
  PJRT_Client_BufferFromHostBuffer_Args h;
  init_bfhb(&h, c, NULL, v, PJRT_Buffer_Type_F32, d2, 1);
  h.memory = memory_of(d[0], 1);
  PJRT_CHECK(api, api->PJRT_Client_BufferFromHostBuffer(&h));
  await_destroy(h.done_with_host_buffer);
  assert_int_equal(bytes_in_use(d[0], NULL, NULL), 2000);
  buffer_destroy(h.buffer);
  PJRT_Device_ClearMemoryStats_Args cl = {
      .struct_size = PJRT_Device_ClearMemoryStats_Args_STRUCT_SIZE, .device = d[0]};
  PJRT_CHECK(api, api->PJRT_Device_ClearMemoryStats(&cl));
  bytes_in_use(d[0], &peak, NULL);
  assert_int_equal(peak, 2000);
  buffer_destroy(b);
  assert_int_equal(bytes_in_use(d[0], NULL, NULL), 0);
  pjrt_test_client_destroy(api, c);
}

/* A buffer that outlives its client (the caller's error): destroying it later touches no
 * freed memory (ASan checks). */
static void test_buffer_outlives_client(void **state) {
  (void)state;
  PJRT_Client *c = make_client("cpu", 1);
  PJRT_Device *d[1];
  devices_of(c, d, 1);
  float v[3] = {1, 2, 3};
  const int64_t dims[1] = {3};
  PJRT_Buffer *b = from_host(c, d[0], v, PJRT_Buffer_Type_F32, dims, 1);
  pjrt_test_client_destroy(api, c);
  float *got = to_host(b, NULL, NULL);
  assert_memory_equal(got, v, sizeof(v));
  free(got);
  buffer_destroy(b);
}

/* ---- argument errors --------------------------------------------------------------------- */

static void test_argument_errors(void **state) {
  (void)state;
  float v[4] = {0};
  const int64_t dims[1] = {4};
  PJRT_Client_BufferFromHostBuffer_Args a;
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_BufferFromHostBuffer(NULL),
                    PJRT_Error_Code_INVALID_ARGUMENT, "PJRT_Client_BufferFromHostBuffer");
  init_bfhb(&a, g_client, g_dev[0], v, PJRT_Buffer_Type_F32, dims, 1);
  a.struct_size = offsetof(PJRT_Client_BufferFromHostBuffer_Args, done_with_host_buffer);
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_BufferFromHostBuffer(&a),
                    PJRT_Error_Code_INVALID_ARGUMENT, "struct_size");
  init_bfhb(&a, NULL, g_dev[0], v, PJRT_Buffer_Type_F32, dims, 1);
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_BufferFromHostBuffer(&a),
                    PJRT_Error_Code_INVALID_ARGUMENT, "client");
  init_bfhb(&a, g_client, g_dev[0], NULL, PJRT_Buffer_Type_F32, dims, 1);
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_BufferFromHostBuffer(&a),
                    PJRT_Error_Code_INVALID_ARGUMENT, "data");
  const int64_t neg[1] = {-4};
  init_bfhb(&a, g_client, g_dev[0], v, PJRT_Buffer_Type_F32, neg, 1);
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_BufferFromHostBuffer(&a),
                    PJRT_Error_Code_INVALID_ARGUMENT, "negative");
  init_bfhb(&a, g_client, g_dev[0], v, PJRT_Buffer_Type_INVALID, dims, 1);
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_BufferFromHostBuffer(&a),
                    PJRT_Error_Code_INVALID_ARGUMENT, "element type");
  init_bfhb(&a, g_client, g_dev[0], v, PJRT_Buffer_Type_TOKEN, dims, 1);
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_BufferFromHostBuffer(&a),
                    PJRT_Error_Code_INVALID_ARGUMENT, ANY);
  init_bfhb(&a, g_client, g_dev[0], v, PJRT_Buffer_Type_F32, NULL, 1);
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_BufferFromHostBuffer(&a),
                    PJRT_Error_Code_INVALID_ARGUMENT, "dims");

  /* Every buffer entry with a NULL buffer names it. */
#define NULL_BUFFER(name, member)                                                                  \
  do {                                                                                             \
    PJRT_##name##_Args x;                                                                          \
    memset(&x, 0, sizeof(x));                                                                      \
    x.struct_size = PJRT_##name##_Args_STRUCT_SIZE;                                                \
    PJRT_EXPECT_ERROR(api, api->PJRT_##name(&x), PJRT_Error_Code_INVALID_ARGUMENT, member);        \
    PJRT_EXPECT_ERROR(api, api->PJRT_##name(NULL), PJRT_Error_Code_INVALID_ARGUMENT, ANY);         \
    x.struct_size = 16;                                                                            \
    PJRT_EXPECT_ERROR(api, api->PJRT_##name(&x), PJRT_Error_Code_INVALID_ARGUMENT, "struct_size"); \
  } while (0)
  NULL_BUFFER(Buffer_ElementType, "buffer");
  NULL_BUFFER(Buffer_Dimensions, "buffer");
  NULL_BUFFER(Buffer_UnpaddedDimensions, "buffer");
  NULL_BUFFER(Buffer_DynamicDimensionIndices, "buffer");
  NULL_BUFFER(Buffer_GetMemoryLayout, "buffer");
  NULL_BUFFER(Buffer_OnDeviceSizeInBytes, "buffer");
  NULL_BUFFER(Buffer_Device, "buffer");
  NULL_BUFFER(Buffer_Memory, "buffer");
  NULL_BUFFER(Buffer_Delete, "buffer");
  NULL_BUFFER(Buffer_IsDeleted, "buffer");
  NULL_BUFFER(Buffer_ToHostBuffer, "src");
  NULL_BUFFER(Buffer_CopyRawToHost, "buffer");
  NULL_BUFFER(Buffer_CopyToDevice, "buffer");
  NULL_BUFFER(Buffer_CopyToMemory, "buffer");
  NULL_BUFFER(Buffer_IsOnCpu, "buffer");
  NULL_BUFFER(Buffer_ReadyEvent, "buffer");
  NULL_BUFFER(Buffer_UnsafePointer, "buffer");
  NULL_BUFFER(Buffer_OpaqueDeviceMemoryDataPointer, "buffer");
  NULL_BUFFER(Buffer_IncreaseExternalReferenceCount, "buffer");
  NULL_BUFFER(Buffer_DecreaseExternalReferenceCount, "buffer");
#undef NULL_BUFFER
}

/* Client_CreateErrorBuffer: shape queries answer, the ready event and every read fail with
 * the buffer's error. */
static void test_error_buffer(void **state) {
  (void)state;
  int64_t dims[2] = {2, 3};
  const char *msg = "upstream failed";
  PJRT_Client_CreateErrorBuffer_Args a = {
      .struct_size = PJRT_Client_CreateErrorBuffer_Args_STRUCT_SIZE,
      .client = g_client,
      .error_code = PJRT_Error_Code_ABORTED,
      .error_message = msg,
      .error_message_size = strlen(msg),
      .shape_dims = dims,
      .shape_num_dims = 2,
      .shape_element_type = PJRT_Buffer_Type_F32};
  PJRT_CHECK(api, api->PJRT_Client_CreateErrorBuffer(&a));
  PJRT_Buffer *b = a.buffer;
  assert_non_null(b);
  PJRT_Buffer_Dimensions_Args d = {.struct_size = PJRT_Buffer_Dimensions_Args_STRUCT_SIZE,
                                   .buffer = b};
  PJRT_CHECK(api, api->PJRT_Buffer_Dimensions(&d));
  assert_int_equal(d.num_dims, 2);
  assert_int_equal(d.dims[1], 3);
  PJRT_Buffer_ReadyEvent_Args re = {.struct_size = PJRT_Buffer_ReadyEvent_Args_STRUCT_SIZE,
                                    .buffer = b};
  PJRT_CHECK(api, api->PJRT_Buffer_ReadyEvent(&re));
  PJRT_Event_Await_Args aw = {.struct_size = PJRT_Event_Await_Args_STRUCT_SIZE, .event = re.event};
  PJRT_EXPECT_ERROR(api, api->PJRT_Event_Await(&aw), PJRT_Error_Code_ABORTED, "upstream failed");
  PJRT_Event_Destroy_Args ed = {.struct_size = PJRT_Event_Destroy_Args_STRUCT_SIZE,
                                .event = re.event};
  PJRT_CHECK(api, api->PJRT_Event_Destroy(&ed));
  float out[6];
  PJRT_Buffer_ToHostBuffer_Args th = {.struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE,
                                      .src = b,
                                      .dst = out,
                                      .dst_size = sizeof out};
  PJRT_EXPECT_ERROR(api, api->PJRT_Buffer_ToHostBuffer(&th), PJRT_Error_Code_ABORTED,
                    "upstream failed");
  a.error_code = PJRT_Error_Code_OK;
  a.buffer = NULL;
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_CreateErrorBuffer(&a), PJRT_Error_Code_INVALID_ARGUMENT,
                    "not an error");
  buffer_destroy(b);
}

typedef struct raw_future_call {
  PJRT_Buffer_CopyRawToHostFuture_Args a;
  PJRT_Event_IsReady_Args ready;
} raw_future_call_t;

static void raw_future_start(raw_future_call_t *c, PJRT_Buffer *b, int64_t offset, int64_t size) {
  memset(c, 0, sizeof *c);
  c->a.struct_size = PJRT_Buffer_CopyRawToHostFuture_Args_STRUCT_SIZE;
  c->a.buffer = b;
  c->a.offset = offset;
  c->a.transfer_size = size;
  PJRT_CHECK(api, api->PJRT_Buffer_CopyRawToHostFuture(&c->a));
  assert_non_null(c->a.event);
  assert_non_null(c->a.future_ready_callback);
  c->ready.struct_size = PJRT_Event_IsReady_Args_STRUCT_SIZE;
  c->ready.event = c->a.event;
  PJRT_CHECK(api, api->PJRT_Event_IsReady(&c->ready));
  assert_false(c->ready.is_ready); /* nothing moves before the destination is named */
}

/* Buffer_CopyRawToHostFuture: the copy happens when the caller's callback names dst (the
 * buffer may be destroyed in between); an error given instead fails the event. */
static void test_copy_raw_to_host_future(void **state) {
  (void)state;
  float v[4] = {1.5f, -2, 3, 8};
  int64_t dims[1] = {4};
  PJRT_Buffer *b = from_host(g_client, g_dev[0], v, PJRT_Buffer_Type_F32, dims, 1);
  raw_future_call_t c;
  raw_future_start(&c, b, 4, 8);
  buffer_destroy(b);
  float got[2] = {0, 0};
  PJRT_Buffer_CopyRawToHostFuture_Callback_Args cb = {
      .struct_size = PJRT_Buffer_CopyRawToHostFuture_Callback_Args_STRUCT_SIZE,
      .callback_data = c.a.callback_data,
      .error_code = PJRT_Error_Code_OK,
      .dst = got};
  c.a.future_ready_callback(&cb);
  await_destroy(c.a.event);
  assert_true(got[0] == v[1] && got[1] == v[2]);

  b = from_host(g_client, g_dev[0], v, PJRT_Buffer_Type_F32, dims, 1);
  raw_future_start(&c, b, 0, 16);
  const char *why = "no room";
  cb.callback_data = c.a.callback_data;
  cb.error_code = PJRT_Error_Code_RESOURCE_EXHAUSTED;
  cb.error_message = why;
  cb.error_message_size = strlen(why);
  cb.dst = NULL;
  c.a.future_ready_callback(&cb);
  PJRT_Event_Await_Args aw = {.struct_size = PJRT_Event_Await_Args_STRUCT_SIZE, .event = c.a.event};
  PJRT_EXPECT_ERROR(api, api->PJRT_Event_Await(&aw), PJRT_Error_Code_RESOURCE_EXHAUSTED, "no room");
  PJRT_Event_Destroy_Args ed = {.struct_size = PJRT_Event_Destroy_Args_STRUCT_SIZE,
                                .event = c.a.event};
  PJRT_CHECK(api, api->PJRT_Event_Destroy(&ed));
  c.a.offset = 12;
  c.a.transfer_size = 8;
  PJRT_EXPECT_ERROR(api, api->PJRT_Buffer_CopyRawToHostFuture(&c.a),
                    PJRT_Error_Code_INVALID_ARGUMENT, "outside");
  buffer_destroy(b);
}

typedef struct h2d_reader {
  PJRT_Buffer *b;
  float got[4];
} h2d_reader_t;

static void *h2d_read(void *p) {
  h2d_reader_t *r = p;
  size_t n;
  float *v = to_host(r->b, NULL, &n); /* waits for the last transfer */
  memcpy(r->got, v, sizeof r->got);
  free(v);
  return NULL;
}

static bool event_ready(PJRT_Event *e) {
  PJRT_Event_IsReady_Args a = {.struct_size = PJRT_Event_IsReady_Args_STRUCT_SIZE, .event = e};
  PJRT_CHECK(api, api->PJRT_Event_IsReady(&a));
  return a.is_ready;
}

/* Client_CreateBuffersForAsyncHostToDevice and the transfer manager (what jax.device_put
 * uses): buffers handed out first, filled by chunks; a reader waits for the last chunk; a
 * buffer given an error reads as that error. */
static void test_async_host_to_device_transfers(void **state) {
  (void)state;
  int64_t d0[1] = {4}, d1[2] = {2, 3};
  PJRT_ShapeSpec specs[2] = {{.struct_size = PJRT_ShapeSpec_STRUCT_SIZE,
                              .dims = d0,
                              .num_dims = 1,
                              .element_type = PJRT_Buffer_Type_F32},
                             {.struct_size = PJRT_ShapeSpec_STRUCT_SIZE,
                              .dims = d1,
                              .num_dims = 2,
                              .element_type = PJRT_Buffer_Type_S32}};
  PJRT_Client_CreateBuffersForAsyncHostToDevice_Args ca = {
      .struct_size = PJRT_Client_CreateBuffersForAsyncHostToDevice_Args_STRUCT_SIZE,
      .client = g_client,
      .shape_specs = specs,
      .num_shape_specs = 2};
  PJRT_CHECK(api, api->PJRT_Client_CreateBuffersForAsyncHostToDevice(&ca));
  PJRT_AsyncHostToDeviceTransferManager *m = ca.transfer_manager;
  assert_non_null(m);
  PJRT_AsyncHostToDeviceTransferManager_BufferCount_Args bc = {
      .struct_size = PJRT_AsyncHostToDeviceTransferManager_BufferCount_Args_STRUCT_SIZE,
      .transfer_manager = m};
  PJRT_CHECK(api, api->PJRT_AsyncHostToDeviceTransferManager_BufferCount(&bc));
  assert_int_equal(bc.buffer_count, 2);
  PJRT_AsyncHostToDeviceTransferManager_BufferSize_Args bs = {
      .struct_size = PJRT_AsyncHostToDeviceTransferManager_BufferSize_Args_STRUCT_SIZE,
      .transfer_manager = m,
      .buffer_index = 1};
  PJRT_CHECK(api, api->PJRT_AsyncHostToDeviceTransferManager_BufferSize(&bs));
  assert_int_equal(bs.buffer_size, 24);
  PJRT_AsyncHostToDeviceTransferManager_Device_Args dv = {
      .struct_size = PJRT_AsyncHostToDeviceTransferManager_Device_Args_STRUCT_SIZE,
      .transfer_manager = m};
  PJRT_CHECK(api, api->PJRT_AsyncHostToDeviceTransferManager_Device(&dv));
  assert_ptr_equal(dv.device_out, g_dev[0]);
  PJRT_Buffer *b[2];
  for (int i = 0; i < 2; i++) {
    PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer_Args rb = {
        .struct_size = PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer_Args_STRUCT_SIZE,
        .transfer_manager = m,
        .buffer_index = i};
    PJRT_CHECK(api, api->PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer(&rb));
    b[i] = rb.buffer_out;
    assert_non_null(b[i]);
    PJRT_EXPECT_ERROR(api, api->PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer(&rb),
                      PJRT_Error_Code_FAILED_PRECONDITION, "already retrieved");
  }
  PJRT_Buffer_ReadyEvent_Args re = {.struct_size = PJRT_Buffer_ReadyEvent_Args_STRUCT_SIZE,
                                    .buffer = b[0]};
  PJRT_CHECK(api, api->PJRT_Buffer_ReadyEvent(&re));
  assert_false(event_ready(re.event));
  h2d_reader_t reader = {.b = b[0]};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, h2d_read, &reader), 0);
  float v[4] = {1.5f, -2, 3.25f, 9};
  PJRT_AsyncHostToDeviceTransferManager_TransferData_Args td = {
      .struct_size = PJRT_AsyncHostToDeviceTransferManager_TransferData_Args_STRUCT_SIZE,
      .transfer_manager = m,
      .buffer_index = 0,
      .data = v,
      .offset = 0,
      .transfer_size = 8};
  PJRT_CHECK(api, api->PJRT_AsyncHostToDeviceTransferManager_TransferData(&td));
  await_destroy(td.done_with_h2d_transfer);
  assert_false(event_ready(re.event)); /* not the last chunk yet */
  td.data = v + 2;
  td.offset = 8;
  td.is_last_transfer = true;
  PJRT_CHECK(api, api->PJRT_AsyncHostToDeviceTransferManager_TransferData(&td));
  await_destroy(td.done_with_h2d_transfer);
  await_destroy(re.event);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_memory_equal(reader.got, v, sizeof v);
  PJRT_EXPECT_ERROR(api, api->PJRT_AsyncHostToDeviceTransferManager_TransferData(&td),
                    PJRT_Error_Code_FAILED_PRECONDITION, "already completed");
  td.buffer_index = 2;
  PJRT_EXPECT_ERROR(api, api->PJRT_AsyncHostToDeviceTransferManager_TransferData(&td),
                    PJRT_Error_Code_INVALID_ARGUMENT, "buffer_index");
  PJRT_AsyncHostToDeviceTransferManager_SetBufferError_Args se = {
      .struct_size = PJRT_AsyncHostToDeviceTransferManager_SetBufferError_Args_STRUCT_SIZE,
      .transfer_manager = m,
      .buffer_index = 1,
      .error_code = PJRT_Error_Code_DATA_LOSS,
      .error_message = "disk gone",
      .error_message_size = 9};
  PJRT_CHECK(api, api->PJRT_AsyncHostToDeviceTransferManager_SetBufferError(&se));
  int32_t out[6];
  PJRT_Buffer_ToHostBuffer_Args th = {.struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE,
                                      .src = b[1],
                                      .dst = out,
                                      .dst_size = sizeof out};
  PJRT_EXPECT_ERROR(api, api->PJRT_Buffer_ToHostBuffer(&th), PJRT_Error_Code_DATA_LOSS,
                    "disk gone");
  PJRT_AsyncHostToDeviceTransferManager_Destroy_Args md = {
      .struct_size = PJRT_AsyncHostToDeviceTransferManager_Destroy_Args_STRUCT_SIZE,
      .transfer_manager = m};
  PJRT_CHECK(api, api->PJRT_AsyncHostToDeviceTransferManager_Destroy(&md));
  buffer_destroy(b[0]);
  buffer_destroy(b[1]);

  /* A manager destroyed before its buffers were filled or retrieved cancels them. */
  PJRT_CHECK(api, api->PJRT_Client_CreateBuffersForAsyncHostToDevice(&ca));
  PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer_Args rb = {
      .struct_size = PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer_Args_STRUCT_SIZE,
      .transfer_manager = ca.transfer_manager,
      .buffer_index = 0};
  PJRT_CHECK(api, api->PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer(&rb));
  md.transfer_manager = ca.transfer_manager;
  PJRT_CHECK(api, api->PJRT_AsyncHostToDeviceTransferManager_Destroy(&md));
  float f4[4];
  th.src = rb.buffer_out;
  th.dst = f4;
  th.dst_size = sizeof f4;
  PJRT_EXPECT_ERROR(api, api->PJRT_Buffer_ToHostBuffer(&th), PJRT_Error_Code_CANCELLED,
                    "destroyed before");
  buffer_destroy(rb.buffer_out);
}

static int setup(void **state) {
  (void)state;
  g_client = make_client("cpu", 2);
  devices_of(g_client, g_dev, 2);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  pjrt_test_client_destroy(api, g_client);
  return 0;
}

int main(void) {
  api = pjrt_test_load();
  if (!api) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_roundtrip_every_type),
      cmocka_unit_test(test_byte_strides_transposed),
      cmocka_unit_test(test_device_layout),
      cmocka_unit_test(test_host_buffer_semantics),
      cmocka_unit_test(test_targets_and_copies),
      cmocka_unit_test(test_delete_and_deleted_errors),
      cmocka_unit_test(test_external_references),
      cmocka_unit_test(test_views_and_uninitialized),
      cmocka_unit_test(test_memory_stats),
      cmocka_unit_test(test_buffer_outlives_client),
      cmocka_unit_test(test_argument_errors),
      cmocka_unit_test(test_roundtrip_cuda),
      cmocka_unit_test(test_error_buffer),
      cmocka_unit_test(test_copy_raw_to_host_future),
      cmocka_unit_test(test_async_host_to_device_transfers),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
