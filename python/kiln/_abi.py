"""The PJRT C API 0.114 as ctypes sees it: the table's slot order and the args structs the
package uses, written from the ABI (every args struct starts with ``struct_size`` and
``extension_start``; ``STRUCT_SIZE`` is the offset of the last member plus its size, as the
C header's ``*_STRUCT_SIZE`` is).

Only layouts live here; kiln/__init__.py drives them.
"""
import ctypes
from ctypes import (POINTER, Structure, Union, c_bool, c_char_p, c_float, c_int, c_int64,
                    c_size_t, c_void_p)

API_MAJOR = 0
API_MINOR = 114

# The 138 function slots of PJRT_Api 0.114, in table order (from offset 40, one pointer each).
SLOTS = (
    "PJRT_Error_Destroy",
    "PJRT_Error_Message",
    "PJRT_Error_GetCode",
    "PJRT_Plugin_Initialize",
    "PJRT_Plugin_Attributes",
    "PJRT_Event_Destroy",
    "PJRT_Event_IsReady",
    "PJRT_Event_Error",
    "PJRT_Event_Await",
    "PJRT_Event_OnReady",
    "PJRT_Client_Create",
    "PJRT_Client_Destroy",
    "PJRT_Client_PlatformName",
    "PJRT_Client_ProcessIndex",
    "PJRT_Client_PlatformVersion",
    "PJRT_Client_Devices",
    "PJRT_Client_AddressableDevices",
    "PJRT_Client_LookupDevice",
    "PJRT_Client_LookupAddressableDevice",
    "PJRT_Client_AddressableMemories",
    "PJRT_Client_Compile",
    "PJRT_Client_DefaultDeviceAssignment",
    "PJRT_Client_BufferFromHostBuffer",
    "PJRT_DeviceDescription_Id",
    "PJRT_DeviceDescription_ProcessIndex",
    "PJRT_DeviceDescription_Attributes",
    "PJRT_DeviceDescription_Kind",
    "PJRT_DeviceDescription_DebugString",
    "PJRT_DeviceDescription_ToString",
    "PJRT_Device_GetDescription",
    "PJRT_Device_IsAddressable",
    "PJRT_Device_LocalHardwareId",
    "PJRT_Device_AddressableMemories",
    "PJRT_Device_DefaultMemory",
    "PJRT_Device_MemoryStats",
    "PJRT_Memory_Id",
    "PJRT_Memory_Kind",
    "PJRT_Memory_DebugString",
    "PJRT_Memory_ToString",
    "PJRT_Memory_AddressableByDevices",
    "PJRT_Executable_Destroy",
    "PJRT_Executable_Name",
    "PJRT_Executable_NumReplicas",
    "PJRT_Executable_NumPartitions",
    "PJRT_Executable_NumOutputs",
    "PJRT_Executable_SizeOfGeneratedCodeInBytes",
    "PJRT_Executable_GetCostAnalysis",
    "PJRT_Executable_OutputMemoryKinds",
    "PJRT_Executable_OptimizedProgram",
    "PJRT_Executable_Serialize",
    "PJRT_LoadedExecutable_Destroy",
    "PJRT_LoadedExecutable_GetExecutable",
    "PJRT_LoadedExecutable_AddressableDevices",
    "PJRT_LoadedExecutable_Delete",
    "PJRT_LoadedExecutable_IsDeleted",
    "PJRT_LoadedExecutable_Execute",
    "PJRT_Executable_DeserializeAndLoad",
    "PJRT_LoadedExecutable_Fingerprint",
    "PJRT_Buffer_Destroy",
    "PJRT_Buffer_ElementType",
    "PJRT_Buffer_Dimensions",
    "PJRT_Buffer_UnpaddedDimensions",
    "PJRT_Buffer_DynamicDimensionIndices",
    "PJRT_Buffer_GetMemoryLayout",
    "PJRT_Buffer_OnDeviceSizeInBytes",
    "PJRT_Buffer_Device",
    "PJRT_Buffer_Memory",
    "PJRT_Buffer_Delete",
    "PJRT_Buffer_IsDeleted",
    "PJRT_Buffer_CopyToDevice",
    "PJRT_Buffer_ToHostBuffer",
    "PJRT_Buffer_IsOnCpu",
    "PJRT_Buffer_ReadyEvent",
    "PJRT_Buffer_UnsafePointer",
    "PJRT_Buffer_IncreaseExternalReferenceCount",
    "PJRT_Buffer_DecreaseExternalReferenceCount",
    "PJRT_Buffer_OpaqueDeviceMemoryDataPointer",
    "PJRT_CopyToDeviceStream_Destroy",
    "PJRT_CopyToDeviceStream_AddChunk",
    "PJRT_CopyToDeviceStream_TotalBytes",
    "PJRT_CopyToDeviceStream_GranuleSize",
    "PJRT_CopyToDeviceStream_CurrentBytes",
    "PJRT_TopologyDescription_Create",
    "PJRT_TopologyDescription_Destroy",
    "PJRT_TopologyDescription_PlatformName",
    "PJRT_TopologyDescription_PlatformVersion",
    "PJRT_TopologyDescription_GetDeviceDescriptions",
    "PJRT_TopologyDescription_Serialize",
    "PJRT_TopologyDescription_Attributes",
    "PJRT_Compile",
    "PJRT_Executable_OutputElementTypes",
    "PJRT_Executable_OutputDimensions",
    "PJRT_Buffer_CopyToMemory",
    "PJRT_Client_CreateViewOfDeviceBuffer",
    "PJRT_Executable_Fingerprint",
    "PJRT_Client_TopologyDescription",
    "PJRT_Executable_GetCompiledMemoryStats",
    "PJRT_Memory_Kind_Id",
    "PJRT_ExecuteContext_Create",
    "PJRT_ExecuteContext_Destroy",
    "PJRT_Buffer_CopyRawToHost",
    "PJRT_AsyncHostToDeviceTransferManager_Destroy",
    "PJRT_AsyncHostToDeviceTransferManager_TransferData",
    "PJRT_Client_CreateBuffersForAsyncHostToDevice",
    "PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer",
    "PJRT_AsyncHostToDeviceTransferManager_Device",
    "PJRT_AsyncHostToDeviceTransferManager_BufferCount",
    "PJRT_AsyncHostToDeviceTransferManager_BufferSize",
    "PJRT_AsyncHostToDeviceTransferManager_SetBufferError",
    "PJRT_AsyncHostToDeviceTransferManager_AddMetadata",
    "PJRT_Client_DmaMap",
    "PJRT_Client_DmaUnmap",
    "PJRT_Client_CreateUninitializedBuffer",
    "PJRT_Client_UpdateGlobalProcessInfo",
    "PJRT_TopologyDescription_Deserialize",
    "PJRT_Client_CreateAliasBuffer",
    "PJRT_Client_FulfillAliasBuffer",
    "PJRT_LoadedExecutable_GetDeviceAssignment",
    "PJRT_Client_CreateErrorBuffer",
    "PJRT_AsyncHostToDeviceTransferManager_TransferLiteral",
    "PJRT_Buffer_CopyRawToHostFuture",
    "PJRT_Device_PoisonExecution",
    "PJRT_Device_CreateAsyncTrackingEvent",
    "PJRT_AsyncTrackingEvent_Destroy",
    "PJRT_Executable_GetCompileOptions",
    "PJRT_Buffer_DonateWithControlDependency",
    "PJRT_Event_Create",
    "PJRT_Event_Set",
    "PJRT_Device_GetAttributes",
    "PJRT_Client_Load",
    "PJRT_LoadedExecutable_AddressableDeviceLogicalIds",
    "PJRT_Buffer_Bitcast",
    "PJRT_Error_ForEachPayload",
    "PJRT_TopologyDescription_Fingerprint",
    "PJRT_Executable_ParameterMemoryKinds",
    "PJRT_Device_ClearMemoryStats",
    "PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace",
    "PJRT_TopologyDescription_GetMemorySpaceKindIds",
)
assert len(SLOTS) == 138
VOID_SLOTS = ("PJRT_Error_Destroy", "PJRT_Error_Message")

# absl / PJRT error codes.
ERROR_CODES = ("OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
               "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
               "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL",
               "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED")

# PJRT_Buffer_Type numbers of the types the package converts to and from numpy.
BUFFER_TYPES = {
    "bool": 1, "int8": 2, "int16": 3, "int32": 4, "int64": 5, "uint8": 6, "uint16": 7,
    "uint32": 8, "uint64": 9, "float16": 10, "float32": 11, "float64": 12, "bfloat16": 13,
    "complex64": 14, "complex128": 15,
}

# PJRT_NamedValue_Type
NAMED_STRING, NAMED_INT64, NAMED_INT64_LIST, NAMED_FLOAT, NAMED_BOOL = range(5)
# PJRT_HostBufferSemantics
IMMUTABLE_ONLY_DURING_CALL = 0
IMMUTABLE_ZERO_COPY = 2
# PJRT_Buffer_MemoryLayout_Type
LAYOUT_TILED = 0


class ArgsStruct(Structure):
    """An args struct: ``struct_size`` is filled in, other members from keywords."""

    def __init__(self, **kwargs):
        super().__init__(struct_size=type(self).STRUCT_SIZE, **kwargs)


def _args(name, fields, base=ArgsStruct):
    cls = type(name, (base,), {
        "_fields_": [("struct_size", c_size_t), ("extension_start", c_void_p)] + fields})
    last_name, last_type = cls._fields_[-1][:2]
    cls.STRUCT_SIZE = getattr(cls, last_name).offset + ctypes.sizeof(last_type)
    return cls


class ApiVersion(Structure):
    _fields_ = [("struct_size", c_size_t), ("extension_start", c_void_p),
                ("major_version", c_int), ("minor_version", c_int)]


class ApiHeader(Structure):
    """The head of PJRT_Api; the function slots follow at ``FIRST_SLOT_OFFSET``."""
    _fields_ = [("struct_size", c_size_t), ("extension_start", c_void_p),
                ("pjrt_api_version", ApiVersion)]


FIRST_SLOT_OFFSET = ctypes.sizeof(ApiHeader)
API_STRUCT_SIZE = FIRST_SLOT_OFFSET + len(SLOTS) * ctypes.sizeof(c_void_p)
assert FIRST_SLOT_OFFSET == 40 and API_STRUCT_SIZE == 1144


class _NamedValueUnion(Union):
    _fields_ = [("string_value", c_char_p), ("int64_value", c_int64),
                ("int64_array_value", POINTER(c_int64)), ("float_value", c_float),
                ("bool_value", c_bool)]


NamedValue = _args("NamedValue", [
    ("name", c_char_p), ("name_size", c_size_t), ("type", c_int), ("value", _NamedValueUnion),
    ("value_size", c_size_t)])

ErrorDestroy = _args("ErrorDestroy", [("error", c_void_p)])
ErrorMessage = _args("ErrorMessage", [
    ("error", c_void_p), ("message", ctypes.POINTER(ctypes.c_char)), ("message_size", c_size_t)])
ErrorGetCode = _args("ErrorGetCode", [("error", c_void_p), ("code", c_int)])
PluginInitialize = _args("PluginInitialize", [])
PluginAttributes = _args("PluginAttributes", [
    ("attributes", POINTER(NamedValue)), ("num_attributes", c_size_t)])

EventDestroy = _args("EventDestroy", [("event", c_void_p)])
EventAwait = _args("EventAwait", [("event", c_void_p)])
EventIsReady = _args("EventIsReady", [("event", c_void_p), ("is_ready", c_bool)])

ClientCreate = _args("ClientCreate", [
    ("create_options", POINTER(NamedValue)), ("num_options", c_size_t),
    ("kv_get_callback", c_void_p), ("kv_get_user_arg", c_void_p),
    ("kv_put_callback", c_void_p), ("kv_put_user_arg", c_void_p),
    ("client", c_void_p), ("kv_try_get_callback", c_void_p), ("kv_try_get_user_arg", c_void_p)])
ClientDestroy = _args("ClientDestroy", [("client", c_void_p)])
ClientPlatformName = _args("ClientPlatformName", [
    ("client", c_void_p), ("platform_name", ctypes.POINTER(ctypes.c_char)),
    ("platform_name_size", c_size_t)])
ClientAddressableDevices = _args("ClientAddressableDevices", [
    ("client", c_void_p), ("addressable_devices", POINTER(c_void_p)),
    ("num_addressable_devices", c_size_t)])


class Program(ArgsStruct):
    _fields_ = [("struct_size", c_size_t), ("extension_start", c_void_p),
                ("code", c_void_p), ("code_size", c_size_t), ("format", c_char_p),
                ("format_size", c_size_t)]


Program.STRUCT_SIZE = Program.format_size.offset + ctypes.sizeof(c_size_t)

ClientCompile = _args("ClientCompile", [
    ("client", c_void_p), ("program", POINTER(Program)), ("compile_options", c_void_p),
    ("compile_options_size", c_size_t), ("executable", c_void_p)])


class LayoutTiled(Structure):
    _fields_ = [("struct_size", c_size_t), ("extension_start", c_void_p),
                ("minor_to_major", POINTER(c_int64)), ("minor_to_major_size", c_size_t),
                ("tile_dims", POINTER(c_int64)), ("tile_dim_sizes", POINTER(c_size_t)),
                ("num_tiles", c_size_t)]


LayoutTiled.STRUCT_SIZE = LayoutTiled.num_tiles.offset + ctypes.sizeof(c_size_t)


class LayoutStrides(Structure):
    _fields_ = [("struct_size", c_size_t), ("extension_start", c_void_p),
                ("byte_strides", POINTER(c_int64)), ("num_byte_strides", c_size_t)]


class _LayoutUnion(Union):
    _fields_ = [("tiled", LayoutTiled), ("strides", LayoutStrides)]


MemoryLayout = _args("MemoryLayout", [("u", _LayoutUnion), ("type", c_int)])

ClientBufferFromHostBuffer = _args("ClientBufferFromHostBuffer", [
    ("client", c_void_p), ("data", c_void_p), ("type", c_int), ("dims", POINTER(c_int64)),
    ("num_dims", c_size_t), ("byte_strides", POINTER(c_int64)), ("num_byte_strides", c_size_t),
    ("host_buffer_semantics", c_int), ("device", c_void_p), ("memory", c_void_p),
    ("device_layout", POINTER(MemoryLayout)), ("done_with_host_buffer", c_void_p),
    ("buffer", c_void_p)])

DeviceGetDescription = _args("DeviceGetDescription", [
    ("device", c_void_p), ("device_description", c_void_p)])
DeviceDescriptionId = _args("DeviceDescriptionId", [("device_description", c_void_p), ("id", c_int)])
DeviceDescriptionString = _args("DeviceDescriptionString", [
    ("device_description", c_void_p), ("string", ctypes.POINTER(ctypes.c_char)),
    ("string_size", c_size_t)])  # Kind, DebugString and ToString share this layout

ExecutableDestroy = _args("ExecutableDestroy", [("executable", c_void_p)])
ExecutableName = _args("ExecutableName", [
    ("executable", c_void_p), ("executable_name", ctypes.POINTER(ctypes.c_char)),
    ("executable_name_size", c_size_t)])
ExecutableNumOutputs = _args("ExecutableNumOutputs", [
    ("executable", c_void_p), ("num_outputs", c_size_t)])
LoadedExecutableDestroy = _args("LoadedExecutableDestroy", [("executable", c_void_p)])
LoadedExecutableGetExecutable = _args("LoadedExecutableGetExecutable", [
    ("loaded_executable", c_void_p), ("executable", c_void_p)])

ExecuteOptions = _args("ExecuteOptions", [
    ("send_callbacks", c_void_p), ("recv_callbacks", c_void_p), ("num_send_ops", c_size_t),
    ("num_recv_ops", c_size_t), ("launch_id", c_int),
    ("non_donatable_input_indices", POINTER(c_int64)),
    ("num_non_donatable_input_indices", c_size_t), ("context", c_void_p),
    ("call_location", c_char_p), ("num_tasks", c_size_t), ("task_ids", POINTER(c_int)),
    ("incarnation_ids", POINTER(c_int64)), ("multi_slice_config", c_void_p),
    ("use_major_to_minor_data_layout_for_callbacks", c_bool),
    ("hlo_output_callbacks", c_void_p), ("num_hlo_output_callbacks", c_size_t)])
LoadedExecutableExecute = _args("LoadedExecutableExecute", [
    ("executable", c_void_p), ("options", POINTER(ExecuteOptions)),
    ("argument_lists", POINTER(POINTER(c_void_p))), ("num_devices", c_size_t),
    ("num_args", c_size_t), ("output_lists", POINTER(POINTER(c_void_p))),
    ("device_complete_events", POINTER(c_void_p)), ("execute_device", c_void_p)])

BufferHandle = _args("BufferHandle", [("buffer", c_void_p)])  # Destroy and Delete
BufferElementType = _args("BufferElementType", [("buffer", c_void_p), ("type", c_int)])
BufferDimensions = _args("BufferDimensions", [
    ("buffer", c_void_p), ("dims", POINTER(c_int64)), ("num_dims", c_size_t)])
BufferIsDeleted = _args("BufferIsDeleted", [("buffer", c_void_p), ("is_deleted", c_bool)])
BufferDevice = _args("BufferDevice", [("buffer", c_void_p), ("device", c_void_p)])
BufferReadyEvent = _args("BufferReadyEvent", [("buffer", c_void_p), ("event", c_void_p)])
BufferToHostBuffer = _args("BufferToHostBuffer", [
    ("src", c_void_p), ("host_layout", POINTER(MemoryLayout)), ("dst", c_void_p),
    ("dst_size", c_size_t), ("event", c_void_p)])
