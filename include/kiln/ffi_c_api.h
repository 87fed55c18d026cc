/* kiln/ffi_c_api.h: the XLA FFI C API as kiln serves it to custom-call handlers (FFI 0.4).
 *
 * A handler is `XLA_FFI_Error* handler(XLA_FFI_CallFrame*)`. kiln builds a call frame per
 * custom call (arguments, results, attributes sorted by name, the execution stage) and
 * calls the handler; the handler calls back into kiln through `call_frame->api`, a table
 * of 19 functions (errors, registration, streams, types, state, device memory, thread
 * pool, futures, run id, device ordinal, extensions). Layout and numbering are those of
 * OpenXLA's FFI C API 0.4, so a handler library built against OpenXLA's headers (C, or
 * the C++ binding on top of them) runs under kiln unchanged; the test_abi_layout test
 * (tests/abi/) checks every size, offset and enum value against that header.
 *
 * Conventions:
 * - Argument structs start with `struct_size` and `extension_start`; kiln honours the
 *   smaller struct a handler built against FFI 0.1 ... 0.4 passes.
 * - Members marked `out` are written by the callee.
 * - Errors a handler returns are created with XLA_FFI_Error_Create and owned by kiln once
 *   returned; errors kiln returns to a handler are the handler's to destroy.
 * - FFI numbers its data types on its own (XLA_FFI_DataType): BF16 is 16 here, 13 in PJRT.
 *
 * Status: this header pins the ABI; the FFI runtime behind it is issue 17.
 */
#ifndef KILN_FFI_C_API_H_
#define KILN_FFI_C_API_H_

#include <stddef.h>
#include <stdint.h>

#include "kiln/abi_macros.h"

/* The FFI version kiln implements and reports in XLA_FFI_Api.api_version. */
#define XLA_FFI_API_MAJOR 0
#define XLA_FFI_API_MINOR 4

#ifdef __cplusplus
extern "C" {
#endif

/*------------------------------------ Forward declarations ------------------------------------*/

typedef struct XLA_FFI_Api XLA_FFI_Api;

typedef struct XLA_FFI_InternalApi XLA_FFI_InternalApi;

/*----------------------------------------- Extensions -----------------------------------------*/

/* Extensions chained from a call frame's or args struct's extension_start. The one kiln knows is
 * the metadata extension: a call frame carrying it asks a handler to describe itself instead of
 * running. */
typedef enum {
  XLA_FFI_Extension_Metadata = 1,
} XLA_FFI_InternalExtension_Type;

typedef struct XLA_FFI_InternalExtension {
  size_t struct_size;
  XLA_FFI_InternalExtension_Type type;
  struct XLA_FFI_InternalExtension* next;
} XLA_FFI_InternalExtension;
KILN_ABI_DEFINE_STRUCT_SIZE(XLA_FFI_InternalExtension, next);

/* Identifies an extension a handler looks up with XLA_FFI_InvokeContext_FindExtension. */
typedef struct XLA_FFI_ExtensionId {
  int64_t extension_type;
  int32_t major_version;
  int32_t minor_version;
} XLA_FFI_ExtensionId;
KILN_ABI_DEFINE_STRUCT_SIZE(XLA_FFI_ExtensionId, minor_version);

typedef struct XLA_FFI_Extension XLA_FFI_Extension;

struct XLA_FFI_Extension {
  size_t struct_size;
  XLA_FFI_ExtensionId id;
  const XLA_FFI_Extension* next;
};
KILN_ABI_DEFINE_STRUCT_SIZE(XLA_FFI_Extension, next);

/*------------------------------------------ Version -------------------------------------------*/

/* The FFI version: kiln reports XLA_FFI_API_MAJOR / XLA_FFI_API_MINOR; a handler reports the
 * version it was built against in its metadata. kiln accepts handlers built against 0.1 to 0.4. */
struct XLA_FFI_Api_Version {
  size_t struct_size;
  XLA_FFI_InternalExtension* extension_start;
  int major_version; /* out */
  int minor_version; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(XLA_FFI_Api_Version, minor_version);

/*------------------------------------------- Errors -------------------------------------------*/

/* A handler returns NULL for success, or an error made with XLA_FFI_Error_Create that kiln then
 * owns (it fails the execute with the message and the custom call's name). */
typedef struct XLA_FFI_Error XLA_FFI_Error;

/* Same codes as PJRT_Error_Code (absl's). */
typedef enum {
  XLA_FFI_Error_Code_OK = 0,
  XLA_FFI_Error_Code_CANCELLED = 1,
  XLA_FFI_Error_Code_UNKNOWN = 2,
  XLA_FFI_Error_Code_INVALID_ARGUMENT = 3,
  XLA_FFI_Error_Code_DEADLINE_EXCEEDED = 4,
  XLA_FFI_Error_Code_NOT_FOUND = 5,
  XLA_FFI_Error_Code_ALREADY_EXISTS = 6,
  XLA_FFI_Error_Code_PERMISSION_DENIED = 7,
  XLA_FFI_Error_Code_RESOURCE_EXHAUSTED = 8,
  XLA_FFI_Error_Code_FAILED_PRECONDITION = 9,
  XLA_FFI_Error_Code_ABORTED = 10,
  XLA_FFI_Error_Code_OUT_OF_RANGE = 11,
  XLA_FFI_Error_Code_UNIMPLEMENTED = 12,
  XLA_FFI_Error_Code_INTERNAL = 13,
  XLA_FFI_Error_Code_UNAVAILABLE = 14,
  XLA_FFI_Error_Code_DATA_LOSS = 15,
  XLA_FFI_Error_Code_UNAUTHENTICATED = 16,
} XLA_FFI_Error_Code;

/* A new error with a copy of `message` (NUL-terminated). */
struct XLA_FFI_Error_Create_Args {
  size_t struct_size;
  XLA_FFI_InternalExtension* extension_start;
  const char* message;
  XLA_FFI_Error_Code errc;
};
KILN_ABI_DEFINE_STRUCT_SIZE(XLA_FFI_Error_Create_Args, errc);

typedef XLA_FFI_Error* XLA_FFI_Error_Create(XLA_FFI_Error_Create_Args* args);

/* The error's code and message; the message lives as long as the error. */
struct XLA_FFI_Error_GetDetails_Args {
  size_t struct_size;
  XLA_FFI_InternalExtension* extension_start;
  XLA_FFI_Error* error;
  const char* message;     /* out */
  XLA_FFI_Error_Code errc; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(XLA_FFI_Error_GetDetails_Args, errc);

typedef void XLA_FFI_Error_GetDetails(XLA_FFI_Error_GetDetails_Args* args);

/* Frees an error the handler got from kiln and did not pass on. */
struct XLA_FFI_Error_Destroy_Args {
  size_t struct_size;
  XLA_FFI_InternalExtension* extension_start;
  XLA_FFI_Error* error;
};
KILN_ABI_DEFINE_STRUCT_SIZE(XLA_FFI_Error_Destroy_Args, error);

typedef void XLA_FFI_Error_Destroy(XLA_FFI_Error_Destroy_Args* args);

/*-------------------------------------------- Data --------------------------------------------*/

/* Element types in FFI's own numbering, which is not PJRT_Buffer_Type's (BF16 is 16 here, 13
 * there); kiln translates when it builds a call frame. */
typedef enum {
  XLA_FFI_DataType_INVALID = 0,
  XLA_FFI_DataType_PRED = 1,
  XLA_FFI_DataType_S1 = 30,
  XLA_FFI_DataType_S2 = 26,
  XLA_FFI_DataType_S4 = 21,
  XLA_FFI_DataType_S8 = 2,
  XLA_FFI_DataType_S16 = 3,
  XLA_FFI_DataType_S32 = 4,
  XLA_FFI_DataType_S64 = 5,
  XLA_FFI_DataType_U1 = 31,
  XLA_FFI_DataType_U2 = 27,
  XLA_FFI_DataType_U4 = 22,
  XLA_FFI_DataType_U8 = 6,
  XLA_FFI_DataType_U16 = 7,
  XLA_FFI_DataType_U32 = 8,
  XLA_FFI_DataType_U64 = 9,
  XLA_FFI_DataType_F16 = 10,
  XLA_FFI_DataType_F32 = 11,
  XLA_FFI_DataType_F64 = 12,
  XLA_FFI_DataType_BF16 = 16,
  XLA_FFI_DataType_C64 = 15,
  XLA_FFI_DataType_C128 = 18,
  XLA_FFI_DataType_TOKEN = 17,
  XLA_FFI_DataType_F8E5M2 = 19,
  XLA_FFI_DataType_F8E3M4 = 29,
  XLA_FFI_DataType_F8E4M3 = 28,
  XLA_FFI_DataType_F8E4M3FN = 20,
  XLA_FFI_DataType_F8E4M3B11FNUZ = 23,
  XLA_FFI_DataType_F8E5M2FNUZ = 24,
  XLA_FFI_DataType_F8E4M3FNUZ = 25,
  XLA_FFI_DataType_F4E2M1FN = 32,
  XLA_FFI_DataType_F8E8M0FNU = 33,
} XLA_FFI_DataType;

/* An argument or result array: element type, data address (device memory on CUDA) and
 * dimensions, all owned by kiln for the duration of the call. */
struct XLA_FFI_Buffer {
  size_t struct_size;
  XLA_FFI_InternalExtension* extension_start;
  XLA_FFI_DataType dtype;
  void* data;
  int64_t rank;
  int64_t* dims;
};
KILN_ABI_DEFINE_STRUCT_SIZE(XLA_FFI_Buffer, dims);

typedef enum {
  XLA_FFI_ArgType_BUFFER = 1,
} XLA_FFI_ArgType;

typedef enum {
  XLA_FFI_RetType_BUFFER = 1,
} XLA_FFI_RetType;

/* Kinds of attribute. Scalars and arrays carry their element type; strings are byte spans;
 * dictionaries are nested XLA_FFI_Attrs. */
typedef enum {
  XLA_FFI_AttrType_ARRAY = 1,
  XLA_FFI_AttrType_DICTIONARY = 2,
  XLA_FFI_AttrType_SCALAR = 3,
  XLA_FFI_AttrType_STRING = 4,
} XLA_FFI_AttrType;

/* kiln's per-call context: stream, device, state, user data. Valid during the call only. */
typedef struct XLA_FFI_InvokeContext XLA_FFI_InvokeContext;

typedef XLA_FFI_InvokeContext XLA_FFI_ExecutionContext;

/* A string that is not NUL-terminated. */
typedef struct XLA_FFI_ByteSpan {
  const char* ptr;
  size_t len;
} XLA_FFI_ByteSpan;

typedef struct XLA_FFI_Scalar {
  XLA_FFI_DataType dtype;
  void* value;
} XLA_FFI_Scalar;

typedef struct XLA_FFI_Array {
  XLA_FFI_DataType dtype;
  size_t size;
  void* data;
} XLA_FFI_Array;

/* A registered type's id; 0 means "not registered yet, please assign one". */
/* clang-format off */
#ifdef __cplusplus
#define XLA_FFI_UNKNOWN_TYPE_ID XLA_FFI_TypeId{0}
#else
#define XLA_FFI_UNKNOWN_TYPE_ID ((XLA_FFI_TypeId){0})
#endif
/* clang-format on */
typedef struct XLA_FFI_TypeId {
  int64_t type_id;
} XLA_FFI_TypeId;

/* How kiln frees objects of a registered type (state, user data). */
typedef struct XLA_FFI_TypeInfo {
  size_t struct_size;
  XLA_FFI_InternalExtension* extension_start;
  void (*deleter)(void* object);
} XLA_FFI_TypeInfo;
KILN_ABI_DEFINE_STRUCT_SIZE(XLA_FFI_TypeInfo, deleter);

/*------------------------------------------ Futures -------------------------------------------*/

/* An asynchronous handler creates a future, returns it in the call frame and completes it later,
 * from any thread; kiln waits for it before the custom call's results are used. */
typedef struct XLA_FFI_Future XLA_FFI_Future;

/* A new future the handler completes later. This struct's STRUCT_SIZE stops at extension_start,
 * as OpenXLA's does, so handlers pass a size that leaves out `future`; kiln writes `future` all
 * the same, or the call would be useless. */
struct XLA_FFI_Future_Create_Args {
  size_t struct_size;
  XLA_FFI_InternalExtension* extension_start;
  XLA_FFI_Future* future; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(XLA_FFI_Future_Create_Args, extension_start);

typedef XLA_FFI_Error* XLA_FFI_Future_Create(XLA_FFI_Future_Create_Args* args);

/* Completes the future successfully. */
struct XLA_FFI_Future_SetAvailable_Args {
  size_t struct_size;
  XLA_FFI_InternalExtension* extension_start;
  XLA_FFI_Future* future;
};
KILN_ABI_DEFINE_STRUCT_SIZE(XLA_FFI_Future_SetAvailable_Args, future);

typedef XLA_FFI_Error* XLA_FFI_Future_SetAvailable(XLA_FFI_Future_SetAvailable_Args* args);

/* Completes the future with an error; kiln takes ownership of the error. */
struct XLA_FFI_Future_SetError_Args {
  size_t struct_size;
  XLA_FFI_InternalExtension* extension_start;
  XLA_FFI_Future* future;
  XLA_FFI_Error* error;
};
KILN_ABI_DEFINE_STRUCT_SIZE(XLA_FFI_Future_SetError_Args, error);

typedef XLA_FFI_Error* XLA_FFI_Future_SetError(XLA_FFI_Future_SetError_Args* args);

/*---------------------------------------- Call frames -----------------------------------------*/

/* The stage a handler is called for: instantiate once when the executable is loaded, prepare /
 * initialize / execute on every run, record when kiln captures the call into a command buffer. */
typedef enum {
  XLA_FFI_ExecutionStage_INSTANTIATE = 0,
  XLA_FFI_ExecutionStage_PREPARE = 1,
  XLA_FFI_ExecutionStage_INITIALIZE = 2,
  XLA_FFI_ExecutionStage_EXECUTE = 3,
  XLA_FFI_ExecutionStage_RECORD = 4,
} XLA_FFI_ExecutionStage;

/* The arguments: `size` entries of `types` and `args` (each an XLA_FFI_Buffer*). */
struct XLA_FFI_Args {
  size_t struct_size;
  XLA_FFI_InternalExtension* extension_start;
  int64_t size;
  XLA_FFI_ArgType* types;
  void** args;
};
KILN_ABI_DEFINE_STRUCT_SIZE(XLA_FFI_Args, args);

/* The results, like the arguments. */
struct XLA_FFI_Rets {
  size_t struct_size;
  XLA_FFI_InternalExtension* extension_start;
  int64_t size;
  XLA_FFI_RetType* types;
  void** rets;
};
KILN_ABI_DEFINE_STRUCT_SIZE(XLA_FFI_Rets, rets);

/* The custom call's attributes sorted by name; `attrs[i]` points to an XLA_FFI_Scalar,
 * XLA_FFI_Array, XLA_FFI_ByteSpan or XLA_FFI_Attrs as `types[i]` says. */
struct XLA_FFI_Attrs {
  size_t struct_size;
  XLA_FFI_InternalExtension* extension_start;
  int64_t size;
  XLA_FFI_AttrType* types;
  XLA_FFI_ByteSpan** names;
  void** attrs;
};
KILN_ABI_DEFINE_STRUCT_SIZE(XLA_FFI_Attrs, attrs);

/* What a handler is called with. kiln builds it once per custom call and patches only the buffer
 * addresses on each run. `future` is set by an asynchronous handler. A handler built against an
 * older FFI sees a frame of XLA_FFI_CallFrame_STRUCT_SIZE or less. */
struct XLA_FFI_CallFrame {
  size_t struct_size;
  XLA_FFI_InternalExtension* extension_start;
  const XLA_FFI_Api* api;
  XLA_FFI_InvokeContext* ctx;
  XLA_FFI_ExecutionStage stage;
  XLA_FFI_Args args;
  XLA_FFI_Rets rets;
  XLA_FFI_Attrs attrs;
  XLA_FFI_Future* future; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(XLA_FFI_CallFrame, attrs);

typedef XLA_FFI_Error* XLA_FFI_Handler(XLA_FFI_CallFrame* call_frame);

/*---------------------------------------- Registration ----------------------------------------*/

/* One handler per stage; only `execute` is required. */
typedef struct XLA_FFI_Handler_Bundle {
  XLA_FFI_Handler* instantiate;
  XLA_FFI_Handler* prepare;
  XLA_FFI_Handler* initialize;
  XLA_FFI_Handler* execute;
  XLA_FFI_Handler* record;
} XLA_FFI_Handler_Bundle;

/* Properties a handler declares: command-buffer compatible handlers may be recorded into a CUDA
 * graph. */
enum XLA_FFI_Handler_TraitsBits {
  XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE = 1u << 0,
};

typedef uint32_t XLA_FFI_Handler_Traits;

/* Registers a handler bundle for a custom-call target name on a platform ("Host", "CUDA"). */
struct XLA_FFI_Handler_Register_Args {
  size_t struct_size;
  XLA_FFI_InternalExtension* extension_start;
  XLA_FFI_ByteSpan name;
  XLA_FFI_ByteSpan platform;
  XLA_FFI_Handler_Bundle bundle;
  XLA_FFI_Handler_Traits traits;
};
KILN_ABI_DEFINE_STRUCT_SIZE(XLA_FFI_Handler_Register_Args, traits);

typedef XLA_FFI_Error* XLA_FFI_Handler_Register(XLA_FFI_Handler_Register_Args* args);

/* Registers a named type (for state or user data). With `type_id` 0 kiln assigns an id and
 * writes it back; a nonzero id is taken as given. */
struct XLA_FFI_Type_Register_Args {
  size_t struct_size;
  XLA_FFI_InternalExtension* extension_start;
  XLA_FFI_ByteSpan name;
  XLA_FFI_TypeId* type_id; /* in-out */
  const XLA_FFI_TypeInfo* type_info;
};
KILN_ABI_DEFINE_STRUCT_SIZE(XLA_FFI_Type_Register_Args, type_id);

typedef XLA_FFI_Error* XLA_FFI_Type_Register(XLA_FFI_Type_Register_Args* args);

/*-------------------------------------- Context queries ---------------------------------------*/

/* Calls a handler makes on its XLA_FFI_InvokeContext during a call. */
struct XLA_FFI_InvokeContext_FindExtension_Args {
  size_t struct_size;
  XLA_FFI_InternalExtension* extension_start;
  XLA_FFI_InvokeContext* ctx;
  int64_t extension_type;
  const XLA_FFI_Extension* extension; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(XLA_FFI_InvokeContext_FindExtension_Args, extension);

typedef XLA_FFI_Error* XLA_FFI_InvokeContext_FindExtension(
    XLA_FFI_InvokeContext_FindExtension_Args* args);

/* User data of a registered type attached to the execute (PJRT_FFI_UserData_Add); borrowed. */
struct XLA_FFI_InvokeContext_Get_Args {
  size_t struct_size;
  XLA_FFI_InternalExtension* extension_start;
  XLA_FFI_InvokeContext* ctx;
  XLA_FFI_TypeId* type_id;
  void* data; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(XLA_FFI_InvokeContext_Get_Args, data);

typedef XLA_FFI_Error* XLA_FFI_InvokeContext_Get(XLA_FFI_InvokeContext_Get_Args* args);

/* Stores the handler's state for this custom call at `stage` (usually instantiate); kiln owns it
 * from then on and frees it with the type's deleter when the executable goes. */
struct XLA_FFI_State_Set_Args {
  size_t struct_size;
  XLA_FFI_InternalExtension* extension_start;
  XLA_FFI_InvokeContext* ctx;
  XLA_FFI_ExecutionStage stage;
  XLA_FFI_TypeId* type_id;
  void* state;
};
KILN_ABI_DEFINE_STRUCT_SIZE(XLA_FFI_State_Set_Args, state);

typedef XLA_FFI_Error* XLA_FFI_State_Set(XLA_FFI_State_Set_Args* args);

/* The state stored earlier; borrowed. */
struct XLA_FFI_State_Get_Args {
  size_t struct_size;
  XLA_FFI_InternalExtension* extension_start;
  XLA_FFI_InvokeContext* ctx;
  XLA_FFI_ExecutionStage stage;
  XLA_FFI_TypeId* type_id;
  void* state; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(XLA_FFI_State_Get_Args, state);

typedef XLA_FFI_Error* XLA_FFI_State_Get(XLA_FFI_State_Get_Args* args);

/* The platform stream the call runs on: a CUstream on CUDA, the host stream's handle on the
 * host. */
struct XLA_FFI_Stream_Get_Args {
  size_t struct_size;
  XLA_FFI_InternalExtension* extension_start;
  XLA_FFI_InvokeContext* ctx;
  void* stream; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(XLA_FFI_Stream_Get_Args, stream);

typedef XLA_FFI_Error* XLA_FFI_Stream_Get(XLA_FFI_Stream_Get_Args* args);

/* Scratch memory on the call's device, freed with XLA_FFI_DeviceMemory_Free. */
struct XLA_FFI_DeviceMemory_Allocate_Args {
  size_t struct_size;
  XLA_FFI_InternalExtension* extension_start;
  XLA_FFI_InvokeContext* ctx;
  size_t size;
  size_t alignment;
  void* data; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(XLA_FFI_DeviceMemory_Allocate_Args, data);

typedef XLA_FFI_Error* XLA_FFI_DeviceMemory_Allocate(XLA_FFI_DeviceMemory_Allocate_Args* args);

/* Frees memory from XLA_FFI_DeviceMemory_Allocate (`size` as allocated). */
struct XLA_FFI_DeviceMemory_Free_Args {
  size_t struct_size;
  XLA_FFI_InternalExtension* extension_start;
  XLA_FFI_InvokeContext* ctx;
  size_t size;
  void* data;
};
KILN_ABI_DEFINE_STRUCT_SIZE(XLA_FFI_DeviceMemory_Free_Args, data);

typedef XLA_FFI_Error* XLA_FFI_DeviceMemory_Free(XLA_FFI_DeviceMemory_Free_Args* args);

typedef void XLA_FFI_Task(void* data);

/* Runs `task(data)` on kiln's host thread pool. */
struct XLA_FFI_ThreadPool_Schedule_Args {
  size_t struct_size;
  XLA_FFI_InternalExtension* extension_start;
  XLA_FFI_InvokeContext* ctx;
  XLA_FFI_Task* task;
  void* data;
};
KILN_ABI_DEFINE_STRUCT_SIZE(XLA_FFI_ThreadPool_Schedule_Args, data);

typedef XLA_FFI_Error* XLA_FFI_ThreadPool_Schedule(XLA_FFI_ThreadPool_Schedule_Args* args);

struct XLA_FFI_ThreadPool_NumThreads_Args {
  size_t struct_size;
  XLA_FFI_InternalExtension* extension_start;
  XLA_FFI_InvokeContext* ctx;
  int64_t* num_threads; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(XLA_FFI_ThreadPool_NumThreads_Args, num_threads);

typedef XLA_FFI_Error* XLA_FFI_ThreadPool_NumThreads(XLA_FFI_ThreadPool_NumThreads_Args* args);

/* An id shared by every device's part of one execute. */
struct XLA_FFI_RunId_Get_Args {
  size_t struct_size;
  XLA_FFI_InternalExtension* extension_start;
  XLA_FFI_InvokeContext* ctx;
  int64_t run_id; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(XLA_FFI_RunId_Get_Args, run_id);

typedef XLA_FFI_Error* XLA_FFI_RunId_Get(XLA_FFI_RunId_Get_Args* args);

/* The call's device (its local hardware id). */
struct XLA_FFI_DeviceOrdinal_Get_Args {
  size_t struct_size;
  XLA_FFI_InternalExtension* extension_start;
  XLA_FFI_InvokeContext* ctx;
  int32_t device_ordinal; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(XLA_FFI_DeviceOrdinal_Get_Args, device_ordinal);

typedef XLA_FFI_Error* XLA_FFI_DeviceOrdinal_Get(XLA_FFI_DeviceOrdinal_Get_Args* args);

/*------------------------------------------ Metadata ------------------------------------------*/

/* What a handler reports when called with the metadata extension: the FFI version it was built
 * against, its traits and the type id of its state. kiln asks once, at registration. */
struct XLA_FFI_Metadata {
  size_t struct_size;
  XLA_FFI_Api_Version api_version;
  XLA_FFI_Handler_Traits traits;
  XLA_FFI_TypeId state_type_id;
};
KILN_ABI_DEFINE_STRUCT_SIZE(XLA_FFI_Metadata, traits);

struct XLA_FFI_Metadata_Extension {
  XLA_FFI_InternalExtension extension_base;
  XLA_FFI_Metadata* metadata;
};
KILN_ABI_DEFINE_STRUCT_SIZE(XLA_FFI_Metadata_Extension, metadata);

/*----------------------------------------- The table ------------------------------------------*/

/* The table every call frame points to (and XLA_FFI_GetApi returns): header, version, then 19
 * functions in this fixed order. kiln implements every one. */
struct XLA_FFI_Api {
  size_t struct_size;
  XLA_FFI_InternalExtension* extension_start;
  XLA_FFI_Api_Version api_version;
  const XLA_FFI_InternalApi* internal_api;
  KILN_ABI_SLOT(XLA_FFI_Error_Create);
  KILN_ABI_SLOT(XLA_FFI_Error_GetDetails);
  KILN_ABI_SLOT(XLA_FFI_Error_Destroy);
  KILN_ABI_SLOT(XLA_FFI_Handler_Register);
  KILN_ABI_SLOT(XLA_FFI_Stream_Get);
  KILN_ABI_SLOT(XLA_FFI_Type_Register);
  KILN_ABI_SLOT(XLA_FFI_InvokeContext_Get);
  KILN_ABI_SLOT(XLA_FFI_State_Set);
  KILN_ABI_SLOT(XLA_FFI_State_Get);
  KILN_ABI_SLOT(XLA_FFI_DeviceMemory_Allocate);
  KILN_ABI_SLOT(XLA_FFI_DeviceMemory_Free);
  KILN_ABI_SLOT(XLA_FFI_ThreadPool_Schedule);
  KILN_ABI_SLOT(XLA_FFI_ThreadPool_NumThreads);
  KILN_ABI_SLOT(XLA_FFI_Future_Create);
  KILN_ABI_SLOT(XLA_FFI_Future_SetAvailable);
  KILN_ABI_SLOT(XLA_FFI_Future_SetError);
  KILN_ABI_SLOT(XLA_FFI_RunId_Get);
  KILN_ABI_SLOT(XLA_FFI_DeviceOrdinal_Get);
  KILN_ABI_SLOT(XLA_FFI_InvokeContext_FindExtension);
};
KILN_ABI_DEFINE_STRUCT_SIZE(XLA_FFI_Api, XLA_FFI_InvokeContext_FindExtension);

/* kiln's FFI table, exported by the plugin for self-registering handler libraries. Static,
 * never NULL, not freed by the caller. */
KILN_ABI_EXPORT const XLA_FFI_Api* XLA_FFI_GetApi(void);

#ifdef __cplusplus
}
#endif

#endif /* KILN_FFI_C_API_H_ */
