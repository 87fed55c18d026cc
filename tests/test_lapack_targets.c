/* jaxlib's typed-FFI LAPACK targets as JAX emits them for CPU (jnp.linalg on a CPU plugin):
 * lapack_{s,d}potrf_ffi, getrf_ffi, trsm_ffi, geqrf_ffi, orgqr_ffi, syevd_ffi, gesdd_ffi and
 * gtsv_ffi, with their `mhlo.backend_config` dictionaries of ASCII flags, column-major operand
 * layouts and batch dimensions, through the StableHLO converter on the reference evaluator
 * and on the host backend against values from numpy (cholesky, qr(mode='raw'), solve, also of
 * the tridiagonal systems, eigh and svd with each eigenvector's or right vector's largest
 * component made positive, LU with partial pivoting; the SVD's completed bases and
 * reconstruction checked in the program); potrf's info at a failing pivot the same on both
 * (LAPACK's: the first failing column, the factor stopping there); complex forms refused
 * naming the target; the host's built-ins serialized and read back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>

#include "base/alloc.h"
#include "compiler/eval/eval.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/literal.h"
#include "runtime/host/host_device.h"
#include "tools/common/device_run.h"
#include "tests/stablehlo_test_util.h"

static const char kProgram[] =
    "func.func @potrf_lower_f64() {\n"
    "  %a = stablehlo.constant dense<[[4.0, 2.0, 0.4], [2.0, 5.0, 1.0], [0.4, 1.0, 3.0]]> : "
    "tensor<3x3xf64>\n"
    "  %0:2 = stablehlo.custom_call @lapack_dpotrf_ffi(%a) {mhlo.backend_config = {uplo = 76 "
    ": ui8}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>], output_operand_aliases = "
    "[#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, "
    "operand_tuple_indices = []>], result_layouts = [dense<[0, 1]> : tensor<2xindex>, "
    "dense<> : tensor<0xindex>]} : (tensor<3x3xf64>) -> (tensor<3x3xf64>, tensor<i32>)\n"
    "  check.expect_almost_eq_const %0#0, dense<[[2.0, 2.0, 0.4], [1.0, 2.0, 1.0], [0.2, "
    "0.4, 1.6733200530681511]]> : tensor<3x3xf64> {tolerance = 1.0e-12 : f64}\n"
    "  check.expect_eq_const %0#1, dense<0> : tensor<i32>\n"
    "  func.return\n"
    "}\n"
    "// -----\n"
    "func.func @potrf_upper_info_f32() {\n"
    "  %a = stablehlo.constant dense<[[1.0, 2.0], [2.0, 1.0]]> : tensor<2x2xf32>\n"
    "  %0:2 = stablehlo.custom_call @lapack_spotrf_ffi(%a) {mhlo.backend_config = {uplo = 85 "
    ": ui8}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>], output_operand_aliases = "
    "[#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, "
    "operand_tuple_indices = []>], result_layouts = [dense<[0, 1]> : tensor<2xindex>, "
    "dense<> : tensor<0xindex>]} : (tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<i32>)\n"
    "  check.expect_eq_const %0#1, dense<2> : tensor<i32>\n"
    "  func.return\n"
    "}\n"
    "// -----\n"
    "func.func @getrf_f64() {\n"
    "  %a = stablehlo.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 10.0]]> : "
    "tensor<3x3xf64>\n"
    "  %0:3 = stablehlo.custom_call @lapack_dgetrf_ffi(%a) {mhlo.backend_config = {}, "
    "operand_layouts = [dense<[0, 1]> : tensor<2xindex>], output_operand_aliases = "
    "[#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, "
    "operand_tuple_indices = []>], result_layouts = [dense<[0, 1]> : tensor<2xindex>, "
    "dense<0> : tensor<1xindex>, dense<> : tensor<0xindex>]} : (tensor<3x3xf64>) -> "
    "(tensor<3x3xf64>, tensor<3xi32>, tensor<i32>)\n"
    "  check.expect_almost_eq_const %0#0, dense<[[7.0, 8.0, 10.0], [0.14285714285714285, "
    "0.8571428571428572, 1.5714285714285716], [0.5714285714285714, 0.5000000000000002, "
    "-0.49999999999999967]]> : tensor<3x3xf64> {tolerance = 1.0e-12 : f64}\n"
    "  check.expect_eq_const %0#1, dense<[3, 3, 3]> : tensor<3xi32>\n"
    "  check.expect_eq_const %0#2, dense<0> : tensor<i32>\n"
    "  func.return\n"
    "}\n"
    "// -----\n"
    "func.func @getrf_batched_f32() {\n"
    "  %a = stablehlo.constant dense<[[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 10.0]], "
    "[[2.0, 1.0, 1.0], [4.0, 3.0, 3.0], [8.0, 7.0, 9.0]]]> : tensor<2x3x3xf32>\n"
    "  %0:3 = stablehlo.custom_call @lapack_sgetrf_ffi(%a) {mhlo.backend_config = {}, "
    "operand_layouts = [dense<[1, 2, 0]> : tensor<3xindex>], output_operand_aliases = "
    "[#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, "
    "operand_tuple_indices = []>], result_layouts = [dense<[1, 2, 0]> : tensor<3xindex>, "
    "dense<[1, 0]> : tensor<2xindex>, dense<0> : tensor<1xindex>]} : (tensor<2x3x3xf32>) -> "
    "(tensor<2x3x3xf32>, tensor<2x3xi32>, tensor<2xi32>)\n"
    "  check.expect_almost_eq_const %0#0, dense<[[[7.0, 8.0, 10.0], [0.14285714, 0.85714287, "
    "1.5714285], [0.5714286, 0.5, -0.5]], [[8.0, 7.0, 9.0], [0.25, -0.75, -1.25], [0.5, "
    "0.6666667, -0.6666667]]]> : tensor<2x3x3xf32> {tolerance = 1.0e-5 : f64}\n"
    "  check.expect_eq_const %0#1, dense<[[3, 3, 3], [3, 3, 3]]> : tensor<2x3xi32>\n"
    "  check.expect_eq_const %0#2, dense<[0, 0]> : tensor<2xi32>\n"
    "  func.return\n"
    "}\n"
    "// -----\n"
    "func.func @trsm_left_lower_f64() {\n"
    "  %l = stablehlo.constant dense<[[2.0, 9.0, 9.0], [1.0, 2.0, 9.0], [0.2, 0.4, "
    "1.6733200530681511]]> : tensor<3x3xf64>\n"
    "  %b = stablehlo.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : "
    "tensor<3x2xf64>\n"
    "  %alpha = stablehlo.constant dense<2.0> : tensor<f64>\n"
    "  %0 = stablehlo.custom_call @lapack_dtrsm_ffi(%l, %b, %alpha) {mhlo.backend_config = "
    "{diag = 78 : ui8, side = 76 : ui8, trans_x = 78 : ui8, uplo = 76 : ui8}, "
    "operand_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<[0, 1]> : tensor<2xindex>, "
    "dense<> : tensor<0xindex>], output_operand_aliases = "
    "[#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 1, "
    "operand_tuple_indices = []>], result_layouts = [dense<[0, 1]> : tensor<2xindex>]} : "
    "(tensor<3x3xf64>, tensor<3x2xf64>, tensor<f64>) -> tensor<3x2xf64>\n"
    "  check.expect_almost_eq_const %0, dense<[[1.0, 2.0], [2.5, 3.0], [5.2590058810713325, "
    "6.215188768538847]]> : tensor<3x2xf64> {tolerance = 1.0e-12 : f64}\n"
    "  func.return\n"
    "}\n"
    "// -----\n"
    "func.func @trsm_right_upper_transposed_unit_f64() {\n"
    "  %u = stablehlo.constant dense<[[2.0, 3.0, 4.0], [9.0, 5.0, 6.0], [9.0, 9.0, 7.0]]> : "
    "tensor<3x3xf64>\n"
    "  %b = stablehlo.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf64>\n"
    "  %alpha = stablehlo.constant dense<1.0> : tensor<f64>\n"
    "  %0 = stablehlo.custom_call @lapack_dtrsm_ffi(%u, %b, %alpha) {mhlo.backend_config = "
    "{diag = 85 : ui8, side = 82 : ui8, trans_x = 84 : ui8, uplo = 85 : ui8}, "
    "operand_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<[0, 1]> : tensor<2xindex>, "
    "dense<> : tensor<0xindex>], output_operand_aliases = "
    "[#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 1, "
    "operand_tuple_indices = []>], result_layouts = [dense<[0, 1]> : tensor<2xindex>]} : "
    "(tensor<3x3xf64>, tensor<2x3xf64>, tensor<f64>) -> tensor<2x3xf64>\n"
    "  check.expect_almost_eq_const %0, dense<[[37.0, -16.0, 3.0], [73.0, -31.0, 6.0]]> : "
    "tensor<2x3xf64> {tolerance = 1.0e-12 : f64}\n"
    "  func.return\n"
    "}\n"
    "// -----\n"
    "func.func @geqrf_orgqr_f64() {\n"
    "  %a = stablehlo.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 10.0], "
    "[1.0, 0.0, 1.0]]> : tensor<4x3xf64>\n"
    "  %0:2 = stablehlo.custom_call @lapack_dgeqrf_ffi(%a) {mhlo.backend_config = {}, "
    "operand_layouts = [dense<[0, 1]> : tensor<2xindex>], output_operand_aliases = "
    "[#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, "
    "operand_tuple_indices = []>], result_layouts = [dense<[0, 1]> : tensor<2xindex>, "
    "dense<0> : tensor<1xindex>]} : (tensor<4x3xf64>) -> (tensor<4x3xf64>, tensor<3xf64>)\n"
    "  check.expect_almost_eq_const %0#0, dense<[[-8.18535277187245, -9.529216659791809, "
    "-11.972605546917912], [0.4354759255680273, 1.481225793303057, 1.2897748404271514], "
    "[0.7620828697440477, 0.5234749016584114, 0.9965928350693488], [0.10886898139200682, "
    "0.8357118408080063, -0.6047182320879525]]> : tensor<4x3xf64> {tolerance = 1.0e-12 : "
    "f64}\n"
    "  check.expect_almost_eq_const %0#1, dense<[1.1221694443563053, 1.0139724112898454, "
    "1.464467471723318]> : tensor<3xf64> {tolerance = 1.0e-12 : f64}\n"
    "  %1 = stablehlo.custom_call @lapack_dorgqr_ffi(%0#0, %0#1) {mhlo.backend_config = {}, "
    "operand_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<0> : tensor<1xindex>], "
    "output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], "
    "operand_index = 0, operand_tuple_indices = []>], result_layouts = [dense<[0, 1]> : "
    "tensor<2xindex>]} : (tensor<4x3xf64>, tensor<3xf64>) -> tensor<4x3xf64>\n"
    "  check.expect_almost_eq_const %1, dense<[[-0.12216944435630528, 0.564276492686879, "
    "0.8122914203647438], [-0.48867777742522095, 0.2317564166392534, -0.15017152309264156], "
    "[-0.8551861104941366, -0.10076365940837118, -0.10921565315828488], "
    "[-0.12216944435630524, -0.7859565433852949, 0.552904244113818]]> : tensor<4x3xf64> "
    "{tolerance = 1.0e-12 : f64}\n"
    "  func.return\n"
    "}\n"
    "// -----\n"
    "func.func @syevd_lower_f64() {\n"
    "  %a = stablehlo.constant dense<[[4.0, 99.0, 99.0, 99.0], [1.0, 3.0, 99.0, 99.0], [2.0, "
    "0.0, 5.0, 99.0], [0.5, 1.0, 1.5, 2.0]]> : tensor<4x4xf64>\n"
    "  %0:3 = stablehlo.custom_call @lapack_dsyevd_ffi(%a) {mhlo.backend_config = {mode = 86 "
    ": ui8, uplo = 76 : ui8}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>], "
    "output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [0], "
    "operand_index = 0, operand_tuple_indices = []>], result_layouts = [dense<[0, 1]> : "
    "tensor<2xindex>, dense<0> : tensor<1xindex>, dense<> : tensor<0xindex>]} : "
    "(tensor<4x4xf64>) -> (tensor<4x4xf64>, tensor<4xf64>, tensor<i32>)\n"
    "  check.expect_almost_eq_const %0#1, dense<[0.7779137358746209, 2.52305533077922, "
    "3.50636455573074, 7.192666377615419]> : tensor<4xf64> {tolerance = 1.0e-12 : f64}\n"
    "  check.expect_almost_eq_const %0#0, dense<[[0.2710272567572385, 0.7212113858081267, "
    "0.28172928034121764, 0.5718627245010698], [-0.4588772355475186, -0.30870474772887363, "
    "0.8063635543419342, 0.20954922966921685], [-0.3943573691449628, -0.23474820645696173, "
    "-0.5043637170560642, 0.731432010431382], [0.7486375452727283, -0.5739763020156957, "
    "0.12658464261059676, 0.30670728518826823]]> : tensor<4x4xf64> {tolerance = 1.0e-12 : "
    "f64}\n"
    "  check.expect_eq_const %0#2, dense<0> : tensor<i32>\n"
    "  func.return\n"
    "}\n"
    "// -----\n"
    "func.func @syevd_upper_values_f32() {\n"
    "  %a = stablehlo.constant dense<[[[4.0, 1.0, 2.0, 0.5], [9.0, 3.0, 0.0, 1.0], [9.0, "
    "9.0, 5.0, 1.5], [9.0, 9.0, 9.0, 2.0]]]> : tensor<1x4x4xf32>\n"
    "  %0:3 = stablehlo.custom_call @lapack_ssyevd_ffi(%a) {mhlo.backend_config = {mode = 78 "
    ": ui8, uplo = 85 : ui8}, operand_layouts = [dense<[1, 2, 0]> : tensor<3xindex>], "
    "output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [0], "
    "operand_index = 0, operand_tuple_indices = []>], result_layouts = [dense<[1, 2, 0]> : "
    "tensor<3xindex>, dense<[1, 0]> : tensor<2xindex>, dense<0> : tensor<1xindex>]} : "
    "(tensor<1x4x4xf32>) -> (tensor<1x4x4xf32>, tensor<1x4xf32>, tensor<1xi32>)\n"
    "  check.expect_almost_eq_const %0#1, dense<[[0.77791374, 2.5230553, 3.5063646, "
    "7.1926664]]> : tensor<1x4xf32> {tolerance = 1.0e-5 : f64}\n"
    "  check.expect_eq_const %0#2, dense<[0]> : tensor<1xi32>\n"
    "  func.return\n"
    "}\n"
    "// -----\n"
    "func.func @gesdd_full_tall_f64() {\n"
    "  %a = stablehlo.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 10.0], "
    "[1.0, 0.0, 1.0]]> : tensor<4x3xf64>\n"
    "  %0:5 = stablehlo.custom_call @lapack_dgesdd_ffi(%a) {mhlo.backend_config = {mode = 65 "
    ": ui8}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>], output_operand_aliases = "
    "[#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, "
    "operand_tuple_indices = []>], result_layouts = [dense<[0, 1]> : tensor<2xindex>, "
    "dense<0> : tensor<1xindex>, dense<[0, 1]> : tensor<2xindex>, dense<[0, 1]> : "
    "tensor<2xindex>, dense<> : tensor<0xindex>]} : (tensor<4x3xf64>) -> (tensor<4x3xf64>, "
    "tensor<3xf64>, tensor<4x4xf64>, tensor<3x3xf64>, tensor<i32>)\n"
    "  check.expect_almost_eq_const %0#1, dense<[17.450895584636637, 0.9869391657365876, "
    "0.7015656613921288]> : tensor<3xf64> {tolerance = 1.0e-12 : f64}\n"
    "  check.expect_almost_eq_const %0#3, dense<[[0.46642852963239634, 0.5513178255711642, "
    "0.6917319437126237], [0.8665983442107416, -0.441593318468393, -0.23238470452091542], "
    "[0.17734637452218058, 0.7078446130977869, -0.6837428370025403]]> : tensor<3x3xf64> "
    "{tolerance = 1.0e-12 : f64}\n"
    "  %u3 = stablehlo.slice %0#2 [0:4, 0:3] : (tensor<4x4xf64>) -> tensor<4x3xf64>\n"
    "  check.expect_almost_eq_const %u3, dense<[[0.2088293975651837, -0.723187842845511, "
    "-0.6531005371338523], [0.5027074321838486, -0.13767965376374286, 0.2083219712783603], "
    "[0.8362242314927112, 0.21236852664821113, 0.09514883650333841], [0.06636682156098839, "
    "0.6426066182270619, -0.7218090769658088]]> : tensor<4x3xf64> {tolerance = 1.0e-12 : "
    "f64}\n"
    "  %utu = stablehlo.dot_general %0#2, %0#2, contracting_dims = [0] x [0] : "
    "(tensor<4x4xf64>, tensor<4x4xf64>) -> tensor<4x4xf64>\n"
    "  check.expect_almost_eq_const %utu, dense<[[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], "
    "[0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]]> : tensor<4x4xf64> {tolerance = 1.0e-12 : "
    "f64}\n"
    "  check.expect_eq_const %0#4, dense<0> : tensor<i32>\n"
    "  func.return\n"
    "}\n"
    "// -----\n"
    "func.func @gesdd_reduced_wide_batched_f32() {\n"
    "  %a = stablehlo.constant dense<[[[3.0, 1.0, 2.0], [1.0, 4.0, 0.5]], [[2.0, 0.0, 1.0], "
    "[0.0, 1.0, 3.0]]]> : tensor<2x2x3xf32>\n"
    "  %0:5 = stablehlo.custom_call @lapack_sgesdd_ffi(%a) {mhlo.backend_config = {mode = 83 "
    ": ui8}, operand_layouts = [dense<[1, 2, 0]> : tensor<3xindex>], output_operand_aliases "
    "= [#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, "
    "operand_tuple_indices = []>], result_layouts = [dense<[1, 2, 0]> : tensor<3xindex>, "
    "dense<[1, 0]> : tensor<2xindex>, dense<[1, 2, 0]> : tensor<3xindex>, dense<[1, 2, 0]> : "
    "tensor<3xindex>, dense<0> : tensor<1xindex>]} : (tensor<2x2x3xf32>) -> "
    "(tensor<2x2x3xf32>, tensor<2x2xf32>, tensor<2x2x2xf32>, tensor<2x2x3xf32>, "
    "tensor<2xi32>)\n"
    "  check.expect_almost_eq_const %0#1, dense<[[4.8773324, 2.7315983], [3.3771474, "
    "1.8960156]]> : tensor<2x2xf32> {tolerance = 1.0e-5 : f64}\n"
    "  %sb = stablehlo.broadcast_in_dim %0#1, dims = [0, 2] : (tensor<2x2xf32>) -> "
    "tensor<2x2x2xf32>\n"
    "  %us = stablehlo.multiply %0#2, %sb : tensor<2x2x2xf32>\n"
    "  %usv = stablehlo.dot_general %us, %0#3, batching_dims = [0] x [0], contracting_dims = "
    "[2] x [1] : (tensor<2x2x2xf32>, tensor<2x2x3xf32>) -> tensor<2x2x3xf32>\n"
    "  check.expect_almost_eq_const %usv, dense<[[[3.0, 1.0, 2.0], [1.0, 4.0, 0.5]], [[2.0, "
    "0.0, 1.0], [0.0, 1.0, 3.0]]]> : tensor<2x2x3xf32> {tolerance = 1.0e-5 : f64}\n"
    "  check.expect_eq_const %0#4, dense<[0, 0]> : tensor<2xi32>\n"
    "  func.return\n"
    "}\n"
    "// -----\n"
    "func.func @gesdd_rank_deficient_f64() {\n"
    "  %a = stablehlo.constant dense<[[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]]> : "
    "tensor<3x3xf64>\n"
    "  %0:5 = stablehlo.custom_call @lapack_dgesdd_ffi(%a) {mhlo.backend_config = {mode = 65 "
    ": ui8}} : (tensor<3x3xf64>) -> (tensor<3x3xf64>, tensor<3xf64>, tensor<3x3xf64>, "
    "tensor<3x3xf64>, tensor<i32>)\n"
    "  %utu = stablehlo.dot_general %0#2, %0#2, contracting_dims = [0] x [0] : "
    "(tensor<3x3xf64>, tensor<3x3xf64>) -> tensor<3x3xf64>\n"
    "  check.expect_almost_eq_const %utu, dense<[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, "
    "0.0, 1.0]]> : tensor<3x3xf64> {tolerance = 1.0e-12 : f64}\n"
    "  %vvt = stablehlo.dot_general %0#3, %0#3, contracting_dims = [1] x [1] : "
    "(tensor<3x3xf64>, tensor<3x3xf64>) -> tensor<3x3xf64>\n"
    "  check.expect_almost_eq_const %vvt, dense<[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, "
    "0.0, 1.0]]> : tensor<3x3xf64> {tolerance = 1.0e-12 : f64}\n"
    "  %s2 = stablehlo.slice %0#1 [2:3] : (tensor<3xf64>) -> tensor<1xf64>\n"
    "  check.expect_almost_eq_const %s2, dense<[0.0]> : tensor<1xf64> {tolerance = 1.0e-12 : "
    "f64}\n"
    "  func.return\n"
    "}\n"
    "// -----\n"
    "func.func @gtsv_batched_f64() {\n"
    "  %dl = stablehlo.constant dense<[[0.0, 1.0, 2.0, 0.5], [0.0, 3.0, 0.1, 1.0]]> : "
    "tensor<2x4xf64>\n"
    "  %d = stablehlo.constant dense<[[0.1, 4.0, 1.0, 3.0], [1.0, 0.2, 5.0, 2.0]]> : "
    "tensor<2x4xf64>\n"
    "  %du = stablehlo.constant dense<[[2.0, 1.0, 3.0, 0.0], [1.0, 2.0, 1.0, 0.0]]> : "
    "tensor<2x4xf64>\n"
    "  %b = stablehlo.constant dense<[[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]], "
    "[[1.0, 0.0], [0.0, 1.0], [2.0, 2.0], [1.0, 3.0]]]> : tensor<2x4x2xf64>\n"
    "  %0:5 = stablehlo.custom_call @lapack_dgtsv_ffi(%dl, %d, %du, %b) {mhlo.backend_config "
    "= {}, operand_layouts = [dense<[1, 0]> : tensor<2xindex>, dense<[1, 0]> : "
    "tensor<2xindex>, dense<[1, 0]> : tensor<2xindex>, dense<[1, 2, 0]> : tensor<3xindex>], "
    "result_layouts = [dense<[1, 0]> : tensor<2xindex>, dense<[1, 0]> : tensor<2xindex>, "
    "dense<[1, 0]> : tensor<2xindex>, dense<[1, 2, 0]> : tensor<3xindex>, dense<0> : "
    "tensor<1xindex>]} : (tensor<2x4xf64>, tensor<2x4xf64>, tensor<2x4xf64>, "
    "tensor<2x4x2xf64>) -> (tensor<2x4xf64>, tensor<2x4xf64>, tensor<2x4xf64>, "
    "tensor<2x4x2xf64>, tensor<2xi32>)\n"
    "  check.expect_almost_eq_const %0#3, dense<[[[7.0, 8.0], [0.15, 0.6], [-4.6, -6.4], "
    "[3.1, 3.733333333333334]], [[-0.2890625, 0.2734375], [1.2890625, -0.2734375], "
    "[0.3046875, 0.1171875], [0.34765625, 1.44140625]]]> : tensor<2x4x2xf64> {tolerance = "
    "1.0e-12 : f64}\n"
    "  check.expect_eq_const %0#4, dense<[0, 0]> : tensor<2xi32>\n"
    "  func.return\n"
    "}\n"
    "// -----\n"
    "func.func @gtsv_zero_pivot_f32() {\n"
    "  %z = stablehlo.constant dense<[0.0, 0.0, 0.0]> : tensor<3xf32>\n"
    "  %b = stablehlo.constant dense<[[1.0], [2.0], [3.0]]> : tensor<3x1xf32>\n"
    "  %0:5 = stablehlo.custom_call @lapack_sgtsv_ffi(%z, %z, %z, %b) {mhlo.backend_config = "
    "{}} : (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3x1xf32>) -> (tensor<3xf32>, "
    "tensor<3xf32>, tensor<3xf32>, tensor<3x1xf32>, tensor<i32>)\n"
    "  check.expect_eq_const %0#4, dense<1> : tensor<i32>\n"
    "  func.return\n"
    "}\n";

enum { kFunctions = 14 };

static void run_program(kiln_device_t *dev) {
  kiln_test_run_checks(kProgram, sizeof kProgram - 1, "lapack.mlir", dev, kFunctions);
}

static void test_lapack_targets_on_the_reference_evaluator(void **state) {
  (void)state;
  run_program(NULL);
}

static void test_lapack_targets_on_the_host_backend(void **state) {
  (void)state;
  kiln_device_t *dev = NULL;
  assert_null(kiln_host_device_create(0, &dev));
  run_program(dev);
  kiln_device_destroy(dev);
}

/* Runs `hlo` (one parameter, filled from `a` when not NULL, else zeros) on the host (*got,
 * status st[0]) and with the evaluator (*want, st[1]). */
static void run_both(const char *hlo, const float *a, kiln_arena_t *arena, kiln_literal_t **got,
                     kiln_literal_t **want, kiln_status st[2]) {
  kiln_hlo_module_t *m = NULL;
  assert_null(kiln_hlo_parse_module(hlo, strlen(hlo), NULL, &m));
  kiln_literal_t *arg = kiln_literal_make(arena, m->entry->parameters[0]->shape);
  for (int64_t i = 0; a && i < arg->num_elements; i++) kiln_literal_set_f64(arg, i, a[i]);
  kiln_device_t *dev = NULL;
  assert_null(kiln_host_device_create(0, &dev));
  kiln_device_run_options_t o;
  memset(&o, 0, sizeof o);
  o.device = dev;
  st[0] = kiln_device_run_module(m, &arg, 1, &o, arena, got, NULL);
  kiln_eval_options_t eo;
  memset(&eo, 0, sizeof eo);
  st[1] = kiln_eval_module(m, &eo, 1, &arg, arena, want);
  kiln_device_destroy(dev);
  kiln_hlo_module_destroy(m);
}

/* A matrix that is not positive definite: LAPACK's info names the first failing column (3 of
 * 4 here), the columns before it stay factored, and host and evaluator agree on all of it. */
static void test_potrf_info_names_the_first_failing_column(void **state) {
  (void)state;
  static const float a[16] = {4, 2, 0, 0, 2, 5, 1, 0, 0, 1, 0.1f, 3, 0, 0, 3, 1};
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t *got = NULL, *want = NULL;
  kiln_status st[2];
  run_both(
      "HloModule m\nENTRY e {\n  a = f32[4,4] parameter(0)\n"
      "  ROOT p = (f32[4,4], s32[]) custom-call(a), custom_call_target=\"lapack_spotrf_ffi\", "
      "api_version=API_VERSION_TYPED_FFI, backend_config={uplo = 76 : ui8}\n}\n",
      a, &arena, &got, &want, st);
  for (int r = 0; r < 2; r++) {
    if (st[r]) fail_msg("%s", kiln_status_message(st[r]));
    kiln_literal_t *l = r ? want : got;
    assert_int_equal(kiln_literal_get_s64(l->tuple_elements[1], 0), 3);
    /* L[0][0] = 2, L[1][0] = 1, L[1][1] = 2, L[2][1] = 0.5; the input's upper triangle */
    const kiln_literal_t *f = l->tuple_elements[0];
    assert_true(kiln_literal_get_f64(f, 0) == 2 && kiln_literal_get_f64(f, 4) == 1);
    assert_true(kiln_literal_get_f64(f, 5) == 2 && kiln_literal_get_f64(f, 9) == 0.5);
    assert_true(kiln_literal_get_f64(f, 1) == 2 && kiln_literal_get_f64(f, 11) == 3);
    assert_true(isnan(kiln_literal_get_f64(f, 15))); /* past the failure */
  }
  kiln_arena_destroy(&arena);
}

/* Complex LAPACK targets are not kiln's yet: the compiler and the evaluator name the call. */
static void test_complex_lapack_targets_are_refused_by_name(void **state) {
  (void)state;
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t *got = NULL, *want = NULL;
  kiln_status st[2];
  run_both(
      "HloModule m\nENTRY e {\n  a = c64[2,2] parameter(0)\n"
      "  ROOT p = (c64[2,2], s32[]) custom-call(a), custom_call_target=\"lapack_cpotrf_ffi\", "
      "api_version=API_VERSION_TYPED_FFI, backend_config={uplo = 76 : ui8}\n}\n",
      NULL, &arena, &got, &want, st);
  for (int i = 0; i < 2; i++) {
    assert_non_null(st[i]);
    assert_int_equal(kiln_status_code(st[i]), KILN_UNIMPLEMENTED);
    assert_non_null(strstr(kiln_status_message(st[i]), "custom call p (lapack_cpotrf_ffi)"));
    kiln_status_free(st[i]);
  }
  kiln_arena_destroy(&arena);
}

/* The host's built-in eigh, QR, SVD and gtsv, serialized and read back: the same bits (their f64
 * views next to s32 infos; format 4 records each view's element size). */
static void test_builtin_targets_survive_serialization(void **state) {
  (void)state;
  const char *hlo =
      "HloModule m\nENTRY e {\n  a = f64[2,3,3] parameter(0)\n"
      "  e = (f64[2,3,3]{1,2,0}, f64[2,3], s32[2]) custom-call(a), "
      "custom_call_target=\"lapack_dsyevd_ffi\", api_version=API_VERSION_TYPED_FFI, "
      "backend_config={mode = 86 : ui8, uplo = 76 : ui8}\n"
      "  q = (f64[2,3,3], f64[2,3], s32[2], f64[8]) custom-call(a), "
      "custom_call_target=\"cusolver_geqrf\", api_version=API_VERSION_STATUS_RETURNING\n"
      "  v = (f64[2,3,3], f64[2,3], f64[2,3,3], f64[2,3,3], s32[2]) custom-call(a), "
      "custom_call_target=\"lapack_dgesdd_ffi\", api_version=API_VERSION_TYPED_FFI, "
      "backend_config={mode = 65 : ui8}\n"
      "  d = f64[2,1,3] slice(a), slice={[0:2], [0:1], [0:3]}\n"
      "  d2 = f64[2,3] reshape(d)\n"
      "  t = (f64[2,3], f64[2,3], f64[2,3], f64[2,3,3], s32[2]) custom-call(d2, d2, d2, a), "
      "custom_call_target=\"lapack_dgtsv_ffi\", api_version=API_VERSION_TYPED_FFI\n"
      "  ROOT r = ((f64[2,3,3]{1,2,0}, f64[2,3], s32[2]), (f64[2,3,3], f64[2,3], s32[2], f64[8]), "
      "(f64[2,3,3], f64[2,3], f64[2,3,3], f64[2,3,3], s32[2]), "
      "(f64[2,3], f64[2,3], f64[2,3], f64[2,3,3], s32[2])) tuple(e, q, v, t)\n}\n";
  kiln_hlo_module_t *m = NULL;
  assert_null(kiln_hlo_parse_module(hlo, strlen(hlo), NULL, &m));
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t *a = kiln_literal_make(&arena, m->entry->parameters[0]->shape), *r[2];
  for (int64_t i = 0; i < a->num_elements; i++) /* symmetric: a[b][i][j] = 1 + (i + j) % 3 + b */
    kiln_literal_set_f64(a, i, 1 + (i % 3 + (i / 3) % 3) % 3 + (double)(i / 9));
  kiln_device_t *dev = NULL;
  assert_null(kiln_host_device_create(0, &dev));
  for (int k = 0; k < 2; k++) {
    kiln_device_run_options_t o;
    memset(&o, 0, sizeof o);
    o.device = dev;
    o.serialize_round_trip = k == 1;
    kiln_status s = kiln_device_run_module(m, &a, 1, &o, &arena, &r[k], NULL);
    if (s) fail_msg("%s", kiln_status_message(s));
  }
  assert_true(kiln_literal_equal(r[0], r[1]));
  kiln_device_destroy(dev);
  kiln_arena_destroy(&arena);
  kiln_hlo_module_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lapack_targets_on_the_reference_evaluator),
      cmocka_unit_test(test_lapack_targets_on_the_host_backend),
      cmocka_unit_test(test_potrf_info_names_the_first_failing_column),
      cmocka_unit_test(test_complex_lapack_targets_are_refused_by_name),
      cmocka_unit_test(test_builtin_targets_survive_serialization),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
