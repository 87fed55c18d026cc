"""Tests of the kiln Python package against the plugin ($KILN_PJRT_PLUGIN, else the one kiln.load
finds). Run with Debian's python (numpy from python3-numpy):

    KILN_PJRT_PLUGIN=build/libkiln_pjrt.so PYTHONPATH=python /usr/bin/python3 python/tests/test_kiln.py

Exits 77 (skipped) when numpy is not importable.
"""
import os
import sys
import unittest

try:
    import numpy as np
except ImportError:
    print("skipped: numpy is not importable by", sys.executable,
          "(install Debian's python3-numpy)")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import kiln  # noqa: E402
from kiln import _abi  # noqa: E402

SOURCE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")

GELU_F32 = """HloModule gelu_f32

ENTRY main {
  x = f32[4,256] parameter(0)
  half = f32[] constant(0.5)
  one = f32[] constant(1)
  c = f32[] constant(0.7978845608)
  k = f32[] constant(0.044715)
  bhalf = f32[4,256] broadcast(half), dimensions={}
  bone = f32[4,256] broadcast(one), dimensions={}
  bc = f32[4,256] broadcast(c), dimensions={}
  bk = f32[4,256] broadcast(k), dimensions={}
  x2 = f32[4,256] multiply(x, x)
  x3 = f32[4,256] multiply(x2, x)
  kx3 = f32[4,256] multiply(bk, x3)
  inner = f32[4,256] add(x, kx3)
  scaled = f32[4,256] multiply(bc, inner)
  t = f32[4,256] tanh(scaled)
  onept = f32[4,256] add(bone, t)
  h = f32[4,256] multiply(bhalf, onept)
  ROOT y = f32[4,256] multiply(x, h)
}
"""

TUPLE = """HloModule sum_and_product

ENTRY main {
  a = f32[3,5] parameter(0)
  b = f32[3,5] parameter(1)
  s = f32[3,5] add(a, b)
  p = f32[3,5] multiply(a, b)
  n = s32[] constant(7)
  ROOT t = (f32[3,5], f32[3,5], s32[]) tuple(s, p, n)
}
"""

ADD_ONE = """HloModule add_one

ENTRY main {
  x = s32[6] parameter(0)
  one = s32[] constant(1)
  b = s32[6] broadcast(one), dimensions={}
  ROOT y = s32[6] add(x, b)
}
"""

# jax.shard_map under Shardy on a one-device mesh, as StableHLO text (generic form): x * x
# per shard, then a psum over the manual axis.
SHARD_MAP = """sdy.mesh @mesh = <["x"=1]>
func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  %0 = "sdy.manual_computation"(%arg0) <{in_shardings = #sdy.sharding_per_value<[<@mesh, [{"x"}]>]>, manual_axes = #sdy<manual_axes{"x"}>, out_shardings = #sdy.sharding_per_value<[<@mesh, [{"x"}]>]>}> ({
  ^bb0(%arg1: tensor<8xf32>):
    %1 = stablehlo.multiply %arg1, %arg1 : tensor<8xf32>
    %2 = "stablehlo.all_reduce"(%1) <{replica_groups = dense<[[0]]> : tensor<1x1xi64>, channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, use_global_device_ids}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<8xf32>) -> tensor<8xf32>
    "sdy.return"(%2) : (tensor<8xf32>) -> ()
  }) : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
"""

BAD = """HloModule bad

ENTRY main {
  x = f32[2] parameter(0)
  ROOT y = f32[2] bogus(x)
}
"""


def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))


# jaxlib's typed-FFI LAPACK calls as JAX emits them on CPU (column-major layouts; the flags
# are ASCII: uplo 'L' = 76, side 'L' = 76, trans_x 'N' = 78 / 'T' = 84, diag 'N' = 78).
CHO_SOLVE = """
func.func @main(%a: tensor<5x5xf64>, %b: tensor<5x2xf64>) -> (tensor<5x5xf64>, tensor<i32>, tensor<5x2xf64>) {
  %0:2 = stablehlo.custom_call @lapack_dpotrf_ffi(%a) {mhlo.backend_config = {uplo = 76 : ui8}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>], output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, operand_tuple_indices = []>], result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<> : tensor<0xindex>]} : (tensor<5x5xf64>) -> (tensor<5x5xf64>, tensor<i32>)
  %one = stablehlo.constant dense<1.0> : tensor<f64>
  %y = stablehlo.custom_call @lapack_dtrsm_ffi(%0#0, %b, %one) {mhlo.backend_config = {diag = 78 : ui8, side = 76 : ui8, trans_x = 78 : ui8, uplo = 76 : ui8}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<[0, 1]> : tensor<2xindex>, dense<> : tensor<0xindex>], result_layouts = [dense<[0, 1]> : tensor<2xindex>]} : (tensor<5x5xf64>, tensor<5x2xf64>, tensor<f64>) -> tensor<5x2xf64>
  %x = stablehlo.custom_call @lapack_dtrsm_ffi(%0#0, %y, %one) {mhlo.backend_config = {diag = 78 : ui8, side = 76 : ui8, trans_x = 84 : ui8, uplo = 76 : ui8}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<[0, 1]> : tensor<2xindex>, dense<> : tensor<0xindex>], result_layouts = [dense<[0, 1]> : tensor<2xindex>]} : (tensor<5x5xf64>, tensor<5x2xf64>, tensor<f64>) -> tensor<5x2xf64>
  func.return %0#0, %0#1, %x : tensor<5x5xf64>, tensor<i32>, tensor<5x2xf64>
}
"""

EIGH_SVD = """
func.func @main(%a: tensor<6x6xf64>, %b: tensor<7x4xf64>) -> (tensor<6x6xf64>, tensor<6xf64>, tensor<i32>, tensor<4xf64>, tensor<7x4xf64>, tensor<4x4xf64>, tensor<i32>) {
  %0:3 = stablehlo.custom_call @lapack_dsyevd_ffi(%a) {mhlo.backend_config = {mode = 86 : ui8, uplo = 76 : ui8}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>], output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, operand_tuple_indices = []>], result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<0> : tensor<1xindex>, dense<> : tensor<0xindex>]} : (tensor<6x6xf64>) -> (tensor<6x6xf64>, tensor<6xf64>, tensor<i32>)
  %1:5 = stablehlo.custom_call @lapack_dgesdd_ffi(%b) {mhlo.backend_config = {mode = 83 : ui8}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>], output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, operand_tuple_indices = []>], result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<0> : tensor<1xindex>, dense<[0, 1]> : tensor<2xindex>, dense<[0, 1]> : tensor<2xindex>, dense<> : tensor<0xindex>]} : (tensor<7x4xf64>) -> (tensor<7x4xf64>, tensor<4xf64>, tensor<7x4xf64>, tensor<4x4xf64>, tensor<i32>)
  func.return %0#0, %0#1, %0#2, %1#1, %1#2, %1#3, %1#4 : tensor<6x6xf64>, tensor<6xf64>, tensor<i32>, tensor<4xf64>, tensor<7x4xf64>, tensor<4x4xf64>, tensor<i32>
}
"""

GETRF = """
func.func @main(%a: tensor<2x4x4xf32>) -> (tensor<2x4x4xf32>, tensor<2x4xi32>, tensor<2xi32>) {
  %0:3 = stablehlo.custom_call @lapack_sgetrf_ffi(%a) {mhlo.backend_config = {}, operand_layouts = [dense<[1, 2, 0]> : tensor<3xindex>], output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, operand_tuple_indices = []>], result_layouts = [dense<[1, 2, 0]> : tensor<3xindex>, dense<[1, 0]> : tensor<2xindex>, dense<0> : tensor<1xindex>]} : (tensor<2x4x4xf32>) -> (tensor<2x4x4xf32>, tensor<2x4xi32>, tensor<2xi32>)
  func.return %0#0, %0#1, %0#2 : tensor<2x4x4xf32>, tensor<2x4xi32>, tensor<2xi32>
}
"""

# The complex forms: cho_solve of a Hermitian system (trans_x 'C' = 67: A^H) and eigh.
ZCHO_SOLVE_EIGH = """
func.func @main(%a: tensor<4x4xcomplex<f64>>, %b: tensor<4x3xcomplex<f64>>) -> (tensor<4x3xcomplex<f64>>, tensor<4x4xcomplex<f64>>, tensor<4xf64>) {
  %0:2 = stablehlo.custom_call @lapack_zpotrf_ffi(%a) {mhlo.backend_config = {uplo = 76 : ui8}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>], result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<> : tensor<0xindex>]} : (tensor<4x4xcomplex<f64>>) -> (tensor<4x4xcomplex<f64>>, tensor<i32>)
  %one = stablehlo.constant dense<(1.0, 0.0)> : tensor<complex<f64>>
  %y = stablehlo.custom_call @lapack_ztrsm_ffi(%0#0, %b, %one) {mhlo.backend_config = {diag = 78 : ui8, side = 76 : ui8, trans_x = 78 : ui8, uplo = 76 : ui8}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<[0, 1]> : tensor<2xindex>, dense<> : tensor<0xindex>], result_layouts = [dense<[0, 1]> : tensor<2xindex>]} : (tensor<4x4xcomplex<f64>>, tensor<4x3xcomplex<f64>>, tensor<complex<f64>>) -> tensor<4x3xcomplex<f64>>
  %x = stablehlo.custom_call @lapack_ztrsm_ffi(%0#0, %y, %one) {mhlo.backend_config = {diag = 78 : ui8, side = 76 : ui8, trans_x = 67 : ui8, uplo = 76 : ui8}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<[0, 1]> : tensor<2xindex>, dense<> : tensor<0xindex>], result_layouts = [dense<[0, 1]> : tensor<2xindex>]} : (tensor<4x4xcomplex<f64>>, tensor<4x3xcomplex<f64>>, tensor<complex<f64>>) -> tensor<4x3xcomplex<f64>>
  %1:3 = stablehlo.custom_call @lapack_zheevd_ffi(%a) {mhlo.backend_config = {mode = 86 : ui8, uplo = 76 : ui8}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>], result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<0> : tensor<1xindex>, dense<> : tensor<0xindex>]} : (tensor<4x4xcomplex<f64>>) -> (tensor<4x4xcomplex<f64>>, tensor<4xf64>, tensor<i32>)
  func.return %x, %1#0, %1#1 : tensor<4x3xcomplex<f64>>, tensor<4x4xcomplex<f64>>, tensor<4xf64>
}
"""
# jnp.linalg.eig of a real matrix: (wr, wi, vl, vr, info), the vectors complex.
EIG = """
func.func @main(%a: tensor<6x6xf64>) -> (tensor<6xf64>, tensor<6xf64>, tensor<6x6xcomplex<f64>>, tensor<i32>) {
  %0:5 = stablehlo.custom_call @lapack_dgeev_ffi(%a) {mhlo.backend_config = {compute_left = 78 : ui8, compute_right = 86 : ui8}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>], result_layouts = [dense<0> : tensor<1xindex>, dense<0> : tensor<1xindex>, dense<[0, 1]> : tensor<2xindex>, dense<[0, 1]> : tensor<2xindex>, dense<> : tensor<0xindex>]} : (tensor<6x6xf64>) -> (tensor<6xf64>, tensor<6xf64>, tensor<6x6xcomplex<f64>>, tensor<6x6xcomplex<f64>>, tensor<i32>)
  func.return %0#0, %0#1, %0#3, %0#4 : tensor<6xf64>, tensor<6xf64>, tensor<6x6xcomplex<f64>>, tensor<i32>
}
"""
# jax.scipy.linalg.schur(a, output='complex') (what sqrtm runs): (t, vs, w, sdim, info).
SCHUR = """
func.func @main(%a: tensor<5x5xcomplex<f64>>) -> (tensor<5x5xcomplex<f64>>, tensor<5x5xcomplex<f64>>, tensor<i32>) {
  %0:5 = stablehlo.custom_call @lapack_zgees_ffi(%a) {mhlo.backend_config = {mode = 86 : ui8, sort = 78 : ui8}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>], output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, operand_tuple_indices = []>], result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<[0, 1]> : tensor<2xindex>, dense<0> : tensor<1xindex>, dense<> : tensor<0xindex>, dense<> : tensor<0xindex>]} : (tensor<5x5xcomplex<f64>>) -> (tensor<5x5xcomplex<f64>>, tensor<5x5xcomplex<f64>>, tensor<5xcomplex<f64>>, tensor<i32>, tensor<i32>)
  func.return %0#0, %0#1, %0#4 : tensor<5x5xcomplex<f64>>, tensor<5x5xcomplex<f64>>, tensor<i32>
}
"""
# jax.scipy.linalg.schur(a) of a real matrix: (t, vs, wr, wi, sdim, info).
REAL_SCHUR = """
func.func @main(%a: tensor<6x6xf32>) -> (tensor<6x6xf32>, tensor<6x6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<i32>) {
  %0:6 = stablehlo.custom_call @lapack_sgees_ffi(%a) {mhlo.backend_config = {mode = 86 : ui8, sort = 78 : ui8}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>], output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, operand_tuple_indices = []>], result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<[0, 1]> : tensor<2xindex>, dense<0> : tensor<1xindex>, dense<0> : tensor<1xindex>, dense<> : tensor<0xindex>, dense<> : tensor<0xindex>]} : (tensor<6x6xf32>) -> (tensor<6x6xf32>, tensor<6x6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<i32>, tensor<i32>)
  func.return %0#0, %0#1, %0#2, %0#3, %0#5 : tensor<6x6xf32>, tensor<6x6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<i32>
}
"""

class AbiTest(unittest.TestCase):
    def test_struct_sizes_are_the_c_headers(self):
        # *_STRUCT_SIZE of OpenXLA's pjrt_c_api.h 0.114 on x86-64.
        expected = {
            "NamedValue": 56, "ClientCreate": 88, "ClientBufferFromHostBuffer": 120,
            "ExecuteOptions": 144, "LoadedExecutableExecute": 80, "BufferToHostBuffer": 56,
            "MemoryLayout": 76, "ClientCompile": 56, "ErrorMessage": 40, "Program": 48,
            "LayoutTiled": 56, "DeviceDescriptionString": 40, "ExecutableName": 40,
            "PluginInitialize": 16, "ErrorGetCode": 28, "PluginAttributes": 32,
            "BufferIsDeleted": 25, "DeviceGetDescription": 32, "DeviceDescriptionId": 28,
            "BufferDimensions": 40, "BufferElementType": 28, "ExecutableNumOutputs": 32,
            "EventIsReady": 25, "BufferReadyEvent": 32,
        }
        for name, size in expected.items():
            self.assertEqual(getattr(_abi, name).STRUCT_SIZE, size, name)

    def test_plugin_table_is_0_114(self):
        api = kiln.load()
        self.assertEqual(api.version, (0, 114))
        self.assertEqual(api.struct_size, 1144)
        for name in _abi.SLOTS:
            self.assertIsNotNone(api.function(name))

    def test_plugin_attributes_name_the_versions(self):
        attrs = kiln.load().attributes()
        self.assertIn("xla_version", attrs)
        self.assertIn("stablehlo_current_version", attrs)


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.client = kiln.Client(platform=os.environ.get("KILN_TEST_PLATFORM", "cpu"))

    def test_devices(self):
        devices = self.client.devices()
        self.assertGreater(len(devices), 0)
        self.assertEqual(len({d.id for d in devices}), len(devices))
        for d in devices:
            self.assertTrue(d.kind)
        self.assertIn(self.client.platform, ("cpu", "cuda"))

    def test_gelu_matches_numpy(self):
        x = np.linspace(-4, 4, 4 * 256, dtype=np.float32).reshape(4, 256)
        exe = self.client.compile(GELU_F32)
        self.assertEqual(exe.num_outputs, 1)
        (y,) = exe(x)
        self.assertEqual(y.shape, (4, 256))
        self.assertEqual(y.dtype, np.float32)
        np.testing.assert_allclose(y, gelu(x.astype(np.float64)), rtol=2e-5, atol=2e-6)

    def test_shard_map_on_one_device_runs_its_body(self):
        x = np.arange(8, dtype=np.float32) - 3.5
        (y,) = self.client.compile(SHARD_MAP)(x)
        np.testing.assert_array_equal(y, x * x)

    def test_cho_solve_through_jaxs_cpu_lapack_targets(self):
        # jax.scipy.linalg.cho_factor + cho_solve as JAX lowers them for a CPU plugin.
        rng = np.random.default_rng(3)
        m = rng.standard_normal((5, 5))
        a = m @ m.T + 5 * np.eye(5)
        b = rng.standard_normal((5, 2))
        l, info, x = self.client.compile(CHO_SOLVE)(a, b)
        self.assertEqual(int(info), 0)
        np.testing.assert_allclose(np.tril(l), np.linalg.cholesky(a), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=1e-10, atol=1e-12)

    def test_lu_through_jaxs_cpu_lapack_target(self):
        rng = np.random.default_rng(4)
        a = rng.standard_normal((2, 4, 4)).astype(np.float32)
        lu, piv, info = self.client.compile(GETRF)(a)
        np.testing.assert_array_equal(info, [0, 0])
        for k in range(2):
            p = np.arange(4)
            for i, j in enumerate(piv[k] - 1):  # LAPACK's 1-based row swaps
                p[[i, j]] = p[[j, i]]
            lower = np.tril(lu[k], -1) + np.eye(4, dtype=np.float32)
            np.testing.assert_allclose(lower @ np.triu(lu[k]), a[k][p], rtol=1e-5, atol=1e-5)

    def test_eigh_and_svd_through_jaxs_cpu_lapack_targets(self):
        rng = np.random.default_rng(5)
        m = rng.standard_normal((6, 6))
        a = m + m.T
        b = rng.standard_normal((7, 4))
        v, w, info, s, u, vt, info2 = self.client.compile(EIGH_SVD)(a, b)
        self.assertEqual((int(info), int(info2)), (0, 0))
        np.testing.assert_allclose(w, np.linalg.eigvalsh(a), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(v @ np.diag(w) @ v.T, a, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(s, np.linalg.svd(b, compute_uv=False), rtol=1e-12)
        np.testing.assert_allclose(u @ np.diag(s) @ vt, b, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(u.T @ u, np.eye(4), atol=1e-12)

    def test_complex_solve_and_eigh_through_jaxs_cpu_lapack_targets(self):
        rng = np.random.default_rng(6)
        m = rng.standard_normal((4, 4)) + 1j * rng.standard_normal((4, 4))
        a = m @ m.conj().T + 4 * np.eye(4)
        b = rng.standard_normal((4, 3)) + 1j * rng.standard_normal((4, 3))
        x, v, w = self.client.compile(ZCHO_SOLVE_EIGH)(a, b)
        np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(w, np.linalg.eigvalsh(a), rtol=1e-12)
        np.testing.assert_allclose(v @ np.diag(w) @ v.conj().T, a, rtol=1e-12, atol=1e-12)

    def test_eig_through_jaxs_cpu_lapack_target(self):
        rng = np.random.default_rng(7)
        a = rng.standard_normal((6, 6))
        wr, wi, vr, info = self.client.compile(EIG)(a)
        self.assertEqual(int(info), 0)
        w = wr + 1j * wi
        key = lambda z: (round(z.real, 9), round(z.imag, 9))
        np.testing.assert_allclose(sorted(w, key=key), sorted(np.linalg.eigvals(a), key=key),
                                   rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(a @ vr, vr * w, rtol=1e-10, atol=1e-12)

    def test_complex_schur_and_sqrtm_through_jaxs_cpu_lapack_target(self):
        rng = np.random.default_rng(8)
        a = rng.standard_normal((5, 5)) + 1j * rng.standard_normal((5, 5))
        t, z, info = self.client.compile(SCHUR)(a)
        self.assertEqual(int(info), 0)
        np.testing.assert_array_equal(np.tril(t, -1), 0)
        np.testing.assert_allclose(z @ t @ z.conj().T, a, rtol=1e-12, atol=1e-12)
        # sqrtm as jax.scipy.linalg does from the Schur form: R upper triangular, R R = T.
        r = np.zeros_like(t)
        for j in range(5):
            r[j, j] = np.sqrt(t[j, j])
            for i in range(j - 1, -1, -1):
                s = r[i, i + 1:j] @ r[i + 1:j, j]
                r[i, j] = (t[i, j] - s) / (r[i, i] + r[j, j])
        root = z @ r @ z.conj().T
        np.testing.assert_allclose(root @ root, a, rtol=1e-10, atol=1e-10)

    def test_real_schur_through_jaxs_cpu_lapack_target(self):
        rng = np.random.default_rng(9)
        a = rng.standard_normal((6, 6)).astype(np.float32)
        t, z, wr, wi, info = self.client.compile(REAL_SCHUR)(a)
        self.assertEqual(int(info), 0)
        np.testing.assert_array_equal(np.tril(t, -2), 0)
        np.testing.assert_allclose(z @ t @ z.T, a, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(z.T @ z, np.eye(6), atol=1e-5)
        key = lambda v: (round(float(v.real), 4), round(float(v.imag), 4))
        np.testing.assert_allclose(sorted(wr + 1j * wi, key=key),
                                   sorted(np.linalg.eigvals(a.astype(np.float64)), key=key),
                                   rtol=1e-4, atol=1e-4)

    def test_example_gelu_in_bfloat16(self):
        with open(os.path.join(SOURCE_DIR, "examples", "gelu.hlo")) as f:
            exe = self.client.compile(f.read())
        rng = np.random.default_rng(0)
        x = rng.uniform(-3, 3, size=(6, 512, 4096)).astype(np.float32)
        xb = self.client.buffer(x, dtype="bfloat16")
        x_rounded = xb.to_numpy().astype(np.float64)  # what the device holds
        self.assertEqual(xb.shape, (6, 512, 4096))
        (y,) = exe(xb)
        self.assertEqual(y.shape, (6, 512, 4096))
        # bf16 arithmetic at every step: within a few bf16 ulps of the exact formula.
        np.testing.assert_allclose(y, gelu(x_rounded), rtol=3e-2, atol=3e-2)

    def test_serialized_compile_options_are_accepted(self):
        try:
            exe = self.client.compile(ADD_ONE, compile_options=kiln.ONE_DEVICE_COMPILE_OPTIONS)
        except kiln.PjrtError as e:
            if e.code == "UNIMPLEMENTED" and "not decoded in this build" in e.message:
                self.skipTest(f"this plugin build does not decode compile options: {e}")
            raise
        (y,) = exe(np.arange(6, dtype=np.int32))
        np.testing.assert_array_equal(y, np.arange(1, 7))
        with self.assertRaises(kiln.PjrtError) as cm:
            self.client.compile(ADD_ONE, compile_options=b"\x1a\xff\xff")  # truncated field
        self.assertEqual(cm.exception.code, "INVALID_ARGUMENT")

    def test_tuple_result_is_a_list_of_arrays(self):
        a = np.arange(15, dtype=np.float32).reshape(3, 5)
        b = np.full((3, 5), 0.5, np.float32)
        exe = self.client.compile(TUPLE)
        self.assertEqual(exe.num_outputs, 3)
        s, p, n = exe(a, b)
        np.testing.assert_array_equal(s, a + b)
        np.testing.assert_array_equal(p, a * b)
        self.assertEqual(n.shape, ())
        self.assertEqual(n.dtype, np.int32)
        self.assertEqual(int(n), 7)

    def test_buffers_as_arguments_and_results(self):
        exe = self.client.compile(ADD_ONE)
        x = self.client.buffer(np.arange(6, dtype=np.int32))
        (y,) = exe.execute(x)
        self.assertIsInstance(y, kiln.Buffer)
        (z,) = exe(y)  # a result fed back in, never leaving the device
        np.testing.assert_array_equal(z, np.arange(6) + 2)
        np.testing.assert_array_equal(x.to_numpy(), np.arange(6))

    def test_zero_copy_buffers_use_the_arrays_memory(self):
        exe = self.client.compile(ADD_ONE)
        mem = np.arange(-1, 7, dtype=np.int32)
        while mem.ctypes.data % 16:  # (numpy's allocations are 16-byte aligned on glibc)
            mem = np.arange(-1, 7, dtype=np.int32)
        x = mem[:6]
        b = self.client.buffer(x, copy=False)
        if self.client.platform == "cpu":
            self.assertIs(b._host, x)  # aliased: the buffer keeps the array
        (y,) = exe.execute(b)
        np.testing.assert_array_equal(y.to_numpy(), np.arange(6))
        np.testing.assert_array_equal(x, np.arange(-1, 5))  # never written
        b.close()
        self.assertIsNone(b._host)  # released once kiln no longer reads it
        # memory the plugin cannot use as it is (4 bytes past an aligned start) is copied
        c = self.client.buffer(mem[1:7], copy=False)
        self.assertIsNone(c._host)
        np.testing.assert_array_equal(c.to_numpy(), np.arange(6))

    def test_dtypes_round_trip_through_buffers(self):
        rng = np.random.default_rng(1)
        for dtype in ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                      "uint64", "float16", "float32", "float64", "complex64", "complex128"]:
            for shape in [(), (7,), (2, 3, 4)]:
                with self.subTest(dtype=dtype, shape=shape):
                    raw = rng.uniform(-100, 100, size=shape)
                    if dtype.startswith("complex"):
                        raw = raw + 1j * rng.uniform(-100, 100, size=shape)
                    elif dtype.startswith("uint"):
                        raw = np.abs(raw)
                    a = np.asarray(raw > 0 if dtype == "bool" else raw).astype(dtype)
                    b = self.client.buffer(a)
                    self.assertEqual(b.shape, shape)
                    self.assertEqual(b.dtype, np.dtype(dtype))
                    back = b.to_numpy()
                    self.assertEqual(back.dtype, np.dtype(dtype))
                    np.testing.assert_array_equal(back, a)

    def test_bfloat16_upload_rounds_to_nearest_even(self):
        x = np.array([1.0, 1 + 2**-8, 1 + 3 * 2**-8, -2.5, 3 + 2**-7, 3 + 3 * 2**-7], np.float32)
        b = self.client.buffer(x, dtype="bfloat16")
        self.assertEqual(b.element_type, _abi.BUFFER_TYPES["bfloat16"])
        # bf16 keeps 7 fraction bits; each odd value above is a tie, which goes to the even one.
        want = [1.0, 1.0, 1 + 2**-6, -2.5, 3.0, 3 + 2**-5]
        np.testing.assert_array_equal(b.to_numpy().astype(np.float64), want)

    def test_deleted_buffer_reads_fail(self):
        b = self.client.buffer(np.ones(4, np.float32))
        self.assertFalse(b.is_deleted)
        b.delete()
        self.assertTrue(b.is_deleted)
        with self.assertRaises(kiln.PjrtError):
            b.to_numpy()

    def test_bad_hlo_raises_the_parsers_message(self):
        with self.assertRaises(kiln.PjrtError) as cm:
            self.client.compile(BAD)
        self.assertEqual(cm.exception.code, "INVALID_ARGUMENT")
        self.assertIn("unknown opcode 'bogus'", cm.exception.message)
        self.assertIn("5:", cm.exception.message)  # the line of the bad instruction

    def test_wrong_argument_count_is_an_error(self):
        exe = self.client.compile(ADD_ONE)
        with self.assertRaises(kiln.PjrtError) as cm:
            exe(np.arange(6, dtype=np.int32), np.arange(6, dtype=np.int32))
        self.assertEqual(cm.exception.code, "INVALID_ARGUMENT")
        with self.assertRaises(kiln.PjrtError):
            exe()

    def test_wrong_argument_shape_is_an_error(self):
        exe = self.client.compile(ADD_ONE)
        with self.assertRaises(kiln.PjrtError) as cm:
            exe(np.arange(5, dtype=np.int32))
        self.assertEqual(cm.exception.code, "INVALID_ARGUMENT")

    def test_unknown_format_names_the_accepted_ones(self):
        with self.assertRaises(kiln.PjrtError) as cm:
            self.client.compile(ADD_ONE, format="tensorflow")
        self.assertEqual(cm.exception.code, "INVALID_ARGUMENT")
        self.assertIn("hlo", cm.exception.message)

    def test_convenience_compile(self):
        (y,) = kiln.compile(ADD_ONE)(np.arange(6, dtype=np.int32))
        np.testing.assert_array_equal(y, np.arange(1, 7))
        self.assertGreater(len(kiln.devices()), 0)


# Ten additions in a loop: not a "cheap" run, so the plugin queues it on the device's thread.
ADD_TEN_IN_A_LOOP = """HloModule add_ten

cond {
  t = (s32[], f32[1000]) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  ten = s32[] constant(10)
  ROOT lt = pred[] compare(i, ten), direction=LT
}

body {
  t = (s32[], f32[1000]) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  x = f32[1000] get-tuple-element(t), index=1
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  onef = f32[] constant(1)
  ones = f32[1000] broadcast(onef), dimensions={}
  x1 = f32[1000] add(x, ones)
  ROOT r = (s32[], f32[1000]) tuple(i1, x1)
}

ENTRY main {
  x = f32[1000] parameter(0)
  zero = s32[] constant(0)
  t = (s32[], f32[1000]) tuple(zero, x)
  w = (s32[], f32[1000]) while(t), condition=cond, body=body
  ROOT y = f32[1000] get-tuple-element(w), index=1
}
"""

FAILING_HANDLER = """HloModule fail

ENTRY main {
  p = f32[4] parameter(0)
  ROOT c = f32[4] custom-call(p), custom_call_target="kiln_fail",
      api_version=API_VERSION_TYPED_FFI
}
"""

ADD_ONE_F32 = """HloModule add_one_f32

ENTRY main {
  x = f32[4] parameter(0)
  one = f32[] constant(1)
  ones = f32[4] broadcast(one), dimensions={}
  ROOT y = f32[4] add(x, ones)
}
"""


class AsyncExecuteTest(unittest.TestCase):
    """execute() returns once the run is enqueued; reads wait, and raise a failed run's
    error."""

    @classmethod
    def setUpClass(cls):
        cls.client = kiln.Client(platform=os.environ.get("KILN_TEST_PLATFORM", "cpu"))

    def test_chained_executes_without_waiting_compute_in_order(self):
        exe = self.client.compile(ADD_TEN_IN_A_LOOP)
        x = np.linspace(-1, 1, 1000, dtype=np.float32)
        b = self.client.buffer(x)
        for _ in range(30):  # each run takes the previous one's (maybe pending) output
            (b,) = exe.execute(b)
        self.assertIs(b.block_until_ready(), b)
        self.assertTrue(b.is_ready)
        np.testing.assert_allclose(b.to_numpy(), x + 300, rtol=1e-6)

    def test_a_failed_run_is_raised_by_reads_of_its_outputs(self):
        lib = os.environ.get("KILN_FFI_TEST_C_LIB")
        if not lib or not os.path.exists(lib):
            self.skipTest("KILN_FFI_TEST_C_LIB (tests/ffi/handlers_c.c built) is not set")
        client = kiln.Client(platform=os.environ.get("KILN_TEST_PLATFORM", "cpu"),
                             ffi_libraries=f"kiln_fail={lib}:kiln_test_c_fail")
        fail = client.compile(FAILING_HANDLER)
        add = client.compile(ADD_ONE_F32)
        (y,) = fail.execute(np.ones(4, np.float32))  # enqueued: no error yet
        outputs = [y]
        try:  # a run taking the failed output fails too: at once when y has failed already
            outputs += add.execute(y)
        except kiln.PjrtError as e:
            self.assertIn("C handler failed on purpose", e.message)
        for buf in outputs:
            with self.assertRaises(kiln.PjrtError) as cm:
                buf.to_numpy()
            self.assertIn("C handler failed on purpose", cm.exception.message)
            with self.assertRaises(kiln.PjrtError) as cm:
                buf.block_until_ready()
            self.assertIn("C handler failed on purpose", cm.exception.message)
            self.assertTrue(buf.is_ready)
        # The executables stay usable: a good input after the failure computes.
        (w,) = add.execute(np.arange(4, dtype=np.float32))
        np.testing.assert_array_equal(w.to_numpy(), np.arange(4) + 1)


if __name__ == "__main__":
    unittest.main()
