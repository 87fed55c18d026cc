"""kiln: run XLA programs through any PJRT plugin, from Python, with ctypes and numpy only.

The package loads a PJRT plugin the way a framework does (``dlopen`` with ``RTLD_LOCAL``,
``GetPjrtApi()``, then only the function table) — kiln's ``libkiln_pjrt.so`` by default, any
other PJRT C API 0.x plugin by path::

    import numpy as np, kiln
    exe = kiln.compile(open("examples/gelu.hlo").read())   # HLO text, StableHLO, or bytes
    (y,) = exe(np.ones((6, 512, 4096), np.float32))          # numpy in, numpy out

    client = kiln.Client(platform="cpu")                   # or "cuda"
    print(client.devices())
    x = client.buffer(np.arange(6.0))                       # a device buffer
    print(x.shape, x.dtype, x.to_numpy())

Errors from the plugin are raised as ``kiln.PjrtError`` with the PJRT code name
(``e.code``, e.g. ``"INVALID_ARGUMENT"``) and the plugin's message.

dtypes: bool, int8..int64, uint8..uint64, float16, float32, float64, complex64, complex128;
bfloat16 as ``ml_dtypes.bfloat16`` when ml_dtypes is installed, otherwise bfloat16 results are
returned widened (exactly) to float32 and ``Client.buffer(x, dtype="bfloat16")`` rounds to
bfloat16 on upload.
"""
import ctypes
import os
import threading

import numpy as np

from . import _abi

__all__ = ["PjrtError", "Api", "Client", "Device", "Buffer", "Executable", "load", "compile",
           "devices"]

try:  # optional: numpy's bfloat16
    import ml_dtypes as _ml_dtypes
    _BF16 = np.dtype(_ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - depends on the machine
    _BF16 = None

_DTYPE_TO_TYPE = {np.dtype(name): code for name, code in _abi.BUFFER_TYPES.items()
                  if name != "bfloat16"}
if _BF16 is not None:
    _DTYPE_TO_TYPE[_BF16] = _abi.BUFFER_TYPES["bfloat16"]
_TYPE_TO_DTYPE = {code: dtype for dtype, code in _DTYPE_TO_TYPE.items()}
_TYPE_BF16 = _abi.BUFFER_TYPES["bfloat16"]

# A serialized CompileOptionsProto: executable_build_options { num_replicas: 1,
# num_partitions: 1 }, what a framework sends for one device.
ONE_DEVICE_COMPILE_OPTIONS = bytes([0x1A, 0x04, 0x20, 0x01, 0x28, 0x01])


class PjrtError(RuntimeError):
    """An error a PJRT call returned: ``code`` (the PJRT/absl code name), ``message``."""

    def __init__(self, code, message, function=None):
        self.code = code
        self.message = message
        self.function = function
        where = f"{function}: " if function else ""
        super().__init__(f"{where}{code}: {message}")


def _string(ptr, size):
    return ctypes.string_at(ptr, size).decode("utf-8", "replace") if size else ""


class Api:
    """One loaded plugin: its table, called by slot name. Thread-safe as the plugin is."""

    def __init__(self, path):
        self.path = path
        mode = getattr(os, "RTLD_NOW", 2) | getattr(os, "RTLD_LOCAL", 0)
        try:
            self._lib = ctypes.CDLL(path, mode=mode)
        except OSError as e:
            raise PjrtError("NOT_FOUND", f"cannot load the PJRT plugin {path}: {e}") from None
        try:
            get = self._lib.GetPjrtApi
        except AttributeError:
            raise PjrtError("NOT_FOUND", f"{path} has no GetPjrtApi") from None
        get.restype = ctypes.c_void_p
        get.argtypes = []
        self._table = get()
        if not self._table:
            raise PjrtError("INTERNAL", f"{path}: GetPjrtApi() returned NULL")
        header = _abi.ApiHeader.from_address(self._table)
        self.struct_size = header.struct_size
        self.version = (header.pjrt_api_version.major_version,
                        header.pjrt_api_version.minor_version)
        if self.version[0] != _abi.API_MAJOR:
            raise PjrtError("FAILED_PRECONDITION",
                            f"{path} speaks PJRT {self.version[0]}.{self.version[1]}; this "
                            f"package speaks {_abi.API_MAJOR}.x")
        self._fns = {}
        self._initialized = False
        self._lock = threading.Lock()

    def function(self, name):
        """The table's function `name` as a ctypes function of one args pointer."""
        fn = self._fns.get(name)
        if fn is not None:
            return fn
        index = _abi.SLOTS.index(name)
        offset = _abi.FIRST_SLOT_OFFSET + index * ctypes.sizeof(ctypes.c_void_p)
        if offset + ctypes.sizeof(ctypes.c_void_p) > self.struct_size:
            raise PjrtError("UNIMPLEMENTED",
                            f"the plugin's table ({self.struct_size} bytes) has no {name}")
        address = ctypes.c_void_p.from_address(self._table + offset).value
        if not address:
            raise PjrtError("UNIMPLEMENTED", f"the plugin's {name} slot is NULL")
        restype = None if name in _abi.VOID_SLOTS else ctypes.c_void_p
        fn = ctypes.CFUNCTYPE(restype, ctypes.c_void_p)(address)
        self._fns[name] = fn
        return fn

    def call(self, name, args):
        """Calls `name` with the args struct `args`; raises PjrtError if it returns an error."""
        error = self.function(name)(ctypes.addressof(args))
        if error:
            raise self.take_error(error, name)
        return args

    def take_error(self, error, function=None):
        """A PjrtError from the PJRT_Error* `error`, which it destroys."""
        get_code = _abi.ErrorGetCode(error=error)
        code_error = self.function("PJRT_Error_GetCode")(ctypes.addressof(get_code))
        code = get_code.code if not code_error else 2
        if code_error:
            self.function("PJRT_Error_Destroy")(ctypes.addressof(_abi.ErrorDestroy(error=code_error)))
        msg = _abi.ErrorMessage(error=error)
        self.function("PJRT_Error_Message")(ctypes.addressof(msg))
        message = _string(msg.message, msg.message_size)
        self.function("PJRT_Error_Destroy")(ctypes.addressof(_abi.ErrorDestroy(error=error)))
        name = _abi.ERROR_CODES[code] if 0 <= code < len(_abi.ERROR_CODES) else f"CODE_{code}"
        return PjrtError(name, message, function)

    def initialize(self):
        with self._lock:
            if not self._initialized:
                self.call("PJRT_Plugin_Initialize", _abi.PluginInitialize())
                self._initialized = True

    def attributes(self):
        """The plugin's attributes as a dict (PJRT_Plugin_Attributes)."""
        a = self.call("PJRT_Plugin_Attributes", _abi.PluginAttributes())
        return {_string(v.name, v.name_size): _named_value(v)
                for v in (a.attributes[i] for i in range(a.num_attributes))}

    def await_event(self, event, function):
        """Waits for `event`, destroys it, raises its error."""
        if not event:
            return
        try:
            self.call("PJRT_Event_Await", _abi.EventAwait(event=event))
        finally:
            self.call("PJRT_Event_Destroy", _abi.EventDestroy(event=event))

    def event_is_ready(self, event):
        """Whether `event` has happened (PJRT_Event_IsReady); does not wait."""
        return self.call("PJRT_Event_IsReady", _abi.EventIsReady(event=event)).is_ready

    def drop_event(self, event):
        """Destroys `event` without waiting for it (its outcome then reaches whoever reads
        what it guards)."""
        if event:
            self.call("PJRT_Event_Destroy", _abi.EventDestroy(event=event))

    def __repr__(self):
        return f"<PJRT plugin {self.path}, API {self.version[0]}.{self.version[1]}>"


def _named_value(v):
    if v.type == _abi.NAMED_STRING:
        return _string(v.value.string_value, v.value_size)
    if v.type == _abi.NAMED_INT64:
        return v.value.int64_value
    if v.type == _abi.NAMED_INT64_LIST:
        return [v.value.int64_array_value[i] for i in range(v.value_size)]
    if v.type == _abi.NAMED_FLOAT:
        return v.value.float_value
    if v.type == _abi.NAMED_BOOL:
        return v.value.bool_value
    return None


def _find_plugin():
    env = os.environ.get("KILN_PJRT_PLUGIN")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.path.join(here, "libkiln_pjrt.so"),
                  os.path.join(here, "..", "..", "build", "libkiln_pjrt.so")]
    for c in candidates:
        if os.path.exists(c):
            return os.path.normpath(c)
    return "libkiln_pjrt.so"  # the loader's search path


_apis = {}
_apis_lock = threading.Lock()


def load(path=None):
    """The plugin at `path` (loaded once per path): else $KILN_PJRT_PLUGIN, else
    libkiln_pjrt.so next to this package, else in the source tree's build/, else on the
    loader's search path."""
    path = path or _find_plugin()
    with _apis_lock:
        api = _apis.get(path)
        if api is None:
            api = _apis[path] = Api(path)
    api.initialize()
    return api


def _named_values(options):
    """PJRT_NamedValue array (and the objects it points into) from a dict."""
    values = (_abi.NamedValue * max(len(options), 1))()
    keep = []
    for v, (name, value) in zip(values, options.items()):
        key = name.encode()
        keep.append(key)
        v.struct_size = _abi.NamedValue.STRUCT_SIZE
        v.name, v.name_size = key, len(key)
        if isinstance(value, bool):
            v.type, v.value.bool_value, v.value_size = _abi.NAMED_BOOL, value, 1
        elif isinstance(value, int):
            v.type, v.value.int64_value, v.value_size = _abi.NAMED_INT64, value, 1
        elif isinstance(value, float):
            v.type, v.value.float_value, v.value_size = _abi.NAMED_FLOAT, value, 1
        elif isinstance(value, (list, tuple)):
            arr = (ctypes.c_int64 * max(len(value), 1))(*value)
            keep.append(arr)
            v.type, v.value_size = _abi.NAMED_INT64_LIST, len(value)
            v.value.int64_array_value = ctypes.cast(arr, ctypes.POINTER(ctypes.c_int64))
        else:
            s = str(value).encode()
            keep.append(s)
            v.type, v.value.string_value, v.value_size = _abi.NAMED_STRING, s, len(s)
    return values, keep


class Device:
    """An addressable device of a client."""

    def __init__(self, client, handle):
        self.client = client
        self.handle = handle
        api = client.api
        desc = api.call("PJRT_Device_GetDescription",
                        _abi.DeviceGetDescription(device=handle)).device_description
        self.id = api.call("PJRT_DeviceDescription_Id",
                           _abi.DeviceDescriptionId(device_description=desc)).id
        k = api.call("PJRT_DeviceDescription_Kind",
                     _abi.DeviceDescriptionString(device_description=desc))
        self.kind = _string(k.string, k.string_size)
        s = api.call("PJRT_DeviceDescription_ToString",
                     _abi.DeviceDescriptionString(device_description=desc))
        self.description = _string(s.string, s.string_size)

    def __repr__(self):
        return self.description or f"<Device {self.id} {self.kind}>"


class Client:
    """A PJRT client of a plugin (`plugin`: a path or a loaded Api; default: kiln's).
    `platform` and any other keyword become the client's named create options."""

    def __init__(self, platform=None, plugin=None, **options):
        self.api = plugin if isinstance(plugin, Api) else load(plugin)
        if platform is not None:
            options = dict(options, platform=platform)
        values, keep = _named_values(options)
        a = _abi.ClientCreate(create_options=values, num_options=len(options))
        self.api.call("PJRT_Client_Create", a)
        del keep
        self.handle = a.client
        n = self.api.call("PJRT_Client_PlatformName", _abi.ClientPlatformName(client=self.handle))
        self.platform = _string(n.platform_name, n.platform_name_size)
        d = self.api.call("PJRT_Client_AddressableDevices",
                          _abi.ClientAddressableDevices(client=self.handle))
        self._devices = [Device(self, d.addressable_devices[i])
                         for i in range(d.num_addressable_devices)]

    def devices(self):
        """The client's addressable devices."""
        return list(self._devices)

    def _device(self, device):
        if device is None:
            if not self._devices:
                raise PjrtError("NOT_FOUND", "the client has no addressable device")
            return self._devices[0]
        if isinstance(device, int):
            return self._devices[device]
        return device

    def buffer(self, array, device=None, dtype=None, copy=True):
        """Copies `array` (anything numpy.asarray takes) to `device` (default: the first):
        a Buffer. `dtype="bfloat16"` rounds a float array to bfloat16 without ml_dtypes.
        copy=False (kImmutableZeroCopy): a C-ordered numpy array of the right dtype is not
        copied where the plugin can use its memory as it is (kiln: the host platform, 16-byte
        aligned); the Buffer then keeps the array, which must not change while the Buffer
        lives, and the plugin never writes it (an execute it is donated to copies it).
        Otherwise, or where the plugin cannot, it is copied."""
        ptype, host = _to_host_array(array, dtype)
        dims = (ctypes.c_int64 * max(host.ndim, 1))(*host.shape)
        semantics = _abi.IMMUTABLE_ONLY_DURING_CALL if copy else _abi.IMMUTABLE_ZERO_COPY
        a = _abi.ClientBufferFromHostBuffer(
            client=self.handle, data=host.ctypes.data, type=ptype, dims=dims,
            num_dims=host.ndim, host_buffer_semantics=semantics,
            device=self._device(device).handle)
        self.api.call("PJRT_Client_BufferFromHostBuffer", a)
        buf = Buffer(self, a.buffer)
        done = a.done_with_host_buffer
        if copy or not done or self.api.event_is_ready(done):
            self.api.await_event(done, "PJRT_Client_BufferFromHostBuffer")
        else:  # the plugin reads `host` until the buffer's memory is released
            buf._host, buf._host_done = host, done
        return buf

    def compile(self, program, format=None, compile_options=b""):
        """Compiles `program` (str or bytes): format "hlo" (HLO text or a serialized
        HloModuleProto), "mlir" (StableHLO text or bytecode) or "hlo_with_config"; guessed
        from the text when not given. `compile_options`: a serialized CompileOptionsProto
        (empty: the plugin's defaults, one replica and one partition). An Executable."""
        code = program.encode() if isinstance(program, str) else bytes(program)
        fmt = (format or _guess_format(code)).encode()
        code_buf = ctypes.create_string_buffer(code, len(code))
        prog = _abi.Program(code=ctypes.addressof(code_buf), code_size=len(code), format=fmt,
                            format_size=len(fmt))
        opts = ctypes.create_string_buffer(compile_options, max(len(compile_options), 1))
        a = _abi.ClientCompile(client=self.handle, program=ctypes.pointer(prog),
                               compile_options=ctypes.addressof(opts),
                               compile_options_size=len(compile_options))
        self.api.call("PJRT_Client_Compile", a)
        return Executable(self, a.executable)

    def close(self):
        """Destroys the client (also done when it is garbage collected)."""
        if getattr(self, "handle", None):
            h, self.handle = self.handle, None
            self.api.call("PJRT_Client_Destroy", _abi.ClientDestroy(client=h))

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - nothing to report to at collection time
            pass

    def __repr__(self):
        return f"<kiln.Client {self.platform}, {len(self._devices)} device(s)>"


def _guess_format(code):
    head = code[:4096].lstrip()
    if head.startswith(b"ML\xefR"):  # MLIR bytecode
        return "mlir"
    if head.startswith(b"HloModule") or b"ENTRY" in code:
        return "hlo"
    if b"func.func" in head or head.startswith(b"module") or b"stablehlo." in code[:65536]:
        return "mlir"
    return "hlo"


def _c_order(a):
    """`a` in row-major order (np.ascontiguousarray would make a scalar 1-D)."""
    return a if a.flags.c_contiguous else a.copy(order="C")


def _is_bf16(dtype):
    if dtype is None:
        return False
    if isinstance(dtype, str):
        return dtype == "bfloat16"
    return _BF16 is not None and np.dtype(dtype) == _BF16


def _to_host_array(array, dtype):
    if _is_bf16(dtype):
        if _BF16 is not None:
            return _TYPE_BF16, _c_order(np.asarray(array, dtype=_BF16))
        f = _c_order(np.asarray(array, dtype=np.float32))
        u = f.view(np.uint32).astype(np.uint64)
        rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
        nan = np.isnan(f)
        rounded[nan] = 0x7FC0
        return _TYPE_BF16, rounded
    host = _c_order(np.asarray(array, dtype=dtype))
    ptype = _DTYPE_TO_TYPE.get(host.dtype)
    if ptype is None:
        raise PjrtError("INVALID_ARGUMENT", f"kiln: numpy dtype {host.dtype} has no PJRT type")
    return ptype, host


class Buffer:
    """An array on a device. `shape`, `dtype`, `to_numpy()`, `delete()`. An output of an
    execute may still be being computed: `is_ready` says whether it is, `block_until_ready()`
    waits (raising the run's error, as every read of a failed run's output does)."""

    def __init__(self, client, handle):
        self.client = client
        self.handle = handle
        self._ready = None  # is_ready's event, kept while not ready (guarded by _lock)
        self._lock = threading.Lock()
        # copy=False: the numpy array whose memory the buffer uses, and the event that says the
        # plugin is done with it (after the buffer and every run reading it are gone)
        self._host = None
        self._host_done = None

    @property
    def _api(self):
        return self.client.api

    @property
    def element_type(self):
        return self._api.call("PJRT_Buffer_ElementType",
                              _abi.BufferElementType(buffer=self.handle)).type

    @property
    def shape(self):
        d = self._api.call("PJRT_Buffer_Dimensions", _abi.BufferDimensions(buffer=self.handle))
        return tuple(d.dims[i] for i in range(d.num_dims))

    @property
    def dtype(self):
        t = self.element_type
        if t in _TYPE_TO_DTYPE:
            return _TYPE_TO_DTYPE[t]
        if t == _TYPE_BF16:
            return np.dtype(np.float32)  # widened on read without ml_dtypes
        raise PjrtError("UNIMPLEMENTED", f"kiln: PJRT buffer type {t} has no numpy dtype")

    def _ready_event(self):
        return self._api.call("PJRT_Buffer_ReadyEvent",
                              _abi.BufferReadyEvent(buffer=self.handle)).event

    @property
    def is_ready(self):
        """Whether the buffer's value is computed (or its computation failed); never waits.
        (One ready event per Buffer, kept while it is not ready: polling allocates nothing.)"""
        with self._lock:
            if self._ready is None:
                self._ready = self._ready_event()
            ready = self._api.event_is_ready(self._ready)
            if ready:
                self._api.drop_event(self._ready)
                self._ready = None
            return ready

    def block_until_ready(self):
        """Waits until the buffer's value is computed; raises PjrtError if its run failed.
        Returns the buffer."""
        self._api.await_event(self._ready_event(), "PJRT_Buffer_ReadyEvent")
        return self

    @property
    def is_deleted(self):
        return self._api.call("PJRT_Buffer_IsDeleted",
                              _abi.BufferIsDeleted(buffer=self.handle)).is_deleted

    def to_numpy(self):
        """The buffer's value as a new numpy array (row-major)."""
        t, shape = self.element_type, self.shape
        bf16_widen = t == _TYPE_BF16 and _BF16 is None
        if bf16_widen:
            out = np.empty(shape, np.uint16)
        else:
            out = np.empty(shape, self.dtype)
        layout = None
        if len(shape) >= 2:  # ask for row-major whatever the device layout is
            m2m = (ctypes.c_int64 * len(shape))(*range(len(shape) - 1, -1, -1))
            layout = _abi.MemoryLayout(type=_abi.LAYOUT_TILED)
            layout.u.tiled.struct_size = _abi.LayoutTiled.STRUCT_SIZE
            layout.u.tiled.minor_to_major = m2m
            layout.u.tiled.minor_to_major_size = len(shape)
        a = _abi.BufferToHostBuffer(src=self.handle,
                                    host_layout=ctypes.pointer(layout) if layout else None,
                                    dst=out.ctypes.data, dst_size=out.nbytes)
        self._api.call("PJRT_Buffer_ToHostBuffer", a)
        self._api.await_event(a.event, "PJRT_Buffer_ToHostBuffer")
        if bf16_widen:
            return (out.astype(np.uint32) << 16).view(np.float32)
        return out

    def __array__(self, dtype=None):
        a = self.to_numpy()
        return a if dtype is None else a.astype(dtype)

    def delete(self):
        """Frees the device memory now; the Buffer stays, deleted."""
        self._api.call("PJRT_Buffer_Delete", _abi.BufferHandle(buffer=self.handle))

    def close(self):
        lock = getattr(self, "_lock", None)
        if lock is not None:
            with lock:
                if self._ready is not None:
                    self._api.drop_event(self._ready)
                    self._ready = None
        if getattr(self, "handle", None):
            h, self.handle = self.handle, None
            self._api.call("PJRT_Buffer_Destroy", _abi.BufferHandle(buffer=h))
        done = getattr(self, "_host_done", None)
        if done:  # runs still reading the array end first; then it may go
            self._host_done = None
            self._api.await_event(done, "done_with_host_buffer")
            self._host = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass

    def __repr__(self):
        return f"<kiln.Buffer {self.dtype}{list(self.shape)}>"


class Executable:
    """A compiled program. Call it with numpy arrays or Buffers: a list of numpy arrays.
    `execute()` returns Buffers instead."""

    def __init__(self, client, handle):
        self.client = client
        self.handle = handle
        api = client.api
        info = api.call("PJRT_LoadedExecutable_GetExecutable",
                        _abi.LoadedExecutableGetExecutable(loaded_executable=handle)).executable
        try:
            self.num_outputs = api.call("PJRT_Executable_NumOutputs",
                                        _abi.ExecutableNumOutputs(executable=info)).num_outputs
            n = api.call("PJRT_Executable_Name", _abi.ExecutableName(executable=info))
            self.name = _string(n.executable_name, n.executable_name_size)
        finally:
            api.call("PJRT_Executable_Destroy", _abi.ExecutableDestroy(executable=info))

    def execute(self, *args, device=None):
        """Runs once on `device` (default: the client's first): the output Buffers, returned
        as soon as the run is enqueued (as JAX's dispatch does): the next call's Python
        overlaps this run. A run's failure is raised by whatever reads its outputs
        (`to_numpy()`, `block_until_ready()`); a later execute taking them fails too, in its
        call or (queued) through its own outputs. A program without outputs is awaited here,
        so its failure is raised by this call."""
        dev = self.client._device(device)
        bufs = [a if isinstance(a, Buffer) else self.client.buffer(a, device=dev) for a in args]
        arg_list = (ctypes.c_void_p * max(len(bufs), 1))(*[b.handle for b in bufs])
        arg_lists = (ctypes.POINTER(ctypes.c_void_p) * 1)(
            ctypes.cast(arg_list, ctypes.POINTER(ctypes.c_void_p)))
        out_list = (ctypes.c_void_p * max(self.num_outputs, 1))()
        out_lists = (ctypes.POINTER(ctypes.c_void_p) * 1)(
            ctypes.cast(out_list, ctypes.POINTER(ctypes.c_void_p)))
        events = (ctypes.c_void_p * 1)()
        opts = _abi.ExecuteOptions()
        a = _abi.LoadedExecutableExecute(
            executable=self.handle, options=ctypes.pointer(opts), argument_lists=arg_lists,
            num_devices=1, num_args=len(bufs), output_lists=out_lists,
            device_complete_events=events, execute_device=dev.handle)
        api = self.client.api
        api.call("PJRT_LoadedExecutable_Execute", a)
        outs = [Buffer(self.client, out_list[i]) for i in range(self.num_outputs)]
        if outs:
            api.drop_event(events[0])
        else:
            api.await_event(events[0], "PJRT_LoadedExecutable_Execute")
        return outs

    def __call__(self, *args, device=None):
        return [b.to_numpy() for b in self.execute(*args, device=device)]

    def close(self):
        if getattr(self, "handle", None):
            h, self.handle = self.handle, None
            self.client.api.call("PJRT_LoadedExecutable_Destroy",
                                 _abi.LoadedExecutableDestroy(executable=h))

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass

    def __repr__(self):
        return f"<kiln.Executable {self.name}, {self.num_outputs} output(s)>"


_default_clients = {}
_default_lock = threading.Lock()


def _default_client(platform=None):
    with _default_lock:
        c = _default_clients.get(platform)
        if c is None:
            c = _default_clients[platform] = Client(platform=platform)
        return c


def compile(program, format=None, platform=None):  # noqa: A001 - the package's verb
    """Compiles `program` on a shared default client: an Executable, `exe(*arrays)`."""
    return _default_client(platform).compile(program, format=format)


def devices(platform=None):
    """The default client's devices."""
    return _default_client(platform).devices()
