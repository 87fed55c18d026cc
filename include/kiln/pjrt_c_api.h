/* kiln/pjrt_c_api.h: the PJRT C API as libkiln_pjrt.so serves it (PJRT 0.114).
 *
 * A framework that dlopen()s kiln calls GetPjrtApi() and talks to kiln only through the
 * returned table. The table, every argument struct and every enum here have exactly the
 * layout and numbering of OpenXLA's PJRT C API 0.114, so a client built against OpenXLA's
 * header works with kiln unchanged and vice versa; the test_abi_layout test (tests/abi/)
 * checks every size, offset and enum value against that header. Names follow the ABI so
 * that client source compiles against either header; the words are kiln's.
 *
 * Conventions kiln follows for every call:
 * - Each call takes one `*_Args` struct whose first two members are `struct_size` and
 *   `extension_start`. Callers set `struct_size` to the `*_STRUCT_SIZE` constant they were
 *   built with; kiln reads and writes only the members that size covers, so older clients
 *   keep working. A NULL or too-small struct is rejected with INVALID_ARGUMENT.
 * - Members marked `out` are written by kiln; the rest are read. Strings are
 *   (pointer, size) pairs, not NUL-terminated unless said otherwise.
 * - A call returns NULL on success or a PJRT_Error the caller owns and frees with
 *   PJRT_Error_Destroy. What kiln does not offer yet returns UNIMPLEMENTED naming the
 *   function; no slot of the table is NULL.
 * - Objects returned by *_Create, *_Compile, *_Load and the like belong to the caller until
 *   their *_Destroy. Out pointers to arrays and strings are borrowed: they live as long as
 *   the object they were read from, unless a member says who frees them.
 *
 * Status: this header pins the ABI; the plugin behind it is issue 15.
 */
#ifndef KILN_PJRT_C_API_H_
#define KILN_PJRT_C_API_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln/abi_macros.h"

/* The PJRT version kiln implements and reports in PJRT_Api.pjrt_api_version. A minor
 * version only ever appends members and table slots; the major version is 0 until
 * OpenXLA breaks the ABI. */
#define PJRT_API_MAJOR 0
#define PJRT_API_MINOR 114

#ifdef __cplusplus
extern "C" {
#endif

/*----------------------------------------- Extensions -----------------------------------------*/

/* Optional interfaces beyond the table are reached through a singly linked chain starting at
 * PJRT_Api.extension_start (and, for some calls, at an args struct's extension_start). Each link
 * begins with PJRT_Extension_Base; `type` says which extension follows. kiln offers FFI (5,
 * kiln/pjrt_ffi_extension.h) first; it ignores links of types it does not know. */
typedef enum {
  PJRT_Extension_Type_Gpu_Custom_Call = 0,
  PJRT_Extension_Type_Profiler = 1,
  PJRT_Extension_Type_Custom_Partitioner = 2,
  PJRT_Extension_Type_Stream = 3,
  PJRT_Extension_Type_Layouts = 4,
  PJRT_Extension_Type_FFI = 5,
  PJRT_Extension_Type_MemoryDescriptions = 6,
  PJRT_Extension_Type_Triton = 7,
  PJRT_Extension_Type_RawBuffer = 8,
  PJRT_Extension_Type_PhaseCompile = 9,
  PJRT_Extension_Type_Example = 10,
  PJRT_Extension_Type_Unknown = 11,
  PJRT_Extension_Type_CrossHostTransfers = 12,
  PJRT_Extension_Type_ExecutableMetadata = 13,
  PJRT_Extension_Type_Callback = 14,
  PJRT_Extension_Type_HostAllocator = 15,
  PJRT_Extension_Type_TpuTopology = 16,
  PJRT_Extension_Type_TpuExecutable = 17,
  PJRT_Extension_Type_Megascale = 18,
  PJRT_Extension_Type_Shardings = 19,
  PJRT_Extension_Type_AbiVersion = 20,
  PJRT_Extension_Type_Collectives = 21,
  PJRT_Extension_Type_MultiSlice = 22,
  PJRT_Extension_Type_HostMemoryAllocator = 23,
  PJRT_Extension_Type_XlaTransform = 24,
} PJRT_Extension_Type;

/* Head of every extension struct; `next` is NULL at the end of the chain. */
typedef struct PJRT_Extension_Base {
  size_t struct_size;
  PJRT_Extension_Type type;
  struct PJRT_Extension_Base* next;
} PJRT_Extension_Base;
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Extension_Base, next);

/*------------------------------------------ Version -------------------------------------------*/

/* Filled by kiln with PJRT_API_MAJOR / PJRT_API_MINOR. XLA's loader refuses major != 0 or minor
 * < 29. */
struct PJRT_Api_Version {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  int major_version; /* out */
  int minor_version; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Api_Version, minor_version);

/*------------------------------------------- Errors -------------------------------------------*/

/* Every call that can fail returns a PJRT_Error*: NULL for success, else an error kiln allocated
 * and the caller frees with PJRT_Error_Destroy. Codes are absl's status codes. */
typedef struct PJRT_Error PJRT_Error;

/* Frees an error; NULL is allowed. */
struct PJRT_Error_Destroy_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Error* error;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Error_Destroy_Args, error);

typedef void PJRT_Error_Destroy(PJRT_Error_Destroy_Args* args);

/* The error's message; it lives as long as the error. */
struct PJRT_Error_Message_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const PJRT_Error* error;
  const char* message; /* out */
  size_t message_size; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Error_Message_Args, message_size);

typedef void PJRT_Error_Message(PJRT_Error_Message_Args* args);

typedef enum {
  PJRT_Error_Code_OK = 0,
  PJRT_Error_Code_CANCELLED = 1,
  PJRT_Error_Code_UNKNOWN = 2,
  PJRT_Error_Code_INVALID_ARGUMENT = 3,
  PJRT_Error_Code_DEADLINE_EXCEEDED = 4,
  PJRT_Error_Code_NOT_FOUND = 5,
  PJRT_Error_Code_ALREADY_EXISTS = 6,
  PJRT_Error_Code_PERMISSION_DENIED = 7,
  PJRT_Error_Code_RESOURCE_EXHAUSTED = 8,
  PJRT_Error_Code_FAILED_PRECONDITION = 9,
  PJRT_Error_Code_ABORTED = 10,
  PJRT_Error_Code_OUT_OF_RANGE = 11,
  PJRT_Error_Code_UNIMPLEMENTED = 12,
  PJRT_Error_Code_INTERNAL = 13,
  PJRT_Error_Code_UNAVAILABLE = 14,
  PJRT_Error_Code_DATA_LOSS = 15,
  PJRT_Error_Code_UNAUTHENTICATED = 16,
} PJRT_Error_Code;

/* Called once per (key, value) payload an error carries; the strings live for the call only. */
typedef void (*PJRT_Error_PayloadVisitor)(const char* key, size_t key_size, const char* value,
                                          size_t value_size, void* user_arg);

/* Since 0.107 every PJRT_Error kiln returns begins with a pointer to this table, so a client can
 * read code and message without a round trip through PJRT_Api. `instance_size` is the size of
 * the PJRT_Error header the error begins with (PJRT_Error_STRUCT_SIZE), as XLA's own errors
 * report it. */
typedef struct PJRT_Error_FunctionTable {
  size_t struct_size;
  size_t instance_size;
  PJRT_Extension_Base* extension_start;
  void (*destroy)(PJRT_Error* error);
  void (*message)(const PJRT_Error* error, const char** message, size_t* message_size);
  PJRT_Error_Code (*get_code)(const PJRT_Error* error);
  void (*for_each_payload)(const PJRT_Error* error, PJRT_Error_PayloadVisitor visitor,
                           void* user_arg);
} PJRT_Error_FunctionTable;
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Error_FunctionTable, for_each_payload);

struct PJRT_Error {
  const struct PJRT_Error_FunctionTable* vtable;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Error, vtable);

/* The error's code. */
struct PJRT_Error_GetCode_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const PJRT_Error* error;
  PJRT_Error_Code code; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Error_GetCode_Args, code);

typedef PJRT_Error* PJRT_Error_GetCode(PJRT_Error_GetCode_Args* args);

/* Visits the error's payloads (kiln attaches none yet). */
struct PJRT_Error_ForEachPayload_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const PJRT_Error* error;
  PJRT_Error_PayloadVisitor visitor;
  void* user_arg;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Error_ForEachPayload_Args, user_arg);

typedef PJRT_Error* PJRT_Error_ForEachPayload(PJRT_Error_ForEachPayload_Args* args);

/* How a caller-supplied callback builds a PJRT_Error to return to kiln. */
typedef PJRT_Error* (*PJRT_CallbackError)(PJRT_Error_Code code, const char* message,
                                          size_t message_size);

/*---------------------------------------- Named values ----------------------------------------*/

/* Options and attributes as (name, typed value) pairs. For strings and int64 lists `value_size`
 * is the element count; for scalars it is 1. */
typedef enum {
  PJRT_NamedValue_kString = 0,
  PJRT_NamedValue_kInt64 = 1,
  PJRT_NamedValue_kInt64List = 2,
  PJRT_NamedValue_kFloat = 3,
  PJRT_NamedValue_kBool = 4,
} PJRT_NamedValue_Type;

struct PJRT_NamedValue {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const char* name;
  size_t name_size;
  PJRT_NamedValue_Type type;
  union {
    const char* string_value;
    int64_t int64_value;
    const int64_t* int64_array_value;
    float float_value;
    bool bool_value;
  };
  size_t value_size;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_NamedValue, value_size);

/*------------------------------------------- Plugin -------------------------------------------*/

/* Called once after dlopen(), before anything else; kiln sets up its process-wide state. */
struct PJRT_Plugin_Initialize_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Plugin_Initialize_Args, extension_start);

typedef PJRT_Error* PJRT_Plugin_Initialize(PJRT_Plugin_Initialize_Args* args);

/* Describes the plugin: xla_version, stablehlo_current_version, stablehlo_minimum_version,
 * kiln's version and the program formats it compiles. The array is static. */
struct PJRT_Plugin_Attributes_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const PJRT_NamedValue* attributes; /* out */
  size_t num_attributes;             /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Plugin_Attributes_Args, num_attributes);

typedef PJRT_Error* PJRT_Plugin_Attributes(PJRT_Plugin_Attributes_Args* args);

/*------------------------------------------- Events -------------------------------------------*/

/* An event completes once some asynchronous work (a transfer, an execute) has, with or without
 * an error. The caller owns every event kiln hands out and frees it with PJRT_Event_Destroy;
 * destroying an event does not cancel the work. */
typedef struct PJRT_Event PJRT_Event;

/* Frees an event; NULL is allowed. */
struct PJRT_Event_Destroy_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Event* event;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Event_Destroy_Args, event);

typedef PJRT_Error* PJRT_Event_Destroy(PJRT_Event_Destroy_Args* args);

/* Whether the event has completed (successfully or not). */
struct PJRT_Event_IsReady_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Event* event;
  bool is_ready; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Event_IsReady_Args, is_ready);

typedef PJRT_Error* PJRT_Event_IsReady(PJRT_Event_IsReady_Args* args);

/* After completion: NULL, or a new copy of the event's error for the caller to free. */
struct PJRT_Event_Error_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Event* event;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Event_Error_Args, event);

typedef PJRT_Error* PJRT_Event_Error(PJRT_Event_Error_Args* args);

/* Blocks until the event completes; returns its error (a new copy, the caller's to free). */
struct PJRT_Event_Await_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Event* event;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Event_Await_Args, event);

typedef PJRT_Error* PJRT_Event_Await(PJRT_Event_Await_Args* args);

/* Receives ownership of `error` (NULL on success) and must destroy it. */
typedef void (*PJRT_Event_OnReadyCallback)(PJRT_Error* error, void* user_arg);

/* Runs `callback` once the event completes (also when it already has), on a kiln thread,
 * never while kiln holds a lock. */
struct PJRT_Event_OnReady_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Event* event;
  PJRT_Event_OnReadyCallback callback;
  void* user_arg;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Event_OnReady_Args, user_arg);

typedef PJRT_Error* PJRT_Event_OnReady(PJRT_Event_OnReady_Args* args);

/* A new event the caller completes with PJRT_Event_Set. */
struct PJRT_Event_Create_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Event* event; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Event_Create_Args, event);

typedef PJRT_Error* PJRT_Event_Create(PJRT_Event_Create_Args* args);

/* Completes an event from PJRT_Event_Create, with PJRT_Error_Code_OK or an error code and
 * message (copied). */
struct PJRT_Event_Set_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Event* event;
  PJRT_Error_Code error_code;
  const char* error_message;
  size_t error_message_size;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Event_Set_Args, error_message_size);

typedef PJRT_Error* PJRT_Event_Set(PJRT_Event_Set_Args* args);

/*------------------------------- Client and the objects it owns -------------------------------*/

/* A client owns its devices, memories and descriptions: pointers to them are borrowed and live
 * as long as the client. Buffers, executables and events it creates are the caller's. */
typedef struct PJRT_Client PJRT_Client;

typedef struct PJRT_Device PJRT_Device;

typedef struct PJRT_Memory PJRT_Memory;

/* Since 0.105 every PJRT_Memory begins with a pointer to this table, through which XLA's client
 * attaches its own data to kiln's memories. */
typedef struct PJRT_Memory_FunctionTable PJRT_Memory_FunctionTable;

struct PJRT_Memory_FunctionTable {
  size_t struct_size;
  struct PJRT_Extension_Base* extension_start;
  size_t instance_struct_size;
  void* (*get_user_data)(struct PJRT_Memory* memory, const void* key);
  void (*set_user_data)(struct PJRT_Memory* memory, const void* key, void* data,
                        void (*dtor)(void*));
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Memory_FunctionTable, set_user_data);

struct PJRT_Memory {
  const struct PJRT_Memory_FunctionTable* vtable;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Memory, vtable);

typedef struct PJRT_ShapeSpec PJRT_ShapeSpec;

typedef struct PJRT_DeviceDescription PJRT_DeviceDescription;

typedef struct PJRT_TopologyDescription PJRT_TopologyDescription;

typedef struct PJRT_Executable PJRT_Executable;

typedef struct PJRT_LoadedExecutable PJRT_LoadedExecutable;

typedef struct PJRT_Buffer PJRT_Buffer;

typedef struct PJRT_FulfillAliasBufferCallback PJRT_FulfillAliasBufferCallback;

typedef struct PJRT_AsyncHostToDeviceTransferManager PJRT_AsyncHostToDeviceTransferManager;

typedef struct PJRT_PhaseCompiler PJRT_PhaseCompiler;

/*-------------------------------------- Key-value store ---------------------------------------*/

/* Callbacks a multi-process client uses to exchange data through the caller's key-value store.
 * kiln keeps them for the multi-process work; with one process it does not call them. */
typedef void (*PJRT_KeyValueGetCallback_ValueDeleter)(char* value);

/* Blocking lookup (up to `timeout_in_ms`); kiln copies the value, then calls the deleter. */
struct PJRT_KeyValueGetCallback_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const char* key;
  size_t key_size;
  int timeout_in_ms;
  PJRT_CallbackError* callback_error;
  void* user_arg;
  char* value;                                                  /* out */
  size_t value_size;                                            /* out */
  PJRT_KeyValueGetCallback_ValueDeleter value_deleter_callback; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_KeyValueGetCallback_Args, value_deleter_callback);

typedef PJRT_Error* (*PJRT_KeyValueGetCallback)(PJRT_KeyValueGetCallback_Args* args);

typedef void (*PJRT_KeyValueTryGetCallback_ValueDeleter)(char* value);

/* Lookup that returns NOT_FOUND at once when the key is absent. */
struct PJRT_KeyValueTryGetCallback_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const char* key;
  size_t key_size;
  PJRT_CallbackError* callback_error;
  void* user_arg;
  char* value;                                                     /* out */
  size_t value_size;                                               /* out */
  PJRT_KeyValueTryGetCallback_ValueDeleter value_deleter_callback; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_KeyValueTryGetCallback_Args, value_deleter_callback);

typedef PJRT_Error* (*PJRT_KeyValueTryGetCallback)(PJRT_KeyValueTryGetCallback_Args* args);

/* Stores a value; the strings only need to live for the call. */
struct PJRT_KeyValuePutCallback_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const char* key;
  size_t key_size;
  const char* value;
  size_t value_size;
  PJRT_CallbackError* callback_error;
  void* user_arg;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_KeyValuePutCallback_Args, user_arg);

typedef PJRT_Error* (*PJRT_KeyValuePutCallback)(PJRT_KeyValuePutCallback_Args* args);

/* Creates a client. Options kiln reads (PJRT_NamedValue): platform ("cpu", "cuda" or automatic),
 * number of host devices, cache and dump directories, command buffers on/off, FFI libraries to
 * load. Unknown options are ignored. */
struct PJRT_Client_Create_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const PJRT_NamedValue* create_options;
  size_t num_options;
  PJRT_KeyValueGetCallback kv_get_callback;
  void* kv_get_user_arg;
  PJRT_KeyValuePutCallback kv_put_callback;
  void* kv_put_user_arg;
  PJRT_Client* client; /* out */
  PJRT_KeyValueTryGetCallback kv_try_get_callback;
  void* kv_try_get_user_arg;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Client_Create_Args, kv_try_get_user_arg);

typedef PJRT_Error* PJRT_Client_Create(PJRT_Client_Create_Args* args);

/* Destroys the client once pending work on it has finished; NULL is allowed. */
struct PJRT_Client_Destroy_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Client_Destroy_Args, client);

typedef PJRT_Error* PJRT_Client_Destroy(PJRT_Client_Destroy_Args* args);

/* "cpu" for the host backend, "cuda" for NVIDIA GPUs; owned by the client. */
struct PJRT_Client_PlatformName_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  const char* platform_name; /* out */
  size_t platform_name_size; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Client_PlatformName_Args, platform_name_size);

typedef PJRT_Error* PJRT_Client_PlatformName(PJRT_Client_PlatformName_Args* args);

/* This process's index; 0 with one process. */
struct PJRT_Client_ProcessIndex_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  int process_index; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Client_ProcessIndex_Args, process_index);

typedef PJRT_Error* PJRT_Client_ProcessIndex(PJRT_Client_ProcessIndex_Args* args);

/* kiln's version and, on CUDA, the driver's; owned by the client. */
struct PJRT_Client_PlatformVersion_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  const char* platform_version; /* out */
  size_t platform_version_size; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Client_PlatformVersion_Args, platform_version_size);

typedef PJRT_Error* PJRT_Client_PlatformVersion(PJRT_Client_PlatformVersion_Args* args);

/* The client's topology, owned by the client. */
struct PJRT_Client_TopologyDescription_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  PJRT_TopologyDescription* topology; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Client_TopologyDescription_Args, topology);

typedef PJRT_Error* PJRT_Client_TopologyDescription(PJRT_Client_TopologyDescription_Args* args);

/* Every device the client knows, addressable or not; the array is the client's. */
struct PJRT_Client_Devices_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  PJRT_Device* const* devices; /* out */
  size_t num_devices;          /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Client_Devices_Args, num_devices);

typedef PJRT_Error* PJRT_Client_Devices(PJRT_Client_Devices_Args* args);

/* The devices this process can run on; the array is the client's. */
struct PJRT_Client_AddressableDevices_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  PJRT_Device* const* addressable_devices; /* out */
  size_t num_addressable_devices;          /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Client_AddressableDevices_Args, num_addressable_devices);

typedef PJRT_Error* PJRT_Client_AddressableDevices(PJRT_Client_AddressableDevices_Args* args);

/* The device with a given global id (PJRT_DeviceDescription_Id). */
struct PJRT_Client_LookupDevice_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  int id;
  PJRT_Device* device; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Client_LookupDevice_Args, device);

typedef PJRT_Error* PJRT_Client_LookupDevice(PJRT_Client_LookupDevice_Args* args);

/* The addressable device with a given local hardware id (PJRT_Device_LocalHardwareId). */
struct PJRT_Client_LookupAddressableDevice_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  int local_hardware_id;
  PJRT_Device* addressable_device; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Client_LookupAddressableDevice_Args, addressable_device);

typedef PJRT_Error* PJRT_Client_LookupAddressableDevice(
    PJRT_Client_LookupAddressableDevice_Args* args);

/* State of one process of a multi-process job. */
typedef enum {
  PJRT_ProcessState_kUnspecified = 0,
  PJRT_ProcessState_kUninitialized = 1,
  PJRT_ProcessState_kDisconnected = 2,
  PJRT_ProcessState_kConnected = 3,
  PJRT_ProcessState_kError = 4,
} PJRT_ProcessState;

struct PJRT_ProcessInfo {
  size_t struct_size;
  int task_id;
  uint64_t incarnation_id;
  PJRT_ProcessState state;
  int error_code;
  const char* error_message;
  size_t error_message_size;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_ProcessInfo, error_message_size);

/* Tells the client about every process of a multi-process job. */
struct PJRT_Client_UpdateGlobalProcessInfo_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  PJRT_ProcessInfo* process_infos;
  size_t num_process_infos;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Client_UpdateGlobalProcessInfo_Args, num_process_infos);

typedef PJRT_Error* PJRT_Client_UpdateGlobalProcessInfo(
    PJRT_Client_UpdateGlobalProcessInfo_Args* args);

/* Every memory this process can reach (on kiln: "device" and "pinned_host" per device). */
struct PJRT_Client_AddressableMemories_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  PJRT_Memory* const* addressable_memories; /* out */
  size_t num_addressable_memories;          /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Client_AddressableMemories_Args, num_addressable_memories);

typedef PJRT_Error* PJRT_Client_AddressableMemories(PJRT_Client_AddressableMemories_Args* args);

/* A program to compile: `code` in `format`, both owned by the caller. kiln accepts "mlir"
 * (StableHLO text or VHLO bytecode), "hlo" (serialized HloModuleProto, or HLO text) and
 * "hlo_with_config". */
struct PJRT_Program {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  char* code;
  size_t code_size;
  const char* format;
  size_t format_size;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Program, format_size);

/* Parses, verifies and optimizes `program` with the serialized CompileOptionsProto; kernels are
 * generated lazily at the first execute on each device. The executable is the caller's. */
struct PJRT_Client_Compile_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  const PJRT_Program* program;
  const char* compile_options;
  size_t compile_options_size;
  PJRT_LoadedExecutable* executable; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Client_Compile_Args, executable);

typedef PJRT_Error* PJRT_Client_Compile(PJRT_Client_Compile_Args* args);

/* Loads a compiled (not loaded) executable onto the client's devices. */
struct PJRT_Client_Load_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  PJRT_Executable* executable;
  const char* compile_options;
  size_t compile_options_size;
  PJRT_LoadedExecutable* loaded_executable; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Client_Load_Args, loaded_executable);

typedef PJRT_Error* PJRT_Client_Load(PJRT_Client_Load_Args* args);

/* Writes replicas * partitions device ids into the caller's array. */
struct PJRT_Client_DefaultDeviceAssignment_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  int num_replicas;
  int num_partitions;
  size_t default_assignment_size;
  int* default_assignment;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Client_DefaultDeviceAssignment_Args, default_assignment);

typedef PJRT_Error* PJRT_Client_DefaultDeviceAssignment(
    PJRT_Client_DefaultDeviceAssignment_Args* args);

/* Registers host memory for fast device transfers. */
struct PJRT_Client_DmaMap_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  void* data;
  size_t size;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Client_DmaMap_Args, size);

typedef PJRT_Error* PJRT_Client_DmaMap(PJRT_Client_DmaMap_Args* args);

/* Undoes PJRT_Client_DmaMap. */
struct PJRT_Client_DmaUnmap_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  void* data;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Client_DmaUnmap_Args, data);

typedef PJRT_Error* PJRT_Client_DmaUnmap(PJRT_Client_DmaUnmap_Args* args);

/*--------------------------- Asynchronous host-to-device transfers ----------------------------*/

/* A transfer manager owns a set of device buffers that are filled piece by piece from host data;
 * the caller retrieves the buffers and destroys the manager. */

/* Frees the manager; NULL is allowed. Buffers already retrieved stay valid. */
struct PJRT_AsyncHostToDeviceTransferManager_Destroy_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_AsyncHostToDeviceTransferManager* transfer_manager;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_AsyncHostToDeviceTransferManager_Destroy_Args, transfer_manager);

typedef PJRT_Error* PJRT_AsyncHostToDeviceTransferManager_Destroy(
    PJRT_AsyncHostToDeviceTransferManager_Destroy_Args* args);

/* Copies host bytes into part of buffer `buffer_index`; the event says when `data` may be
 * reused. */
struct PJRT_AsyncHostToDeviceTransferManager_TransferData_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_AsyncHostToDeviceTransferManager* transfer_manager;
  int buffer_index;
  const void* data;
  int64_t offset;
  int64_t transfer_size;
  bool is_last_transfer;
  PJRT_Event* done_with_h2d_transfer; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_AsyncHostToDeviceTransferManager_TransferData_Args,
                            done_with_h2d_transfer);

typedef PJRT_Error* PJRT_AsyncHostToDeviceTransferManager_TransferData(
    PJRT_AsyncHostToDeviceTransferManager_TransferData_Args* args);

/* Hands buffer `buffer_index` to the caller, who then owns it. */
struct PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_AsyncHostToDeviceTransferManager* transfer_manager;
  int buffer_index;
  PJRT_Buffer* buffer_out; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer_Args, buffer_out);

typedef PJRT_Error* PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer(
    PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer_Args* args);

/* The device the buffers live on. */
struct PJRT_AsyncHostToDeviceTransferManager_Device_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_AsyncHostToDeviceTransferManager* transfer_manager;
  PJRT_Device* device_out; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_AsyncHostToDeviceTransferManager_Device_Args, device_out);

typedef PJRT_Error* PJRT_AsyncHostToDeviceTransferManager_Device(
    PJRT_AsyncHostToDeviceTransferManager_Device_Args* args);

/* How many buffers the manager fills. */
struct PJRT_AsyncHostToDeviceTransferManager_BufferCount_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_AsyncHostToDeviceTransferManager* transfer_manager;
  size_t buffer_count; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_AsyncHostToDeviceTransferManager_BufferCount_Args, buffer_count);

typedef PJRT_Error* PJRT_AsyncHostToDeviceTransferManager_BufferCount(
    PJRT_AsyncHostToDeviceTransferManager_BufferCount_Args* args);

/* The on-device size of buffer `buffer_index`. */
struct PJRT_AsyncHostToDeviceTransferManager_BufferSize_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_AsyncHostToDeviceTransferManager* transfer_manager;
  int buffer_index;
  size_t buffer_size; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_AsyncHostToDeviceTransferManager_BufferSize_Args, buffer_size);

typedef PJRT_Error* PJRT_AsyncHostToDeviceTransferManager_BufferSize(
    PJRT_AsyncHostToDeviceTransferManager_BufferSize_Args* args);

/* Fails buffer `buffer_index` with an error instead of data. */
struct PJRT_AsyncHostToDeviceTransferManager_SetBufferError_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_AsyncHostToDeviceTransferManager* transfer_manager;
  int buffer_index;
  PJRT_Error_Code error_code;
  const char* error_message;
  size_t error_message_size;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_AsyncHostToDeviceTransferManager_SetBufferError_Args,
                            error_message_size);

typedef PJRT_Error* PJRT_AsyncHostToDeviceTransferManager_SetBufferError(
    PJRT_AsyncHostToDeviceTransferManager_SetBufferError_Args* args);

/* Attaches (name, value) metadata to the transfers. */
struct PJRT_AsyncHostToDeviceTransferManager_AddMetadata_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_AsyncHostToDeviceTransferManager* transfer_manager;
  const PJRT_NamedValue* transfer_metadata;
  size_t num_metadata;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_AsyncHostToDeviceTransferManager_AddMetadata_Args, num_metadata);

typedef PJRT_Error* PJRT_AsyncHostToDeviceTransferManager_AddMetadata(
    PJRT_AsyncHostToDeviceTransferManager_AddMetadata_Args* args);

/*------------------------------------------ Buffers -------------------------------------------*/

/* Element types, in PJRT's own numbering (which differs from FFI's). */
typedef enum {
  PJRT_Buffer_Type_INVALID = 0,
  PJRT_Buffer_Type_PRED = 1,
  PJRT_Buffer_Type_S8 = 2,
  PJRT_Buffer_Type_S16 = 3,
  PJRT_Buffer_Type_S32 = 4,
  PJRT_Buffer_Type_S64 = 5,
  PJRT_Buffer_Type_U8 = 6,
  PJRT_Buffer_Type_U16 = 7,
  PJRT_Buffer_Type_U32 = 8,
  PJRT_Buffer_Type_U64 = 9,
  PJRT_Buffer_Type_F16 = 10,
  PJRT_Buffer_Type_F32 = 11,
  PJRT_Buffer_Type_F64 = 12,
  PJRT_Buffer_Type_BF16 = 13,
  PJRT_Buffer_Type_C64 = 14,
  PJRT_Buffer_Type_C128 = 15,
  PJRT_Buffer_Type_F8E5M2 = 16,
  PJRT_Buffer_Type_F8E4M3FN = 17,
  PJRT_Buffer_Type_F8E4M3B11FNUZ = 18,
  PJRT_Buffer_Type_F8E5M2FNUZ = 19,
  PJRT_Buffer_Type_F8E4M3FNUZ = 20,
  PJRT_Buffer_Type_S4 = 21,
  PJRT_Buffer_Type_U4 = 22,
  PJRT_Buffer_Type_TOKEN = 23,
  PJRT_Buffer_Type_S2 = 24,
  PJRT_Buffer_Type_U2 = 25,
  PJRT_Buffer_Type_F8E4M3 = 26,
  PJRT_Buffer_Type_F8E3M4 = 27,
  PJRT_Buffer_Type_F8E8M0FNU = 28,
  PJRT_Buffer_Type_F4E2M1FN = 29,
  PJRT_Buffer_Type_S1 = 30,
  PJRT_Buffer_Type_U1 = 31,
  PJRT_Buffer_Type_F6E2M3FN = 32,
  PJRT_Buffer_Type_F6E3M2FN = 33,
} PJRT_Buffer_Type;

/* How long kiln may read the host data handed to PJRT_Client_BufferFromHostBuffer, and whether
 * it may alias it. */
typedef enum {
  PJRT_HostBufferSemantics_kImmutableOnlyDuringCall = 0,
  PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes = 1,
  PJRT_HostBufferSemantics_kImmutableZeroCopy = 2,
  PJRT_HostBufferSemantics_kMutableZeroCopy = 3,
} PJRT_HostBufferSemantics;

/* A buffer's memory layout: a minor-to-major order with optional tiles, or byte strides. */
typedef enum {
  PJRT_Buffer_MemoryLayout_Type_Tiled = 0,
  PJRT_Buffer_MemoryLayout_Type_Strides = 1,
} PJRT_Buffer_MemoryLayout_Type;

struct PJRT_Buffer_MemoryLayout_Tiled {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const int64_t* minor_to_major;
  size_t minor_to_major_size;
  const int64_t* tile_dims;
  const size_t* tile_dim_sizes;
  size_t num_tiles;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Buffer_MemoryLayout_Tiled, num_tiles);

struct PJRT_Buffer_MemoryLayout_Strides {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const int64_t* byte_strides;
  size_t num_byte_strides;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Buffer_MemoryLayout_Strides, num_byte_strides);

struct PJRT_Buffer_MemoryLayout {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  union {
    PJRT_Buffer_MemoryLayout_Tiled tiled;
    PJRT_Buffer_MemoryLayout_Strides strides;
  };
  PJRT_Buffer_MemoryLayout_Type type;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Buffer_MemoryLayout, type);

/* Copies a host literal into one of the manager's buffers. */
struct PJRT_AsyncHostToDeviceTransferManager_TransferLiteral_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_AsyncHostToDeviceTransferManager* transfer_manager;
  int buffer_index;
  const void* data;
  const int64_t* shape_dims;
  size_t shape_num_dims;
  PJRT_Buffer_Type shape_element_type;
  PJRT_Buffer_MemoryLayout* shape_layout;
  PJRT_Event* done_with_h2d_transfer; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_AsyncHostToDeviceTransferManager_TransferLiteral_Args,
                            done_with_h2d_transfer);

typedef PJRT_Error* PJRT_AsyncHostToDeviceTransferManager_TransferLiteral(
    PJRT_AsyncHostToDeviceTransferManager_TransferLiteral_Args* args);

/* A buffer of the given shape whose contents are undefined; the caller's. */
struct PJRT_Client_CreateUninitializedBuffer_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  const int64_t* shape_dims;
  size_t shape_num_dims;
  PJRT_Buffer_Type shape_element_type;
  PJRT_Buffer_MemoryLayout* shape_layout;
  PJRT_Device* device;
  PJRT_Memory* memory;
  PJRT_Buffer* buffer; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Client_CreateUninitializedBuffer_Args, buffer);

typedef PJRT_Error* PJRT_Client_CreateUninitializedBuffer(
    PJRT_Client_CreateUninitializedBuffer_Args* args);

/* A buffer holding no memory that carries an error: an execute it is passed to fails with it. */
struct PJRT_Client_CreateErrorBuffer_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  PJRT_Error_Code error_code;
  const char* error_message;
  size_t error_message_size;
  const int64_t* shape_dims;
  size_t shape_num_dims;
  PJRT_Buffer_Type shape_element_type;
  PJRT_Buffer_MemoryLayout* shape_layout;
  PJRT_Memory* memory;
  PJRT_Buffer* buffer; /* out */
  const PJRT_NamedValue* payload;
  size_t num_payload;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Client_CreateErrorBuffer_Args, num_payload);

typedef PJRT_Error* PJRT_Client_CreateErrorBuffer(PJRT_Client_CreateErrorBuffer_Args* args);

/* A buffer to be bound later to another buffer with PJRT_Client_FulfillAliasBuffer. */
struct PJRT_Client_CreateAliasBuffer_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  PJRT_Memory* memory;
  const int64_t* shape_dims;
  size_t shape_num_dims;
  PJRT_Buffer_Type shape_element_type;
  PJRT_Buffer_MemoryLayout* shape_layout;
  PJRT_Buffer* alias_buffer;                                /* out */
  PJRT_FulfillAliasBufferCallback* fulfill_alias_buffer_cb; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Client_CreateAliasBuffer_Args, fulfill_alias_buffer_cb);

typedef PJRT_Error* PJRT_Client_CreateAliasBuffer(PJRT_Client_CreateAliasBuffer_Args* args);

/* Binds an alias buffer to a real buffer or to an error. */
struct PJRT_Client_FulfillAliasBuffer_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  PJRT_Buffer* buffer;
  PJRT_Error_Code status_code;
  const char* error_message;
  size_t error_message_size;
  PJRT_FulfillAliasBufferCallback* fulfill_alias_buffer_cb;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Client_FulfillAliasBuffer_Args, fulfill_alias_buffer_cb);

typedef PJRT_Error* PJRT_Client_FulfillAliasBuffer(PJRT_Client_FulfillAliasBuffer_Args* args);

/* Copies (or, with the zero-copy semantics, aliases) host data into a new buffer on `device` or
 * `memory`. `byte_strides` may describe any host layout; `done_with_host_buffer` tells when the
 * caller may reuse `data`. The buffer and the event are the caller's. */
struct PJRT_Client_BufferFromHostBuffer_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  const void* data;
  PJRT_Buffer_Type type;
  const int64_t* dims;
  size_t num_dims;
  const int64_t* byte_strides;
  size_t num_byte_strides;
  PJRT_HostBufferSemantics host_buffer_semantics;
  PJRT_Device* device;
  PJRT_Memory* memory;
  PJRT_Buffer_MemoryLayout* device_layout;
  PJRT_Event* done_with_host_buffer; /* out */
  PJRT_Buffer* buffer;               /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Client_BufferFromHostBuffer_Args, buffer);

typedef PJRT_Error* PJRT_Client_BufferFromHostBuffer(PJRT_Client_BufferFromHostBuffer_Args* args);

/* Wraps device memory kiln does not own; `on_delete_callback` runs when the view is freed. */
struct PJRT_Client_CreateViewOfDeviceBuffer_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  void* device_buffer_ptr;
  const int64_t* dims;
  size_t num_dims;
  PJRT_Buffer_Type element_type;
  PJRT_Buffer_MemoryLayout* layout;
  PJRT_Device* device;
  void (*on_delete_callback)(void* device_buffer_ptr, void* user_arg);
  void* on_delete_callback_arg;
  intptr_t stream;
  PJRT_Buffer* buffer; /* out */
  PJRT_Memory* memory;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Client_CreateViewOfDeviceBuffer_Args, memory);

typedef PJRT_Error* PJRT_Client_CreateViewOfDeviceBuffer(
    PJRT_Client_CreateViewOfDeviceBuffer_Args* args);

/* An array shape: dimensions and element type. */
struct PJRT_ShapeSpec {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const int64_t* dims;
  size_t num_dims;
  PJRT_Buffer_Type element_type;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_ShapeSpec, element_type);

/* A transfer manager with one buffer per shape spec. */
struct PJRT_Client_CreateBuffersForAsyncHostToDevice_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  PJRT_ShapeSpec* shape_specs;
  size_t num_shape_specs;
  PJRT_Buffer_MemoryLayout** device_layouts;
  size_t num_device_layouts;
  PJRT_Memory* memory;
  PJRT_AsyncHostToDeviceTransferManager* transfer_manager; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Client_CreateBuffersForAsyncHostToDevice_Args, transfer_manager);

typedef PJRT_Error* PJRT_Client_CreateBuffersForAsyncHostToDevice(
    PJRT_Client_CreateBuffersForAsyncHostToDevice_Args* args);

/*------------------------------------ Device descriptions -------------------------------------*/

/* What is known about a device independent of whether it is present: id, process, kind,
 * attributes. Owned by the client or topology they came from. */

/* The device's global id, unique across processes. */
struct PJRT_DeviceDescription_Id_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_DeviceDescription* device_description;
  int id; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_DeviceDescription_Id_Args, id);

typedef PJRT_Error* PJRT_DeviceDescription_Id(PJRT_DeviceDescription_Id_Args* args);

/* The process the device belongs to. */
struct PJRT_DeviceDescription_ProcessIndex_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_DeviceDescription* device_description;
  int process_index; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_DeviceDescription_ProcessIndex_Args, process_index);

typedef PJRT_Error* PJRT_DeviceDescription_ProcessIndex(
    PJRT_DeviceDescription_ProcessIndex_Args* args);

/* Device attributes; on CUDA compute capability, SM count and memory size, on the host the core
 * count. The array lives as long as the description. */
struct PJRT_DeviceDescription_Attributes_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_DeviceDescription* device_description;
  size_t num_attributes;             /* out */
  const PJRT_NamedValue* attributes; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_DeviceDescription_Attributes_Args, attributes);

typedef PJRT_Error* PJRT_DeviceDescription_Attributes(PJRT_DeviceDescription_Attributes_Args* args);

/* e.g. "cpu" or the GPU's product name. */
struct PJRT_DeviceDescription_Kind_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_DeviceDescription* device_description;
  const char* device_kind; /* out */
  size_t device_kind_size; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_DeviceDescription_Kind_Args, device_kind_size);

typedef PJRT_Error* PJRT_DeviceDescription_Kind(PJRT_DeviceDescription_Kind_Args* args);

/* A detailed description for error messages; owned by the description. */
struct PJRT_DeviceDescription_DebugString_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_DeviceDescription* device_description;
  const char* debug_string; /* out */
  size_t debug_string_size; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_DeviceDescription_DebugString_Args, debug_string_size);

typedef PJRT_Error* PJRT_DeviceDescription_DebugString(
    PJRT_DeviceDescription_DebugString_Args* args);

/* A short description for users, e.g. "CpuDevice(id=0)"; owned by the description. */
struct PJRT_DeviceDescription_ToString_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_DeviceDescription* device_description;
  const char* to_string; /* out */
  size_t to_string_size; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_DeviceDescription_ToString_Args, to_string_size);

typedef PJRT_Error* PJRT_DeviceDescription_ToString(PJRT_DeviceDescription_ToString_Args* args);

/*------------------------------------------ Devices -------------------------------------------*/

/* Devices are owned by the client; every pointer returned here is borrowed. */

/* The device's description. */
struct PJRT_Device_GetDescription_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Device* device;
  PJRT_DeviceDescription* device_description; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Device_GetDescription_Args, device_description);

typedef PJRT_Error* PJRT_Device_GetDescription(PJRT_Device_GetDescription_Args* args);

/* Whether this process can run on the device. */
struct PJRT_Device_IsAddressable_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Device* device;
  bool is_addressable; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Device_IsAddressable_Args, is_addressable);

typedef PJRT_Error* PJRT_Device_IsAddressable(PJRT_Device_IsAddressable_Args* args);

/* The hardware index (the CUDA ordinal, the host device's number); -1 if there is none. */
struct PJRT_Device_LocalHardwareId_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Device* device;
  int local_hardware_id; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Device_LocalHardwareId_Args, local_hardware_id);

typedef PJRT_Error* PJRT_Device_LocalHardwareId(PJRT_Device_LocalHardwareId_Args* args);

/* The memories the device can address; the array is the client's. */
struct PJRT_Device_AddressableMemories_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Device* device;
  PJRT_Memory* const* memories; /* out */
  size_t num_memories;          /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Device_AddressableMemories_Args, num_memories);

typedef PJRT_Error* PJRT_Device_AddressableMemories(PJRT_Device_AddressableMemories_Args* args);

/* Where buffers for this device go unless a memory is named: its "device" memory. */
struct PJRT_Device_DefaultMemory_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Device* device;
  PJRT_Memory* memory; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Device_DefaultMemory_Args, memory);

typedef PJRT_Error* PJRT_Device_DefaultMemory(PJRT_Device_DefaultMemory_Args* args);

/* Allocator statistics; each optional one comes with an `_is_set` flag. */
struct PJRT_Device_MemoryStats_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Device* device;
  int64_t bytes_in_use;                 /* out */
  int64_t peak_bytes_in_use;            /* out */
  bool peak_bytes_in_use_is_set;        /* out */
  int64_t num_allocs;                   /* out */
  bool num_allocs_is_set;               /* out */
  int64_t largest_alloc_size;           /* out */
  bool largest_alloc_size_is_set;       /* out */
  int64_t bytes_limit;                  /* out */
  bool bytes_limit_is_set;              /* out */
  int64_t bytes_reserved;               /* out */
  bool bytes_reserved_is_set;           /* out */
  int64_t peak_bytes_reserved;          /* out */
  bool peak_bytes_reserved_is_set;      /* out */
  int64_t bytes_reservable_limit;       /* out */
  bool bytes_reservable_limit_is_set;   /* out */
  int64_t largest_free_block_bytes;     /* out */
  bool largest_free_block_bytes_is_set; /* out */
  int64_t pool_bytes;                   /* out */
  bool pool_bytes_is_set;               /* out */
  int64_t peak_pool_bytes;              /* out */
  bool peak_pool_bytes_is_set;          /* out */
  int64_t peak_allocated_bytes;         /* out */
  bool peak_allocated_bytes_is_set;     /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Device_MemoryStats_Args, peak_allocated_bytes_is_set);

typedef PJRT_Error* PJRT_Device_MemoryStats(PJRT_Device_MemoryStats_Args* args);

/* Resets the peak counters of PJRT_Device_MemoryStats. */
struct PJRT_Device_ClearMemoryStats_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Device* device;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Device_ClearMemoryStats_Args, device);

typedef PJRT_Error* PJRT_Device_ClearMemoryStats(PJRT_Device_ClearMemoryStats_Args* args);

/* Makes a pending execute with `launch_id` fail with the given error, if it has not finished. */
struct PJRT_Device_PoisonExecution_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Device* device;
  int32_t launch_id;
  PJRT_Error_Code error_code;
  const char* error_message;
  size_t error_message_size;
  bool poisoned; /* out */
  const PJRT_NamedValue* payload;
  size_t num_payload;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Device_PoisonExecution_Args, num_payload);

typedef PJRT_Error* PJRT_Device_PoisonExecution(PJRT_Device_PoisonExecution_Args* args);

typedef struct PJRT_Device_Attributes PJRT_Device_Attributes;

/* Device attributes; the caller frees them with `attributes_deleter`. */
struct PJRT_Device_GetAttributes_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Device* device;
  const PJRT_NamedValue* attributes;                                     /* out */
  size_t num_attributes;                                                 /* out */
  PJRT_Device_Attributes* device_attributes;                             /* out */
  void (*attributes_deleter)(PJRT_Device_Attributes* device_attributes); /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Device_GetAttributes_Args, attributes_deleter);

typedef PJRT_Error* PJRT_Device_GetAttributes(PJRT_Device_GetAttributes_Args* args);

/* An event that marks asynchronous work on a device for profiling; the caller destroys it. */
typedef struct PJRT_AsyncTrackingEvent PJRT_AsyncTrackingEvent;

/* Creates a tracking event with a description (copied). */
struct PJRT_Device_CreateAsyncTrackingEvent_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Device* device;
  const char* description;
  size_t description_size;
  PJRT_AsyncTrackingEvent* event; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Device_CreateAsyncTrackingEvent_Args, event);

typedef PJRT_Error* PJRT_Device_CreateAsyncTrackingEvent(
    PJRT_Device_CreateAsyncTrackingEvent_Args* args);

/* Frees a tracking event. */
struct PJRT_AsyncTrackingEvent_Destroy_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_AsyncTrackingEvent* event;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_AsyncTrackingEvent_Destroy_Args, event);

typedef PJRT_Error* PJRT_AsyncTrackingEvent_Destroy(PJRT_AsyncTrackingEvent_Destroy_Args* args);

/*------------------------------------------ Memories ------------------------------------------*/

/* A memory a device can address; owned by the client. */

/* The memory's id, unique among the client's memories. */
struct PJRT_Memory_Id_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Memory* memory;
  int id; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Memory_Id_Args, id);

typedef PJRT_Error* PJRT_Memory_Id(PJRT_Memory_Id_Args* args);

/* "device" or "pinned_host". */
struct PJRT_Memory_Kind_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Memory* memory;
  const char* kind; /* out */
  size_t kind_size; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Memory_Kind_Args, kind_size);

typedef PJRT_Error* PJRT_Memory_Kind(PJRT_Memory_Kind_Args* args);

/* A number for the memory kind, the same for every memory of that kind. */
struct PJRT_Memory_Kind_Id_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Memory* memory;
  int kind_id; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Memory_Kind_Id_Args, kind_id);

typedef PJRT_Error* PJRT_Memory_Kind_Id(PJRT_Memory_Kind_Id_Args* args);

/* A detailed description for error messages; owned by the memory. */
struct PJRT_Memory_DebugString_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Memory* memory;
  const char* debug_string; /* out */
  size_t debug_string_size; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Memory_DebugString_Args, debug_string_size);

typedef PJRT_Error* PJRT_Memory_DebugString(PJRT_Memory_DebugString_Args* args);

/* A short description for users; owned by the memory. */
struct PJRT_Memory_ToString_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Memory* memory;
  const char* to_string; /* out */
  size_t to_string_size; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Memory_ToString_Args, to_string_size);

typedef PJRT_Error* PJRT_Memory_ToString(PJRT_Memory_ToString_Args* args);

/* The devices that can address the memory; the array is the client's. */
struct PJRT_Memory_AddressableByDevices_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Memory* memory;
  PJRT_Device* const* devices; /* out */
  size_t num_devices;          /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Memory_AddressableByDevices_Args, num_devices);

typedef PJRT_Error* PJRT_Memory_AddressableByDevices(PJRT_Memory_AddressableByDevices_Args* args);

/*-------------------------------------- Execute contexts --------------------------------------*/

/* Caller-owned state handed to an execute, e.g. FFI user data for custom calls. */
typedef struct PJRT_ExecuteContext PJRT_ExecuteContext;

/* A new, empty execute context; the caller's. */
struct PJRT_ExecuteContext_Create_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_ExecuteContext* context; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_ExecuteContext_Create_Args, context);

typedef PJRT_Error* PJRT_ExecuteContext_Create(PJRT_ExecuteContext_Create_Args* args);

/* Frees an execute context; NULL is allowed. It must outlive the executes it was passed to. */
struct PJRT_ExecuteContext_Destroy_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_ExecuteContext* context;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_ExecuteContext_Destroy_Args, context);

typedef PJRT_Error* PJRT_ExecuteContext_Destroy(PJRT_ExecuteContext_Destroy_Args* args);

/*---------------------------------------- Executables -----------------------------------------*/

/* A PJRT_Executable is a compiled program; a PJRT_LoadedExecutable is one ready to run on the
 * client's devices. Both are the caller's. */

/* Frees an executable; NULL is allowed. */
struct PJRT_Executable_Destroy_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Executable* executable;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Executable_Destroy_Args, executable);

typedef PJRT_Error* PJRT_Executable_Destroy(PJRT_Executable_Destroy_Args* args);

/* Frees the loaded executable (and deletes it like PJRT_LoadedExecutable_Delete); NULL is
 * allowed. */
struct PJRT_LoadedExecutable_Destroy_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_LoadedExecutable* executable;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_LoadedExecutable_Destroy_Args, executable);

typedef PJRT_Error* PJRT_LoadedExecutable_Destroy(PJRT_LoadedExecutable_Destroy_Args* args);

/* A new PJRT_Executable (the caller's) for the compiled program behind a loaded one. */
struct PJRT_LoadedExecutable_GetExecutable_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_LoadedExecutable* loaded_executable;
  PJRT_Executable* executable; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_LoadedExecutable_GetExecutable_Args, executable);

typedef PJRT_Error* PJRT_LoadedExecutable_GetExecutable(
    PJRT_LoadedExecutable_GetExecutable_Args* args);

typedef struct PJRT_DeviceAssignmentSerialized PJRT_DeviceAssignmentSerialized;

/* The executable's DeviceAssignmentProto; freed with the deleter it comes with. */
struct PJRT_LoadedExecutable_GetDeviceAssignment_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_LoadedExecutable* executable;
  const char* serialized_bytes; /* out */
  size_t serialized_bytes_size; /* out */
  PJRT_DeviceAssignmentSerialized* serialized_device_assignment;
  void (*serialized_device_assignment_deleter)(PJRT_DeviceAssignmentSerialized* da); /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_LoadedExecutable_GetDeviceAssignment_Args,
                            serialized_device_assignment_deleter);

typedef PJRT_Error* PJRT_LoadedExecutable_GetDeviceAssignment(
    PJRT_LoadedExecutable_GetDeviceAssignment_Args* args);

/* The module's name, owned by the executable. */
struct PJRT_Executable_Name_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Executable* executable;
  const char* executable_name; /* out */
  size_t executable_name_size; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Executable_Name_Args, executable_name_size);

typedef PJRT_Error* PJRT_Executable_Name(PJRT_Executable_Name_Args* args);

/* From the compile options (1 unless set). */
struct PJRT_Executable_NumReplicas_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Executable* executable;
  size_t num_replicas; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Executable_NumReplicas_Args, num_replicas);

typedef PJRT_Error* PJRT_Executable_NumReplicas(PJRT_Executable_NumReplicas_Args* args);

/* From the compile options (1 unless set). */
struct PJRT_Executable_NumPartitions_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Executable* executable;
  size_t num_partitions; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Executable_NumPartitions_Args, num_partitions);

typedef PJRT_Error* PJRT_Executable_NumPartitions(PJRT_Executable_NumPartitions_Args* args);

typedef struct PJRT_LogicalDeviceIds {
  int replica;
  int partition;
} PJRT_LogicalDeviceIds;

/* The devices the executable runs on, in execute-argument order. */
struct PJRT_LoadedExecutable_AddressableDevices_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_LoadedExecutable* executable;
  PJRT_Device* const* addressable_devices; /* out */
  size_t num_addressable_devices;          /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_LoadedExecutable_AddressableDevices_Args, num_addressable_devices);

typedef PJRT_Error* PJRT_LoadedExecutable_AddressableDevices(
    PJRT_LoadedExecutable_AddressableDevices_Args* args);

/* The (replica, partition) each addressable device runs; the array lives as long as the
 * executable. */
struct PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_LoadedExecutable* executable;
  PJRT_LogicalDeviceIds* addressable_device_logical_ids; /* out */
  size_t num_addressable_device_logical_ids;             /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args,
                            num_addressable_device_logical_ids);

typedef PJRT_Error* PJRT_LoadedExecutable_AddressableDeviceLogicalIds(
    PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args* args);

/* The optimized HLO kiln will run. Called with `code` NULL to learn the size, then with a buffer
 * of that size. */
struct PJRT_Executable_OptimizedProgram_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Executable* executable;
  PJRT_Program* program; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Executable_OptimizedProgram_Args, program);

typedef PJRT_Error* PJRT_Executable_OptimizedProgram(PJRT_Executable_OptimizedProgram_Args* args);

/* Frees the executable's device resources; the handle stays valid but cannot execute. */
struct PJRT_LoadedExecutable_Delete_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_LoadedExecutable* executable;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_LoadedExecutable_Delete_Args, executable);

typedef PJRT_Error* PJRT_LoadedExecutable_Delete(PJRT_LoadedExecutable_Delete_Args* args);

/* Whether PJRT_LoadedExecutable_Delete was called. */
struct PJRT_LoadedExecutable_IsDeleted_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_LoadedExecutable* executable;
  bool is_deleted; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_LoadedExecutable_IsDeleted_Args, is_deleted);

typedef PJRT_Error* PJRT_LoadedExecutable_IsDeleted(PJRT_LoadedExecutable_IsDeleted_Args* args);

/*------------------------------------------ Execute -------------------------------------------*/

/* A piece of host data for send/recv callbacks; freed with its own deleter. */
typedef struct PJRT_Chunk {
  void* data;
  size_t size;
  void (*deleter)(void* data, void* deleter_arg);
  void* deleter_arg;
} PJRT_Chunk;

typedef struct PJRT_CopyToDeviceStream PJRT_CopyToDeviceStream;

typedef PJRT_Error* (*PJRT_SendCallback)(PJRT_Chunk* chunk, PJRT_CallbackError* callback_error,
                                         size_t total_size_in_bytes, bool done, void* user_arg);

typedef void (*PJRT_RecvCallback)(PJRT_CopyToDeviceStream* stream, void* user_arg);

struct PJRT_SendCallbackInfo {
  int64_t channel_id;
  void* user_arg;
  PJRT_SendCallback send_callback;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_SendCallbackInfo, send_callback);

struct PJRT_RecvCallbackInfo {
  int64_t channel_id;
  void* user_arg;
  PJRT_RecvCallback recv_callback;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_RecvCallbackInfo, recv_callback);

typedef void (*PJRT_HloOutputCallback)(int64_t replica_id, int64_t partition_id, const void* data,
                                       const int64_t* shape_dims, size_t shape_num_dims,
                                       PJRT_Buffer_Type shape_element_type, int64_t operand_index,
                                       void* user_arg);

typedef struct PJRT_HloOutputCallbackInfo {
  void* user_arg;
  PJRT_HloOutputCallback callback;
  int64_t callback_id;
  size_t num_operands;
} PJRT_HloOutputCallbackInfo;
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_HloOutputCallbackInfo, num_operands);

typedef struct PJRT_MultiSlice_Config PJRT_MultiSlice_Config;

/* Per-execute options: send/recv callbacks, launch id, inputs that must not be donated, the
 * execute context. */
struct PJRT_ExecuteOptions {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_SendCallbackInfo** send_callbacks;
  PJRT_RecvCallbackInfo** recv_callbacks;
  size_t num_send_ops;
  size_t num_recv_ops;
  int launch_id;
  const int64_t* non_donatable_input_indices;
  size_t num_non_donatable_input_indices;
  PJRT_ExecuteContext* context;
  const char* call_location;
  size_t num_tasks;
  int* task_ids;
  int64_t* incarnation_ids;
  PJRT_MultiSlice_Config* multi_slice_config;
  bool use_major_to_minor_data_layout_for_callbacks;
  PJRT_HloOutputCallbackInfo* hlo_output_callbacks;
  size_t num_hlo_output_callbacks;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_ExecuteOptions, num_hlo_output_callbacks);

/* Runs the executable: one argument list and one output list per device, outputs (the caller's)
 * written into arrays the caller provides, plus an optional completion event per device. Donated
 * inputs may be reused for outputs. */
struct PJRT_LoadedExecutable_Execute_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_LoadedExecutable* executable;
  PJRT_ExecuteOptions* options;
  PJRT_Buffer* const* const* argument_lists;
  size_t num_devices;
  size_t num_args;
  PJRT_Buffer** const* output_lists;
  PJRT_Event** device_complete_events;
  PJRT_Device* execute_device;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_LoadedExecutable_Execute_Args, execute_device);

typedef PJRT_Error* PJRT_LoadedExecutable_Execute(PJRT_LoadedExecutable_Execute_Args* args);

/* The number of outputs, tuples flattened. */
struct PJRT_Executable_NumOutputs_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Executable* executable;
  size_t num_outputs; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Executable_NumOutputs_Args, num_outputs);

typedef PJRT_Error* PJRT_Executable_NumOutputs(PJRT_Executable_NumOutputs_Args* args);

/* Size of the kernels generated so far (kiln generates them lazily). */
struct PJRT_Executable_SizeOfGeneratedCodeInBytes_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Executable* executable;
  int64_t size_in_bytes; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Executable_SizeOfGeneratedCodeInBytes_Args, size_in_bytes);

typedef PJRT_Error* PJRT_Executable_SizeOfGeneratedCodeInBytes(
    PJRT_Executable_SizeOfGeneratedCodeInBytes_Args* args);

/* A string that changes when the compiled program does; owned by the executable. */
struct PJRT_Executable_Fingerprint_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Executable* executable;
  const char* executable_fingerprint; /* out */
  size_t executable_fingerprint_size; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Executable_Fingerprint_Args, executable_fingerprint_size);

typedef PJRT_Error* PJRT_Executable_Fingerprint(PJRT_Executable_Fingerprint_Args* args);

/* Cost properties of the program; the array lives as long as the executable. */
struct PJRT_Executable_GetCostAnalysis_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Executable* executable;
  size_t num_properties;             /* out */
  const PJRT_NamedValue* properties; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Executable_GetCostAnalysis_Args, properties);

typedef PJRT_Error* PJRT_Executable_GetCostAnalysis(PJRT_Executable_GetCostAnalysis_Args* args);

/* Sizes of arguments, outputs, temporaries and generated code. */
struct PJRT_Executable_GetCompiledMemoryStats_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Executable* executable;
  int64_t generated_code_size_in_bytes;      /* out */
  int64_t argument_size_in_bytes;            /* out */
  int64_t output_size_in_bytes;              /* out */
  int64_t alias_size_in_bytes;               /* out */
  int64_t temp_size_in_bytes;                /* out */
  int64_t host_generated_code_size_in_bytes; /* out */
  int64_t host_argument_size_in_bytes;       /* out */
  int64_t host_output_size_in_bytes;         /* out */
  int64_t host_alias_size_in_bytes;          /* out */
  int64_t host_temp_size_in_bytes;           /* out */
  int64_t peak_memory_in_bytes;              /* out */
  int64_t total_size_in_bytes;               /* out */
  int64_t total_allocation_bytes;            /* out */
  int64_t indefinite_allocations;            /* out */
  int64_t peak_unpadded_heap_bytes;          /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Executable_GetCompiledMemoryStats_Args, peak_unpadded_heap_bytes);

typedef PJRT_Error* PJRT_Executable_GetCompiledMemoryStats(
    PJRT_Executable_GetCompiledMemoryStats_Args* args);

/* One element type per output; the array lives as long as the executable. */
struct PJRT_Executable_OutputElementTypes_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Executable* executable;
  PJRT_Buffer_Type* output_types; /* out */
  size_t num_output_types;        /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Executable_OutputElementTypes_Args, num_output_types);

typedef PJRT_Error* PJRT_Executable_OutputElementTypes(
    PJRT_Executable_OutputElementTypes_Args* args);

/* All outputs' dimensions concatenated, with each output's rank; arrays owned by the executable. */
struct PJRT_Executable_OutputDimensions_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Executable* executable;
  size_t num_outputs;
  const int64_t* dims;     /* out */
  const size_t* dim_sizes; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Executable_OutputDimensions_Args, dim_sizes);

typedef PJRT_Error* PJRT_Executable_OutputDimensions(PJRT_Executable_OutputDimensions_Args* args);

/* The memory kind of each parameter; owned by the executable. */
struct PJRT_Executable_ParameterMemoryKinds_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Executable* executable;
  size_t num_parameters;
  const char* const* memory_kinds; /* out */
  const size_t* memory_kind_sizes; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Executable_ParameterMemoryKinds_Args, memory_kind_sizes);

typedef PJRT_Error* PJRT_Executable_ParameterMemoryKinds(
    PJRT_Executable_ParameterMemoryKinds_Args* args);

/* The memory kind of each output ("device" unless the program says otherwise); owned by the
 * executable. */
struct PJRT_Executable_OutputMemoryKinds_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Executable* executable;
  size_t num_outputs;
  const char* const* memory_kinds; /* out */
  const size_t* memory_kind_sizes; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Executable_OutputMemoryKinds_Args, memory_kind_sizes);

typedef PJRT_Error* PJRT_Executable_OutputMemoryKinds(PJRT_Executable_OutputMemoryKinds_Args* args);

typedef struct PJRT_SerializedExecutable PJRT_SerializedExecutable;

typedef struct PJRT_SerializedCompileOptions PJRT_SerializedCompileOptions;

/* Bytes that PJRT_Executable_DeserializeAndLoad turns back into the executable; freed with the
 * deleter they come with. */
struct PJRT_Executable_Serialize_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const PJRT_Executable* executable;
  const char* serialized_bytes; /* out */
  size_t serialized_bytes_size; /* out */
  PJRT_SerializedExecutable* serialized_executable;
  void (*serialized_executable_deleter)(PJRT_SerializedExecutable* exec); /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Executable_Serialize_Args, serialized_executable_deleter);

typedef PJRT_Error* PJRT_Executable_Serialize(PJRT_Executable_Serialize_Args* args);

/* The CompileOptionsProto the executable was compiled with; freed with its deleter. */
struct PJRT_Executable_GetCompileOptions_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Executable* executable;
  const char* serialized_bytes; /* out */
  size_t serialized_bytes_size; /* out */
  PJRT_SerializedCompileOptions* serialized_compile_options;
  void (*serialized_compile_options_deleter)(PJRT_SerializedCompileOptions* options); /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Executable_GetCompileOptions_Args,
                            serialized_compile_options_deleter);

typedef PJRT_Error* PJRT_Executable_GetCompileOptions(PJRT_Executable_GetCompileOptions_Args* args);

struct PJRT_LoadOptions {
  size_t struct_size;
  const int32_t* computation_origin;
  size_t computation_origin_size;
  PJRT_MultiSlice_Config* multi_slice_config;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_LoadOptions, multi_slice_config);

/* Loads bytes from PJRT_Executable_Serialize; kiln refuses bytes from another kiln version. */
struct PJRT_Executable_DeserializeAndLoad_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  const char* serialized_executable;
  size_t serialized_executable_size;
  PJRT_LoadedExecutable* loaded_executable; /* out */
  const char* overridden_serialized_compile_options;
  size_t overridden_serialized_compile_options_size;
  PJRT_LoadOptions* load_options;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Executable_DeserializeAndLoad_Args, load_options);

typedef PJRT_Error* PJRT_Executable_DeserializeAndLoad(
    PJRT_Executable_DeserializeAndLoad_Args* args);

/* Older spelling of PJRT_Executable_Fingerprint. */
struct PJRT_LoadedExecutable_Fingerprint_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_LoadedExecutable* executable;
  const char* executable_fingerprint; /* out */
  size_t executable_fingerprint_size; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_LoadedExecutable_Fingerprint_Args, executable_fingerprint_size);

typedef PJRT_Error* PJRT_LoadedExecutable_Fingerprint(PJRT_LoadedExecutable_Fingerprint_Args* args);

/*-------------------------------- Buffer queries and transfers --------------------------------*/

/* Buffers are the caller's; the devices and memories they report are borrowed from the client. */

/* Frees the buffer (and its memory, once pending work on it is done); NULL is allowed. */
struct PJRT_Buffer_Destroy_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Buffer_Destroy_Args, buffer);

typedef PJRT_Error* PJRT_Buffer_Destroy(PJRT_Buffer_Destroy_Args* args);

/* The buffer's element type. */
struct PJRT_Buffer_ElementType_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  PJRT_Buffer_Type type; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Buffer_ElementType_Args, type);

typedef PJRT_Error* PJRT_Buffer_ElementType(PJRT_Buffer_ElementType_Args* args);

/* The buffer's dimensions; the array lives as long as the buffer. */
struct PJRT_Buffer_Dimensions_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  const int64_t* dims; /* out */
  size_t num_dims;     /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Buffer_Dimensions_Args, num_dims);

typedef PJRT_Error* PJRT_Buffer_Dimensions(PJRT_Buffer_Dimensions_Args* args);

/* The dimensions without padding (kiln never pads, so the same as PJRT_Buffer_Dimensions). */
struct PJRT_Buffer_UnpaddedDimensions_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  const int64_t* unpadded_dims; /* out */
  size_t num_dims;              /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Buffer_UnpaddedDimensions_Args, num_dims);

typedef PJRT_Error* PJRT_Buffer_UnpaddedDimensions(PJRT_Buffer_UnpaddedDimensions_Args* args);

/* Which dimensions are dynamic (none on kiln). */
struct PJRT_Buffer_DynamicDimensionIndices_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  const size_t* dynamic_dim_indices; /* out */
  size_t num_dynamic_dims;           /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Buffer_DynamicDimensionIndices_Args, num_dynamic_dims);

typedef PJRT_Error* PJRT_Buffer_DynamicDimensionIndices(
    PJRT_Buffer_DynamicDimensionIndices_Args* args);

/* The buffer's layout on the device. */
struct PJRT_Buffer_GetMemoryLayout_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  PJRT_Buffer_MemoryLayout layout; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Buffer_GetMemoryLayout_Args, layout);

typedef PJRT_Error* PJRT_Buffer_GetMemoryLayout(PJRT_Buffer_GetMemoryLayout_Args* args);

/* Copies the buffer into caller memory, in `host_layout` if given. With `dst` NULL, only reports
 * the size needed. The event (the caller's) completes when the copy has. */
struct PJRT_Buffer_ToHostBuffer_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* src;
  PJRT_Buffer_MemoryLayout* host_layout;
  void* dst;
  size_t dst_size;
  PJRT_Event* event; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Buffer_ToHostBuffer_Args, event);

typedef PJRT_Error* PJRT_Buffer_ToHostBuffer(PJRT_Buffer_ToHostBuffer_Args* args);

struct PJRT_Buffer_OnDeviceSizeInBytes_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  size_t on_device_size_in_bytes; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Buffer_OnDeviceSizeInBytes_Args, on_device_size_in_bytes);

typedef PJRT_Error* PJRT_Buffer_OnDeviceSizeInBytes(PJRT_Buffer_OnDeviceSizeInBytes_Args* args);

/* Frees the buffer's memory; the handle stays valid and PJRT_Buffer_IsDeleted says so. */
struct PJRT_Buffer_Delete_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Buffer_Delete_Args, buffer);

typedef PJRT_Error* PJRT_Buffer_Delete(PJRT_Buffer_Delete_Args* args);

/* Whether PJRT_Buffer_Delete was called (or the buffer was donated). */
struct PJRT_Buffer_IsDeleted_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  bool is_deleted; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Buffer_IsDeleted_Args, is_deleted);

typedef PJRT_Error* PJRT_Buffer_IsDeleted(PJRT_Buffer_IsDeleted_Args* args);

/* Copies `transfer_size` bytes from `offset` of the buffer's raw device memory. */
struct PJRT_Buffer_CopyRawToHost_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  void* dst;
  int64_t offset;
  int64_t transfer_size;
  PJRT_Event* event; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Buffer_CopyRawToHost_Args, event);

typedef PJRT_Error* PJRT_Buffer_CopyRawToHost(PJRT_Buffer_CopyRawToHost_Args* args);

struct PJRT_Buffer_CopyRawToHostFuture_Callback_Args {
  size_t struct_size;
  void* callback_data;
  PJRT_Error_Code error_code;
  const char* error_message;
  size_t error_message_size;
  void* dst;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Buffer_CopyRawToHostFuture_Callback_Args, dst);

/* Like PJRT_Buffer_CopyRawToHost, but the copy waits until the caller says `dst` is ready, by
 * calling the `future_ready_callback` kiln returns with `callback_data`. */
struct PJRT_Buffer_CopyRawToHostFuture_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  int64_t offset;
  int64_t transfer_size;
  PJRT_Event* event;                                                                  /* out */
  void* callback_data;                                                                /* out */
  void (*future_ready_callback)(PJRT_Buffer_CopyRawToHostFuture_Callback_Args* args); /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Buffer_CopyRawToHostFuture_Args, future_ready_callback);

typedef PJRT_Error* PJRT_Buffer_CopyRawToHostFuture(PJRT_Buffer_CopyRawToHostFuture_Args* args);

/* A copy of the buffer on another device; the caller's. */
struct PJRT_Buffer_CopyToDevice_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  PJRT_Device* dst_device;
  PJRT_Buffer* dst_buffer; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Buffer_CopyToDevice_Args, dst_buffer);

typedef PJRT_Error* PJRT_Buffer_CopyToDevice(PJRT_Buffer_CopyToDevice_Args* args);

/* A copy of the buffer in another memory; the caller's. */
struct PJRT_Buffer_CopyToMemory_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  PJRT_Memory* dst_memory;
  PJRT_Buffer* dst_buffer; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Buffer_CopyToMemory_Args, dst_buffer);

typedef PJRT_Error* PJRT_Buffer_CopyToMemory(PJRT_Buffer_CopyToMemory_Args* args);

/* A new buffer over the same memory with another type, shape or layout. */
struct PJRT_Buffer_Bitcast_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  PJRT_Buffer_Type element_type;
  const int64_t* dims;
  size_t num_dims;
  PJRT_Buffer_MemoryLayout* device_layout;
  PJRT_Buffer* out_buffer; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Buffer_Bitcast_Args, out_buffer);

typedef PJRT_Error* PJRT_Buffer_Bitcast(PJRT_Buffer_Bitcast_Args* args);

/* Whether the buffer lives in host memory (true on the host backend). */
struct PJRT_Buffer_IsOnCpu_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  bool is_on_cpu; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Buffer_IsOnCpu_Args, is_on_cpu);

typedef PJRT_Error* PJRT_Buffer_IsOnCpu(PJRT_Buffer_IsOnCpu_Args* args);

/* The buffer's device; borrowed from the client. */
struct PJRT_Buffer_Device_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  PJRT_Device* device; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Buffer_Device_Args, device);

typedef PJRT_Error* PJRT_Buffer_Device(PJRT_Buffer_Device_Args* args);

/* The buffer's memory; borrowed from the client. */
struct PJRT_Buffer_Memory_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  PJRT_Memory* memory; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Buffer_Memory_Args, memory);

typedef PJRT_Error* PJRT_Buffer_Memory(PJRT_Buffer_Memory_Args* args);

/* An event (the caller's) that completes when the buffer's contents are defined. */
struct PJRT_Buffer_ReadyEvent_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  PJRT_Event* event; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Buffer_ReadyEvent_Args, event);

typedef PJRT_Error* PJRT_Buffer_ReadyEvent(PJRT_Buffer_ReadyEvent_Args* args);

/* The device address of the buffer's memory. */
struct PJRT_Buffer_UnsafePointer_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  uintptr_t buffer_pointer; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Buffer_UnsafePointer_Args, buffer_pointer);

typedef PJRT_Error* PJRT_Buffer_UnsafePointer(PJRT_Buffer_UnsafePointer_Args* args);

/* Keeps the buffer's memory alive and in place for code outside PJRT (e.g. DLPack). */
struct PJRT_Buffer_IncreaseExternalReferenceCount_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Buffer_IncreaseExternalReferenceCount_Args, buffer);

typedef PJRT_Error* PJRT_Buffer_IncreaseExternalReferenceCount(
    PJRT_Buffer_IncreaseExternalReferenceCount_Args* args);

/* Undoes one PJRT_Buffer_IncreaseExternalReferenceCount. */
struct PJRT_Buffer_DecreaseExternalReferenceCount_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Buffer_DecreaseExternalReferenceCount_Args, buffer);

typedef PJRT_Error* PJRT_Buffer_DecreaseExternalReferenceCount(
    PJRT_Buffer_DecreaseExternalReferenceCount_Args* args);

/* The device memory pointer, for external readers. */
struct PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  void* device_memory_ptr; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args, device_memory_ptr);

typedef PJRT_Error* PJRT_Buffer_OpaqueDeviceMemoryDataPointer(
    PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args* args);

struct PJRT_Buffer_DonateWithControlDependency_Callback_Args {
  size_t struct_size;
  void* callback_data;
  PJRT_Error_Code error_code;
  const char* error_message;
  size_t error_message_size;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Buffer_DonateWithControlDependency_Callback_Args,
                            error_message_size);

/* A new buffer that takes over the memory of `buffer` once the caller signals, through
 * `dependency_ready_callback` and `callback_data`, that outside work on it is done. */
struct PJRT_Buffer_DonateWithControlDependency_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  void* callback_data; /* out */
  void (*dependency_ready_callback)(
      PJRT_Buffer_DonateWithControlDependency_Callback_Args* args); /* out */
  PJRT_Buffer* out_buffer;                                          /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Buffer_DonateWithControlDependency_Args, out_buffer);

typedef PJRT_Error* PJRT_Buffer_DonateWithControlDependency(
    PJRT_Buffer_DonateWithControlDependency_Args* args);

/*----------------------------------- Copy-to-device streams -----------------------------------*/

/* Streams that feed a recv callback's data to the device in chunks. */

/* Frees the stream. */
struct PJRT_CopyToDeviceStream_Destroy_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_CopyToDeviceStream* stream;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_CopyToDeviceStream_Destroy_Args, stream);

typedef PJRT_Error* PJRT_CopyToDeviceStream_Destroy(PJRT_CopyToDeviceStream_Destroy_Args* args);

/* Sends the next chunk (ownership passes to kiln); the event completes when it has been
 * consumed. */
struct PJRT_CopyToDeviceStream_AddChunk_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_CopyToDeviceStream* stream;
  PJRT_Chunk* chunk;
  PJRT_Event* transfer_complete; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_CopyToDeviceStream_AddChunk_Args, transfer_complete);

typedef PJRT_Error* PJRT_CopyToDeviceStream_AddChunk(PJRT_CopyToDeviceStream_AddChunk_Args* args);

/* How many bytes the stream expects in all. */
struct PJRT_CopyToDeviceStream_TotalBytes_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_CopyToDeviceStream* stream;
  int64_t total_bytes; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_CopyToDeviceStream_TotalBytes_Args, total_bytes);

typedef PJRT_Error* PJRT_CopyToDeviceStream_TotalBytes(
    PJRT_CopyToDeviceStream_TotalBytes_Args* args);

/* Every chunk's size must be a multiple of this. */
struct PJRT_CopyToDeviceStream_GranuleSize_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_CopyToDeviceStream* stream;
  int64_t granule_size_in_bytes; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_CopyToDeviceStream_GranuleSize_Args, granule_size_in_bytes);

typedef PJRT_Error* PJRT_CopyToDeviceStream_GranuleSize(
    PJRT_CopyToDeviceStream_GranuleSize_Args* args);

/* How many bytes have been sent so far. */
struct PJRT_CopyToDeviceStream_CurrentBytes_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_CopyToDeviceStream* stream;
  int64_t current_bytes; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_CopyToDeviceStream_CurrentBytes_Args, current_bytes);

typedef PJRT_Error* PJRT_CopyToDeviceStream_CurrentBytes(
    PJRT_CopyToDeviceStream_CurrentBytes_Args* args);

/*----------------------------------------- Topologies -----------------------------------------*/

/* A description of a set of devices, present or not, to compile for ahead of time. */

/* Creates a topology by platform name and options; the caller's. */
struct PJRT_TopologyDescription_Create_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const char* topology_name;
  size_t topology_name_size;
  const PJRT_NamedValue* create_options;
  size_t num_options;
  PJRT_TopologyDescription* topology; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_TopologyDescription_Create_Args, topology);

typedef PJRT_Error* PJRT_TopologyDescription_Create(PJRT_TopologyDescription_Create_Args* args);

/* Frees a topology the caller created; NULL is allowed. */
struct PJRT_TopologyDescription_Destroy_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_TopologyDescription* topology;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_TopologyDescription_Destroy_Args, topology);

typedef PJRT_Error* PJRT_TopologyDescription_Destroy(PJRT_TopologyDescription_Destroy_Args* args);

/* As PJRT_Client_PlatformVersion; owned by the topology. */
struct PJRT_TopologyDescription_PlatformVersion_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_TopologyDescription* topology;
  const char* platform_version; /* out */
  size_t platform_version_size; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_TopologyDescription_PlatformVersion_Args, platform_version_size);

typedef PJRT_Error* PJRT_TopologyDescription_PlatformVersion(
    PJRT_TopologyDescription_PlatformVersion_Args* args);

/* As PJRT_Client_PlatformName; owned by the topology. */
struct PJRT_TopologyDescription_PlatformName_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const PJRT_TopologyDescription* topology;
  const char* platform_name; /* out */
  size_t platform_name_size; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_TopologyDescription_PlatformName_Args, platform_name_size);

typedef PJRT_Error* PJRT_TopologyDescription_PlatformName(
    PJRT_TopologyDescription_PlatformName_Args* args);

/* Descriptions of every device of the topology; owned by it. */
struct PJRT_TopologyDescription_GetDeviceDescriptions_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const PJRT_TopologyDescription* topology;
  PJRT_DeviceDescription* const* descriptions; /* out */
  size_t num_descriptions;                     /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_TopologyDescription_GetDeviceDescriptions_Args, num_descriptions);

typedef PJRT_Error* PJRT_TopologyDescription_GetDeviceDescriptions(
    PJRT_TopologyDescription_GetDeviceDescriptions_Args* args);

typedef struct PJRT_SerializedTopology PJRT_SerializedTopology;

/* Bytes that PJRT_TopologyDescription_Deserialize turns back into the topology; freed with their
 * deleter. */
struct PJRT_TopologyDescription_Serialize_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_TopologyDescription* topology;
  const char* serialized_bytes;                                                      /* out */
  size_t serialized_bytes_size;                                                      /* out */
  PJRT_SerializedTopology* serialized_topology;                                      /* out */
  void (*serialized_topology_deleter)(PJRT_SerializedTopology* serialized_topology); /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_TopologyDescription_Serialize_Args, serialized_topology_deleter);

typedef PJRT_Error* PJRT_TopologyDescription_Serialize(
    PJRT_TopologyDescription_Serialize_Args* args);

/* A topology (the caller's) from PJRT_TopologyDescription_Serialize bytes. */
struct PJRT_TopologyDescription_Deserialize_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const char* serialized_topology;
  size_t serialized_topology_size;
  PJRT_TopologyDescription* topology; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_TopologyDescription_Deserialize_Args, topology);

typedef PJRT_Error* PJRT_TopologyDescription_Deserialize(
    PJRT_TopologyDescription_Deserialize_Args* args);

/* The topology's attributes; owned by it. */
struct PJRT_TopologyDescription_Attributes_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_TopologyDescription* topology;
  const PJRT_NamedValue* attributes; /* out */
  size_t num_attributes;             /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_TopologyDescription_Attributes_Args, num_attributes);

typedef PJRT_Error* PJRT_TopologyDescription_Attributes(
    PJRT_TopologyDescription_Attributes_Args* args);

/* A value that changes when the topology does. */
struct PJRT_TopologyDescription_Fingerprint_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const PJRT_TopologyDescription* topology;
  uint64_t fingerprint; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_TopologyDescription_Fingerprint_Args, fingerprint);

typedef PJRT_Error* PJRT_TopologyDescription_Fingerprint(
    PJRT_TopologyDescription_Fingerprint_Args* args);

/* The shape (a serialized ShapeProto, freed with its deleter) a value of the given type,
 * dimensions and optional layout has in a memory space. */
struct PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const PJRT_TopologyDescription* topology;
  int memory_space_kind_id;
  const int64_t* dims;
  size_t num_dims;
  PJRT_Buffer_Type element_type;
  const PJRT_Buffer_MemoryLayout* layout;
  const char* serialized_shape;                  /* out */
  size_t serialized_shape_size;                  /* out */
  void (*serialized_shape_deleter)(const char*); /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace_Args,
                            serialized_shape_deleter);

typedef PJRT_Error* PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace(
    PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace_Args* args);

/* The memory kind ids of the topology's memory spaces; owned by it. */
struct PJRT_TopologyDescription_GetMemorySpaceKindIds_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const PJRT_TopologyDescription* topology;
  const int* memory_space_kind_ids; /* out */
  size_t num_memory_space_kind_ids; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_TopologyDescription_GetMemorySpaceKindIds_Args,
                            num_memory_space_kind_ids);

typedef PJRT_Error* PJRT_TopologyDescription_GetMemorySpaceKindIds(
    PJRT_TopologyDescription_GetMemorySpaceKindIds_Args* args);

/* Compiles for a topology without a client; the executable is the caller's. */
struct PJRT_Compile_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const PJRT_TopologyDescription* topology;
  const PJRT_Program* program;
  const char* compile_options;
  size_t compile_options_size;
  PJRT_Client* client;
  PJRT_Executable* executable; /* out */
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_Compile_Args, executable);

typedef PJRT_Error* PJRT_Compile(PJRT_Compile_Args* args);

/*----------------------------------------- The table ------------------------------------------*/

/* What GetPjrtApi returns: header, version, then one function per slot in this fixed order (new
 * slots are only appended). kiln fills every slot; what it does not implement returns
 * UNIMPLEMENTED naming the function. */
typedef struct PJRT_Api {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Api_Version pjrt_api_version;
  KILN_ABI_SLOT(PJRT_Error_Destroy);
  KILN_ABI_SLOT(PJRT_Error_Message);
  KILN_ABI_SLOT(PJRT_Error_GetCode);
  KILN_ABI_SLOT(PJRT_Plugin_Initialize);
  KILN_ABI_SLOT(PJRT_Plugin_Attributes);
  KILN_ABI_SLOT(PJRT_Event_Destroy);
  KILN_ABI_SLOT(PJRT_Event_IsReady);
  KILN_ABI_SLOT(PJRT_Event_Error);
  KILN_ABI_SLOT(PJRT_Event_Await);
  KILN_ABI_SLOT(PJRT_Event_OnReady);
  KILN_ABI_SLOT(PJRT_Client_Create);
  KILN_ABI_SLOT(PJRT_Client_Destroy);
  KILN_ABI_SLOT(PJRT_Client_PlatformName);
  KILN_ABI_SLOT(PJRT_Client_ProcessIndex);
  KILN_ABI_SLOT(PJRT_Client_PlatformVersion);
  KILN_ABI_SLOT(PJRT_Client_Devices);
  KILN_ABI_SLOT(PJRT_Client_AddressableDevices);
  KILN_ABI_SLOT(PJRT_Client_LookupDevice);
  KILN_ABI_SLOT(PJRT_Client_LookupAddressableDevice);
  KILN_ABI_SLOT(PJRT_Client_AddressableMemories);
  KILN_ABI_SLOT(PJRT_Client_Compile);
  KILN_ABI_SLOT(PJRT_Client_DefaultDeviceAssignment);
  KILN_ABI_SLOT(PJRT_Client_BufferFromHostBuffer);
  KILN_ABI_SLOT(PJRT_DeviceDescription_Id);
  KILN_ABI_SLOT(PJRT_DeviceDescription_ProcessIndex);
  KILN_ABI_SLOT(PJRT_DeviceDescription_Attributes);
  KILN_ABI_SLOT(PJRT_DeviceDescription_Kind);
  KILN_ABI_SLOT(PJRT_DeviceDescription_DebugString);
  KILN_ABI_SLOT(PJRT_DeviceDescription_ToString);
  KILN_ABI_SLOT(PJRT_Device_GetDescription);
  KILN_ABI_SLOT(PJRT_Device_IsAddressable);
  KILN_ABI_SLOT(PJRT_Device_LocalHardwareId);
  KILN_ABI_SLOT(PJRT_Device_AddressableMemories);
  KILN_ABI_SLOT(PJRT_Device_DefaultMemory);
  KILN_ABI_SLOT(PJRT_Device_MemoryStats);
  KILN_ABI_SLOT(PJRT_Memory_Id);
  KILN_ABI_SLOT(PJRT_Memory_Kind);
  KILN_ABI_SLOT(PJRT_Memory_DebugString);
  KILN_ABI_SLOT(PJRT_Memory_ToString);
  KILN_ABI_SLOT(PJRT_Memory_AddressableByDevices);
  KILN_ABI_SLOT(PJRT_Executable_Destroy);
  KILN_ABI_SLOT(PJRT_Executable_Name);
  KILN_ABI_SLOT(PJRT_Executable_NumReplicas);
  KILN_ABI_SLOT(PJRT_Executable_NumPartitions);
  KILN_ABI_SLOT(PJRT_Executable_NumOutputs);
  KILN_ABI_SLOT(PJRT_Executable_SizeOfGeneratedCodeInBytes);
  KILN_ABI_SLOT(PJRT_Executable_GetCostAnalysis);
  KILN_ABI_SLOT(PJRT_Executable_OutputMemoryKinds);
  KILN_ABI_SLOT(PJRT_Executable_OptimizedProgram);
  KILN_ABI_SLOT(PJRT_Executable_Serialize);
  KILN_ABI_SLOT(PJRT_LoadedExecutable_Destroy);
  KILN_ABI_SLOT(PJRT_LoadedExecutable_GetExecutable);
  KILN_ABI_SLOT(PJRT_LoadedExecutable_AddressableDevices);
  KILN_ABI_SLOT(PJRT_LoadedExecutable_Delete);
  KILN_ABI_SLOT(PJRT_LoadedExecutable_IsDeleted);
  KILN_ABI_SLOT(PJRT_LoadedExecutable_Execute);
  KILN_ABI_SLOT(PJRT_Executable_DeserializeAndLoad);
  KILN_ABI_SLOT(PJRT_LoadedExecutable_Fingerprint);
  KILN_ABI_SLOT(PJRT_Buffer_Destroy);
  KILN_ABI_SLOT(PJRT_Buffer_ElementType);
  KILN_ABI_SLOT(PJRT_Buffer_Dimensions);
  KILN_ABI_SLOT(PJRT_Buffer_UnpaddedDimensions);
  KILN_ABI_SLOT(PJRT_Buffer_DynamicDimensionIndices);
  KILN_ABI_SLOT(PJRT_Buffer_GetMemoryLayout);
  KILN_ABI_SLOT(PJRT_Buffer_OnDeviceSizeInBytes);
  KILN_ABI_SLOT(PJRT_Buffer_Device);
  KILN_ABI_SLOT(PJRT_Buffer_Memory);
  KILN_ABI_SLOT(PJRT_Buffer_Delete);
  KILN_ABI_SLOT(PJRT_Buffer_IsDeleted);
  KILN_ABI_SLOT(PJRT_Buffer_CopyToDevice);
  KILN_ABI_SLOT(PJRT_Buffer_ToHostBuffer);
  KILN_ABI_SLOT(PJRT_Buffer_IsOnCpu);
  KILN_ABI_SLOT(PJRT_Buffer_ReadyEvent);
  KILN_ABI_SLOT(PJRT_Buffer_UnsafePointer);
  KILN_ABI_SLOT(PJRT_Buffer_IncreaseExternalReferenceCount);
  KILN_ABI_SLOT(PJRT_Buffer_DecreaseExternalReferenceCount);
  KILN_ABI_SLOT(PJRT_Buffer_OpaqueDeviceMemoryDataPointer);
  KILN_ABI_SLOT(PJRT_CopyToDeviceStream_Destroy);
  KILN_ABI_SLOT(PJRT_CopyToDeviceStream_AddChunk);
  KILN_ABI_SLOT(PJRT_CopyToDeviceStream_TotalBytes);
  KILN_ABI_SLOT(PJRT_CopyToDeviceStream_GranuleSize);
  KILN_ABI_SLOT(PJRT_CopyToDeviceStream_CurrentBytes);
  KILN_ABI_SLOT(PJRT_TopologyDescription_Create);
  KILN_ABI_SLOT(PJRT_TopologyDescription_Destroy);
  KILN_ABI_SLOT(PJRT_TopologyDescription_PlatformName);
  KILN_ABI_SLOT(PJRT_TopologyDescription_PlatformVersion);
  KILN_ABI_SLOT(PJRT_TopologyDescription_GetDeviceDescriptions);
  KILN_ABI_SLOT(PJRT_TopologyDescription_Serialize);
  KILN_ABI_SLOT(PJRT_TopologyDescription_Attributes);
  KILN_ABI_SLOT(PJRT_Compile);
  KILN_ABI_SLOT(PJRT_Executable_OutputElementTypes);
  KILN_ABI_SLOT(PJRT_Executable_OutputDimensions);
  KILN_ABI_SLOT(PJRT_Buffer_CopyToMemory);
  KILN_ABI_SLOT(PJRT_Client_CreateViewOfDeviceBuffer);
  KILN_ABI_SLOT(PJRT_Executable_Fingerprint);
  KILN_ABI_SLOT(PJRT_Client_TopologyDescription);
  KILN_ABI_SLOT(PJRT_Executable_GetCompiledMemoryStats);
  KILN_ABI_SLOT(PJRT_Memory_Kind_Id);
  KILN_ABI_SLOT(PJRT_ExecuteContext_Create);
  KILN_ABI_SLOT(PJRT_ExecuteContext_Destroy);
  KILN_ABI_SLOT(PJRT_Buffer_CopyRawToHost);
  KILN_ABI_SLOT(PJRT_AsyncHostToDeviceTransferManager_Destroy);
  KILN_ABI_SLOT(PJRT_AsyncHostToDeviceTransferManager_TransferData);
  KILN_ABI_SLOT(PJRT_Client_CreateBuffersForAsyncHostToDevice);
  KILN_ABI_SLOT(PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer);
  KILN_ABI_SLOT(PJRT_AsyncHostToDeviceTransferManager_Device);
  KILN_ABI_SLOT(PJRT_AsyncHostToDeviceTransferManager_BufferCount);
  KILN_ABI_SLOT(PJRT_AsyncHostToDeviceTransferManager_BufferSize);
  KILN_ABI_SLOT(PJRT_AsyncHostToDeviceTransferManager_SetBufferError);
  KILN_ABI_SLOT(PJRT_AsyncHostToDeviceTransferManager_AddMetadata);
  KILN_ABI_SLOT(PJRT_Client_DmaMap);
  KILN_ABI_SLOT(PJRT_Client_DmaUnmap);
  KILN_ABI_SLOT(PJRT_Client_CreateUninitializedBuffer);
  KILN_ABI_SLOT(PJRT_Client_UpdateGlobalProcessInfo);
  KILN_ABI_SLOT(PJRT_TopologyDescription_Deserialize);
  KILN_ABI_SLOT(PJRT_Client_CreateAliasBuffer);
  KILN_ABI_SLOT(PJRT_Client_FulfillAliasBuffer);
  KILN_ABI_SLOT(PJRT_LoadedExecutable_GetDeviceAssignment);
  KILN_ABI_SLOT(PJRT_Client_CreateErrorBuffer);
  KILN_ABI_SLOT(PJRT_AsyncHostToDeviceTransferManager_TransferLiteral);
  KILN_ABI_SLOT(PJRT_Buffer_CopyRawToHostFuture);
  KILN_ABI_SLOT(PJRT_Device_PoisonExecution);
  KILN_ABI_SLOT(PJRT_Device_CreateAsyncTrackingEvent);
  KILN_ABI_SLOT(PJRT_AsyncTrackingEvent_Destroy);
  KILN_ABI_SLOT(PJRT_Executable_GetCompileOptions);
  KILN_ABI_SLOT(PJRT_Buffer_DonateWithControlDependency);
  KILN_ABI_SLOT(PJRT_Event_Create);
  KILN_ABI_SLOT(PJRT_Event_Set);
  KILN_ABI_SLOT(PJRT_Device_GetAttributes);
  KILN_ABI_SLOT(PJRT_Client_Load);
  KILN_ABI_SLOT(PJRT_LoadedExecutable_AddressableDeviceLogicalIds);
  KILN_ABI_SLOT(PJRT_Buffer_Bitcast);
  KILN_ABI_SLOT(PJRT_Error_ForEachPayload);
  KILN_ABI_SLOT(PJRT_TopologyDescription_Fingerprint);
  KILN_ABI_SLOT(PJRT_Executable_ParameterMemoryKinds);
  KILN_ABI_SLOT(PJRT_Device_ClearMemoryStats);
  KILN_ABI_SLOT(PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace);
  KILN_ABI_SLOT(PJRT_TopologyDescription_GetMemorySpaceKindIds);
} PJRT_Api;

enum {
  PJRT_Api_STRUCT_SIZE =
      KILN_ABI_STRUCT_SIZE(PJRT_Api, PJRT_TopologyDescription_GetMemorySpaceKindIds)
};

/* The plugin's one entry point (besides the FFI symbols): a pointer to kiln's static
 * table, valid until the library is unloaded. Never NULL; the caller does not free it. */
KILN_ABI_EXPORT const PJRT_Api* GetPjrtApi(void);

#ifdef __cplusplus
}
#endif

#endif /* KILN_PJRT_C_API_H_ */
