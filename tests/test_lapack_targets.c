/* jaxlib's typed-FFI LAPACK targets as JAX emits them for CPU (jnp.linalg on a CPU plugin):
 * lapack_{s,d}potrf_ffi, getrf_ffi, trsm_ffi, geqrf_ffi, orgqr_ffi, syevd_ffi, gesdd_ffi and
 * gtsv_ffi, with their `mhlo.backend_config` dictionaries of ASCII flags, column-major operand
 * layouts and batch dimensions, through the StableHLO converter on the reference evaluator
 * and on the host backend against values from numpy (cholesky, qr(mode='raw'), solve, also of
 * the tridiagonal systems, eigh and svd with each eigenvector's or right vector's largest
 * component made positive, LU with partial pivoting; the SVD's completed bases and
 * reconstruction checked in the program); potrf's info at a failing pivot the same on both
 * (LAPACK's: the first failing column, the factor stopping there); the complex forms
 * (lapack_{c,z}{potrf,getrf,trsm,geqrf,ungqr,heevd,gesdd}) against numpy; geev, real and
 * complex; a form kiln lacks (complex gtsv) refused naming the target; the host's built-ins
 * serialized and read back. */
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

/* The complex forms (c64, c128) against numpy: cholesky (the upper factor U = L^H), LU with
 * LAPACK's |re| + |im| pivot choice, triangular solves with op(A) = A^H and A^T and a complex
 * alpha, qr(mode='raw') and its Q, eigh and reduced svd with each eigenvector's or right
 * vector's largest component made real and positive; the full wide SVD checked in the program
 * (reconstruction, vt unitary). */
static const char kComplexProgram[] =
    "func.func @potrf_lower_c64() {\n"
    "%a = stablehlo.constant dense<[[(2.917, 0.0), (-0.40240000000000004, "
    "0.24579999999999996), (-0.7219, 0.7208000000000001)], [(-0.40240000000000004, "
    "-0.24579999999999996), (4.8526, 0.0), (1.1657, -1.6603000000000003)], [(-0.7219, "
    "-0.7208000000000001), (1.1657, 1.6603000000000003), (6.5365, 0.0)]]> : "
    "tensor<3x3xcomplex<f32>>\n"
    "%0:2 = stablehlo.custom_call @lapack_cpotrf_ffi(%a) {mhlo.backend_config = {uplo = 76 : "
    "ui8}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>], output_operand_aliases = "
    "[#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, "
    "operand_tuple_indices = []>], result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<> "
    ": tensor<0xindex>]} : (tensor<3x3xcomplex<f32>>) -> (tensor<3x3xcomplex<f32>>, "
    "tensor<i32>)\n"
    "check.expect_almost_eq_const %0#0, dense<[[(1.7079227148791012, 0.0), "
    "(-0.40240000000000004, 0.24579999999999996), (-0.7219, 0.7208000000000001)], "
    "[(-0.235607850691584, -0.14391751913516732), (2.1854923217386215, 0.0), (1.1657, "
    "-1.6603000000000003)], [(-0.4226772053038133, -0.42203314805788705), "
    "(0.4600226495698425, 0.7420279246543787), (2.3275535918583627, 0.0)]]> : "
    "tensor<3x3xcomplex<f32>> {tolerance = 1.0e-5 : f64}\n"
    "check.expect_eq_const %0#1, dense<0> : tensor<i32>\n"
    "func.return\n"
    "}\n"
    "// -----\n"
    "func.func @potrf_upper_c128() {\n"
    "%a = stablehlo.constant dense<[[(2.917, 0.0), (-0.40240000000000004, "
    "0.24579999999999996), (-0.7219, 0.7208000000000001)], [(-0.40240000000000004, "
    "-0.24579999999999996), (4.8526, 0.0), (1.1657, -1.6603000000000003)], [(-0.7219, "
    "-0.7208000000000001), (1.1657, 1.6603000000000003), (6.5365, 0.0)]]> : "
    "tensor<3x3xcomplex<f64>>\n"
    "%0:2 = stablehlo.custom_call @lapack_zpotrf_ffi(%a) {mhlo.backend_config = {uplo = 85 : "
    "ui8}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>], output_operand_aliases = "
    "[#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, "
    "operand_tuple_indices = []>], result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<> "
    ": tensor<0xindex>]} : (tensor<3x3xcomplex<f64>>) -> (tensor<3x3xcomplex<f64>>, "
    "tensor<i32>)\n"
    "check.expect_almost_eq_const %0#0, dense<[[(1.7079227148791012, -0.0), "
    "(-0.235607850691584, 0.14391751913516732), (-0.4226772053038133, 0.42203314805788705)], "
    "[(-0.40240000000000004, -0.24579999999999996), (2.1854923217386215, -0.0), "
    "(0.4600226495698425, -0.7420279246543787)], [(-0.7219, -0.7208000000000001), (1.1657, "
    "1.6603000000000003), (2.3275535918583627, -0.0)]]> : tensor<3x3xcomplex<f64>> {tolerance "
    "= 1.0e-12 : f64}\n"
    "check.expect_eq_const %0#1, dense<0> : tensor<i32>\n"
    "func.return\n"
    "}\n"
    "// -----\n"
    "func.func @getrf_c128() {\n"
    "%a = stablehlo.constant dense<[[(-1.9, -0.54), (-1.29, -0.05), (-1.84, 0.11)], [(-0.24, "
    "-1.53), (-1.27, -0.48), (0.27, -0.98)], [(0.16, -0.81), (-0.19, 1.06), (-2.52, -0.81)]]> "
    ": tensor<3x3xcomplex<f64>>\n"
    "%0:3 = stablehlo.custom_call @lapack_zgetrf_ffi(%a) {mhlo.backend_config = {}, "
    "operand_layouts = [dense<[0, 1]> : tensor<2xindex>], output_operand_aliases = "
    "[#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, "
    "operand_tuple_indices = []>], result_layouts = [dense<[0, 1]> : tensor<2xindex>, "
    "dense<0> : tensor<1xindex>, dense<> : tensor<0xindex>]} : (tensor<3x3xcomplex<f64>>) -> "
    "(tensor<3x3xcomplex<f64>>, tensor<3xi32>, tensor<i32>)\n"
    "check.expect_almost_eq_const %0#0, dense<[[(-1.9, -0.54), (-1.29, -0.05), (-1.84, "
    "0.11)], [(0.03419110108673368, 0.4165983186385073), (-0.16672339553003893, "
    "1.5991213860980111), (-2.4112625589501744, -0.04722011482468724)], "
    "[(0.32863440639737546, 0.7118618002870617), (0.3381706801783073, 0.5160794851899548), "
    "(1.7440410729020788, 1.5540475262536637)]]> : tensor<3x3xcomplex<f64>> {tolerance = "
    "1.0e-12 : f64}\n"
    "check.expect_eq_const %0#1, dense<[1, 3, 3]> : tensor<3xi32>\n"
    "check.expect_eq_const %0#2, dense<0> : tensor<i32>\n"
    "func.return\n"
    "}\n"
    "// -----\n"
    "func.func @getrf_batched_c64() {\n"
    "%a = stablehlo.constant dense<[[[(-0.03, -0.19), (0.88, 0.68), (-0.58, -0.07)], [(-0.11, "
    "0.67), (0.11, 1.44), (0.06, -0.68)], [(-1.23, 0.2), (0.08, -0.46), (1.36, 0.13)]], "
    "[[(-1.55, -1.19), (0.86, -0.58), (0.12, -0.2)], [(-0.64, 0.9), (2.0, 1.15), (0.76, "
    "-1.32)], [(-1.2, -0.79), (0.07, 0.65), (0.58, -1.99)]]]> : tensor<2x3x3xcomplex<f32>>\n"
    "%0:3 = stablehlo.custom_call @lapack_cgetrf_ffi(%a) {mhlo.backend_config = {}, "
    "operand_layouts = [dense<[1, 2, 0]> : tensor<3xindex>], output_operand_aliases = "
    "[#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, "
    "operand_tuple_indices = []>], result_layouts = [dense<[1, 2, 0]> : tensor<3xindex>, "
    "dense<[1, 0]> : tensor<2xindex>, dense<0> : tensor<1xindex>]} : "
    "(tensor<2x3x3xcomplex<f32>>) -> (tensor<2x3x3xcomplex<f32>>, tensor<2x3xi32>, "
    "tensor<2xi32>)\n"
    "check.expect_almost_eq_const %0#0, dense<[[[(-1.23, 0.2), (0.08, -0.46), (1.36, 0.13)], "
    "[(0.17341747697855628, -0.516517483418121), (0.3337246442140512, 1.5610934380835855), "
    "(-0.2429950415351923, -8.049455856773413e-05)], [(-0.0007083521153970036, "
    "0.15435636550969156), (0.5147411403562936, -0.4082208793916622), (-0.4338579092665656, "
    "-0.378986787000619)]], [[(-1.55, -1.19), (0.86, -0.58), (0.12, -0.2)], "
    "[(-0.020688210338867623, -0.5647619546430629), (2.3453537945844025, 1.6236961189964907), "
    "(0.8754349761692767, -1.2563662075106061)], [(0.7332792122767506, -0.05329178232860204), "
    "(0.0710353244082853, 0.4288449349058445), (-0.09830824101582247, "
    "-2.1231286179087077)]]]> : tensor<2x3x3xcomplex<f32>> {tolerance = 1.0e-5 : f64}\n"
    "check.expect_eq_const %0#1, dense<[[3, 2, 3], [1, 2, 3]]> : tensor<2x3xi32>\n"
    "check.expect_eq_const %0#2, dense<[0, 0]> : tensor<2xi32>\n"
    "func.return\n"
    "}\n"
    "// -----\n"
    "func.func @trsm_left_lower_adjoint_c128() {\n"
    "%l = stablehlo.constant dense<[[(-0.46, -0.3), (-0.1, 0.35), (1.26, -0.12)], [(0.69, "
    "-0.2), (-0.33, -1.11), (-0.37, -0.01)], [(-0.25, -0.44), (1.52, 1.17), (-0.43, 0.65)]]> "
    ": tensor<3x3xcomplex<f64>>\n"
    "%b = stablehlo.constant dense<[[(-0.02, -1.29), (0.67, 0.35)], [(-0.34, -1.69), (1.05, "
    "-2.04)], [(-0.01, -0.3), (0.58, -0.9)]]> : tensor<3x2xcomplex<f64>>\n"
    "%alpha = stablehlo.constant dense<(0.5, -1.0)> : tensor<complex<f64>>\n"
    "%0 = stablehlo.custom_call @lapack_ztrsm_ffi(%l, %b, %alpha) {mhlo.backend_config = "
    "{diag = 78 : ui8, side = 76 : ui8, trans_x = 67 : ui8, uplo = 76 : ui8}, operand_layouts "
    "= [dense<[0, 1]> : tensor<2xindex>, dense<[0, 1]> : tensor<2xindex>, dense<> : "
    "tensor<0xindex>], output_operand_aliases = "
    "[#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 1, "
    "operand_tuple_indices = []>], result_layouts = [dense<[0, 1]> : tensor<2xindex>]} : "
    "(tensor<3x3xcomplex<f64>>, tensor<3x2xcomplex<f64>>, tensor<complex<f64>>) -> "
    "tensor<3x2xcomplex<f64>>\n"
    "check.expect_almost_eq_const %0, dense<[[(0.09986209346862686, 4.794209384794985), "
    "(-5.600964723714246, 4.161110044304446)], [(0.751233850371886, 1.7136023348132168), "
    "(0.6447882896918612, 3.354413206545079)], [(0.3657392163319065, -0.22728021073427723), "
    "(1.5340796838985842, 0.07639117550214018)]]> : tensor<3x2xcomplex<f64>> {tolerance = "
    "1.0e-12 : f64}\n"
    "func.return\n"
    "}\n"
    "// -----\n"
    "func.func @trsm_right_upper_transposed_c64() {\n"
    "%u = stablehlo.constant dense<[[(-0.46, -0.3), (-0.1, 0.35), (1.26, -0.12)], [(0.69, "
    "-0.2), (-0.33, -1.11), (-0.37, -0.01)], [(-0.25, -0.44), (1.52, 1.17), (-0.43, 0.65)]]> "
    ": tensor<3x3xcomplex<f32>>\n"
    "%b = stablehlo.constant dense<[[(0.16, -0.18), (2.24, -0.21), (-0.83, 0.7)], [(-0.62, "
    "0.52), (0.21, -1.03), (0.49, -0.08)]]> : tensor<2x3xcomplex<f32>>\n"
    "%alpha = stablehlo.constant dense<(1.0, 0.0)> : tensor<complex<f32>>\n"
    "%0 = stablehlo.custom_call @lapack_ctrsm_ffi(%u, %b, %alpha) {mhlo.backend_config = "
    "{diag = 78 : ui8, side = 82 : ui8, trans_x = 84 : ui8, uplo = 85 : ui8}, operand_layouts "
    "= [dense<[0, 1]> : tensor<2xindex>, dense<[0, 1]> : tensor<2xindex>, dense<> : "
    "tensor<0xindex>], output_operand_aliases = "
    "[#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 1, "
    "operand_tuple_indices = []>], result_layouts = [dense<[0, 1]> : tensor<2xindex>]} : "
    "(tensor<3x3xcomplex<f32>>, tensor<2x3xcomplex<f32>>, tensor<complex<f32>>) -> "
    "tensor<2x3xcomplex<f32>>\n"
    "check.expect_almost_eq_const %0, dense<[[(1.3456764790728946, -0.7325217696800272), "
    "(-0.6294664094364876, 2.27290221496399), (1.336680935133355, 0.39265722752716503)], "
    "[(-1.0469060423532868, -0.9402653248314533), (0.985952742425816, 0.3423576781219544), "
    "(-0.4324991768192295, -0.4677313137965097)]]> : tensor<2x3xcomplex<f32>> {tolerance = "
    "1.0e-5 : f64}\n"
    "func.return\n"
    "}\n"
    "// -----\n"
    "func.func @geqrf_ungqr_c128() {\n"
    "%a = stablehlo.constant dense<[[(0.03, 0.68), (1.36, -0.14), (1.22, -0.38)], [(-0.51, "
    "0.46), (-0.3, 0.82), (-0.53, -0.2)], [(0.57, -0.15), (-0.06, 0.69), (0.75, -0.87)], "
    "[(-1.85, -1.51), (1.57, 0.39), (-0.1, -0.67)]]> : tensor<4x3xcomplex<f64>>\n"
    "%0:2 = stablehlo.custom_call @lapack_zgeqrf_ffi(%a) {mhlo.backend_config = {}, "
    "operand_layouts = [dense<[0, 1]> : tensor<2xindex>], result_layouts = [dense<[0, 1]> : "
    "tensor<2xindex>, dense<0> : tensor<1xindex>]} : (tensor<4x3xcomplex<f64>>) -> "
    "(tensor<4x3xcomplex<f64>>, tensor<3xcomplex<f64>>)\n"
    "check.expect_almost_eq_const %0#0, dense<[[(-2.642915057280502, 0.0), "
    "(1.1938711353238611, -0.31189046266518505), (-0.6474668927728553, "
    "-0.07941988124884442)], [(-0.13808386394503286, 0.20722582484389632), "
    "(2.050779376612465, 0.0), (0.6787769307253352, -0.5036349395930251)], "
    "[(0.18687852773911354, -0.1036611313583992), (0.13468781197494725, "
    "-0.24696343085080774), (-1.6099977736511648, 0.0)], [(-0.7850389196318825, "
    "-0.36520933652246546), (-0.5550436496828571, -0.45144646423158374), "
    "(0.49613604314788246, -0.14805835405010004)]]> : tensor<4x3xcomplex<f64>> {tolerance = "
    "1.0e-12 : f64}\n"
    "check.expect_almost_eq_const %0#1, dense<[(1.0113511026082196, 0.2572916591196481), "
    "(1.117730919423884, -0.39463489709168753), (1.3723419416137264, -0.5302183150384095)]> : "
    "tensor<3xcomplex<f64>> {tolerance = 1.0e-12 : f64}\n"
    "%1 = stablehlo.custom_call @lapack_zungqr_ffi(%0#0, %0#1) {mhlo.backend_config = {}, "
    "operand_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<0> : tensor<1xindex>], "
    "result_layouts = [dense<[0, 1]> : tensor<2xindex>]} : (tensor<4x3xcomplex<f64>>, "
    "tensor<3xcomplex<f64>>) -> tensor<4x3xcomplex<f64>>\n"
    "check.expect_almost_eq_const %1, dense<[[(-0.011351102608219588, -0.2572916591196481), "
    "(0.7089005209142479, 0.07979053544442685), (-0.44205898930522564, 0.15193948837257779)], "
    "[(0.19296874433973601, -0.17405023999270308), (-0.23215330202657747, "
    "0.5305196068300008), (0.31108364858424087, 0.4809889868445163)], [(-0.21567094955617552, "
    "0.05675551304109882), (0.08766511904307667, 0.2706168812200286), (-0.254693213849477, "
    "0.6148570767178773)], [(0.6999846608402188, 0.5713388312803949), (0.27117172728027683, "
    "-0.03597968668342422), (-0.08813474659317633, 0.05185757839748585)]]> : "
    "tensor<4x3xcomplex<f64>> {tolerance = 1.0e-12 : f64}\n"
    "func.return\n"
    "}\n"
    "// -----\n"
    "func.func @geqrf_batched_c64() {\n"
    "%a = stablehlo.constant dense<[[[(-1.92, 0.54), (-0.81, 1.04)], [(-0.47, -0.21), (-1.19, "
    "-0.81)], [(-1.49, 0.35), (0.04, 0.25)]], [[(0.9, 1.1), (-0.23, -1.28)], [(-0.74, -0.66), "
    "(0.38, -0.84)], [(0.72, -1.73), (-0.3, 0.13)]]]> : tensor<2x3x2xcomplex<f32>>\n"
    "%0:2 = stablehlo.custom_call @lapack_cgeqrf_ffi(%a) {mhlo.backend_config = {}, "
    "operand_layouts = [dense<[1, 2, 0]> : tensor<3xindex>], result_layouts = [dense<[1, 2, "
    "0]> : tensor<3xindex>, dense<[1, 0]> : tensor<2xindex>]} : (tensor<2x3x2xcomplex<f32>>) "
    "-> (tensor<2x3x2xcomplex<f32>>, tensor<2x2xcomplex<f32>>)\n"
    "check.expect_almost_eq_const %0#0, dense<[[[(2.56624238917527, 0.0), "
    "(1.1199643541558317, -0.7072987367274104)], [(0.09771460371618527, 0.05857148660552995), "
    "(1.4558187876394921, 0.0)], [(0.33663977854635824, -0.0374956377726818), "
    "(-0.1768124681452035, 0.23949935612226833)]], [[(-2.552351856621653, 0.0), "
    "(0.698453857517756, 0.1770915709867198)], [(-0.24989009133309814, -0.11155320069561436), "
    "(-1.459109586153152, 0.0)], [(0.044383058257958345, -0.5152491512914459), "
    "(0.25644562099642076, 0.02917830961918818)]]]> : tensor<2x3x2xcomplex<f32>> {tolerance = "
    "1.0e-5 : f64}\n"
    "check.expect_almost_eq_const %0#1, dense<[[(1.7481756236662598, -0.21042439415613554), "
    "(1.6175716517925924, 0.5960190441843584)], [(1.3526159599293097, 0.430975062135823), "
    "(1.212822814779243, -0.8962210636327054)]]> : tensor<2x2xcomplex<f32>> {tolerance = "
    "1.0e-5 : f64}\n"
    "func.return\n"
    "}\n"
    "// -----\n"
    "func.func @heevd_lower_c128() {\n"
    "%a = stablehlo.constant dense<[[(1.06, 0.0), (99.0, 99.0), (99.0, 99.0)], "
    "[(0.07999999999999996, 1.52), (1.26, 0.0), (99.0, 99.0)], [(2.3499999999999996, -0.37), "
    "(-0.93, 0.78), (1.22, 0.0)]]> : tensor<3x3xcomplex<f64>>\n"
    "%0:3 = stablehlo.custom_call @lapack_zheevd_ffi(%a) {mhlo.backend_config = {mode = 86 : "
    "ui8, uplo = 76 : ui8}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>], "
    "result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<0> : tensor<1xindex>, dense<> : "
    "tensor<0xindex>]} : (tensor<3x3xcomplex<f64>>) -> (tensor<3x3xcomplex<f64>>, "
    "tensor<3xf64>, tensor<i32>)\n"
    "check.expect_almost_eq_const %0#0, dense<[[(0.6490093376262995, -0.0), "
    "(0.3638406293011527, -0.10002241067596848), (0.6606075941935429, 0.0)], "
    "[(-0.17837728714312706, -0.4293479346389449), (0.7905024544635381, "
    "4.74786097039044e-18), (-0.2601368604149512, 0.30212013801351323)], "
    "[(-0.6021572439972989, -0.005952111237207014), (0.1534583641563016, 0.4573531609051175), "
    "(0.5763131627879428, -0.26928234429929615)]]> : tensor<3x3xcomplex<f64>> {tolerance = "
    "1.0e-12 : f64}\n"
    "check.expect_almost_eq_const %0#1, dense<[-2.1444936263398597, 1.7598852301861156, "
    "3.9246083961537437]> : tensor<3xf64> {tolerance = 1.0e-12 : f64}\n"
    "check.expect_eq_const %0#2, dense<0> : tensor<i32>\n"
    "func.return\n"
    "}\n"
    "// -----\n"
    "func.func @heevd_upper_c64() {\n"
    "%a = stablehlo.constant dense<[[(1.06, 0.0), (0.07999999999999996, -1.52), "
    "(2.3499999999999996, 0.37)], [(99.0, 99.0), (1.26, 0.0), (-0.93, -0.78)], [(99.0, 99.0), "
    "(99.0, 99.0), (1.22, 0.0)]]> : tensor<3x3xcomplex<f32>>\n"
    "%0:3 = stablehlo.custom_call @lapack_cheevd_ffi(%a) {mhlo.backend_config = {mode = 86 : "
    "ui8, uplo = 85 : ui8}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>], "
    "result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<0> : tensor<1xindex>, dense<> : "
    "tensor<0xindex>]} : (tensor<3x3xcomplex<f32>>) -> (tensor<3x3xcomplex<f32>>, "
    "tensor<3xf32>, tensor<i32>)\n"
    "check.expect_almost_eq_const %0#0, dense<[[(0.6490093376262995, -0.0), "
    "(0.3638406293011527, -0.10002241067596848), (0.6606075941935429, 0.0)], "
    "[(-0.17837728714312706, -0.4293479346389449), (0.7905024544635381, "
    "4.74786097039044e-18), (-0.2601368604149512, 0.30212013801351323)], "
    "[(-0.6021572439972989, -0.005952111237207014), (0.1534583641563016, 0.4573531609051175), "
    "(0.5763131627879428, -0.26928234429929615)]]> : tensor<3x3xcomplex<f32>> {tolerance = "
    "1.0e-5 : f64}\n"
    "check.expect_almost_eq_const %0#1, dense<[-2.1444936263398597, 1.7598852301861156, "
    "3.9246083961537437]> : tensor<3xf32> {tolerance = 1.0e-5 : f64}\n"
    "func.return\n"
    "}\n"
    "// -----\n"
    "func.func @gesdd_reduced_c128() {\n"
    "%a = stablehlo.constant dense<[[(0.6, 0.47), (-0.1, -0.09), (0.49, -1.01)], [(-0.52, "
    "1.26), (1.09, -1.26), (0.61, 0.57)], [(-0.18, 1.3), (0.63, -1.6), (1.26, -0.3)], [(1.79, "
    "-1.31), (-1.57, 0.24), (0.88, 1.51)]]> : tensor<4x3xcomplex<f64>>\n"
    "%0:5 = stablehlo.custom_call @lapack_zgesdd_ffi(%a) {mhlo.backend_config = {mode = 83 : "
    "ui8}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>], result_layouts = [dense<[0, "
    "1]> : tensor<2xindex>, dense<0> : tensor<1xindex>, dense<[0, 1]> : tensor<2xindex>, "
    "dense<[0, 1]> : tensor<2xindex>, dense<> : tensor<0xindex>]} : "
    "(tensor<4x3xcomplex<f64>>) -> (tensor<4x3xcomplex<f64>>, tensor<3xf64>, "
    "tensor<4x3xcomplex<f64>>, tensor<3x3xcomplex<f64>>, tensor<i32>)\n"
    "check.expect_almost_eq_const %0#1, dense<[4.102489054654368, 2.6116007730355797, "
    "0.626996777281255]> : tensor<3xf64> {tolerance = 1.0e-12 : f64}\n"
    "check.expect_almost_eq_const %0#2, dense<[[(0.12743411594564713, 0.10793776902774575), "
    "(0.16521814718924394, -0.3611649050993803), (0.5879925721684953, 0.6729717132962593)], "
    "[(-0.20139863455840643, 0.48061381975780737), (0.20365522656340596, 0.2596197080243635), "
    "(0.10851425818819845, -0.18293958319629275)], [(-0.05174290675579524, "
    "0.5302562387908762), (0.4702900231819364, -0.06415603673265742), (0.1697381120213388, "
    "-0.28398437343384714)], [(0.5260644018224045, -0.3741205264688557), "
    "(0.40361596384877235, 0.5875291327546062), (0.21482402777097911, "
    "-0.022892333054463098)]]> : tensor<4x3xcomplex<f64>> {tolerance = 1.0e-12 : f64}\n"
    "check.expect_almost_eq_const %0#3, dense<[[(0.7234368908526358, -0.0), "
    "(-0.6445535260857862, -0.23965173682962798), (-0.05404913268094895, "
    "-0.02890593805486357)], [(-0.024751923799874537, -0.11281426085825798), "
    "(-0.07003034625716494, -0.10849068437254773), (0.9848785746591752, "
    "1.1063111136279006e-17)], [(0.6331011485735929, -0.24996456837615774), "
    "(0.7144531608526905, -9.409342889754119e-18), (0.038080131469014226, "
    "-0.15750312621094298)]]> : tensor<3x3xcomplex<f64>> {tolerance = 1.0e-12 : f64}\n"
    "check.expect_eq_const %0#4, dense<0> : tensor<i32>\n"
    "func.return\n"
    "}\n"
    "// -----\n"
    "func.func @gesdd_full_wide_c64() {\n"
    "%a = stablehlo.constant dense<[[(2.02, -0.75), (-1.78, 0.3), (-0.57, -0.02)], [(0.7, "
    "-0.2), (1.58, -0.73), (0.42, 0.39)]]> : tensor<2x3xcomplex<f32>>\n"
    "%0:5 = stablehlo.custom_call @lapack_cgesdd_ffi(%a) {mhlo.backend_config = {mode = 65 : "
    "ui8}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>], result_layouts = [dense<[0, "
    "1]> : tensor<2xindex>, dense<0> : tensor<1xindex>, dense<[0, 1]> : tensor<2xindex>, "
    "dense<[0, 1]> : tensor<2xindex>, dense<> : tensor<0xindex>]} : "
    "(tensor<2x3xcomplex<f32>>) -> (tensor<2x3xcomplex<f32>>, tensor<2xf32>, "
    "tensor<2x2xcomplex<f32>>, tensor<3x3xcomplex<f32>>, tensor<i32>)\n"
    "check.expect_almost_eq_const %0#1, dense<[2.986259016772034, 1.7879197646280782]> : "
    "tensor<2xf32> {tolerance = 1.0e-5 : f64}\n"
    "%z = stablehlo.constant dense<0.0> : tensor<2xf32>\n"
    "%sc = stablehlo.complex %0#1, %z : tensor<2xcomplex<f32>>\n"
    "%sb = stablehlo.broadcast_in_dim %sc, dims = [1] : (tensor<2xcomplex<f32>>) -> "
    "tensor<2x2xcomplex<f32>>\n"
    "%us = stablehlo.multiply %0#2, %sb : tensor<2x2xcomplex<f32>>\n"
    "%vt2 = stablehlo.slice %0#3 [0:2, 0:3] : (tensor<3x3xcomplex<f32>>) -> "
    "tensor<2x3xcomplex<f32>>\n"
    "%re = stablehlo.dot_general %us, %vt2, contracting_dims = [1] x [0] : "
    "(tensor<2x2xcomplex<f32>>, tensor<2x3xcomplex<f32>>) -> tensor<2x3xcomplex<f32>>\n"
    "check.expect_almost_eq %re, %a {tolerance = 1.0e-5 : f64} : tensor<2x3xcomplex<f32>>\n"
    "%vh = stablehlo.transpose %0#3, dims = [1, 0] : (tensor<3x3xcomplex<f32>>) -> "
    "tensor<3x3xcomplex<f32>>\n"
    "%vc = stablehlo.real %vh : (tensor<3x3xcomplex<f32>>) -> tensor<3x3xf32>\n"
    "%vi = stablehlo.imag %vh : (tensor<3x3xcomplex<f32>>) -> tensor<3x3xf32>\n"
    "%vn = stablehlo.negate %vi : tensor<3x3xf32>\n"
    "%vconj = stablehlo.complex %vc, %vn : tensor<3x3xcomplex<f32>>\n"
    "%id = stablehlo.dot_general %0#3, %vconj, contracting_dims = [1] x [0] : "
    "(tensor<3x3xcomplex<f32>>, tensor<3x3xcomplex<f32>>) -> tensor<3x3xcomplex<f32>>\n"
    "check.expect_almost_eq_const %id, dense<[[(1.0, 0.0), (0.0, 0.0), (0.0, 0.0)], [(0.0, "
    "0.0), (1.0, 0.0), (0.0, 0.0)], [(0.0, 0.0), (0.0, 0.0), (1.0, 0.0)]]> : "
    "tensor<3x3xcomplex<f32>> {tolerance = 1.0e-5 : f64}\n"
    "func.return\n"
    "}\n";

enum { kComplexFunctions = 12 };

/* geev (jnp.linalg.eig): JAX's own form on an iota 4 x 4 f32 (both vector sets; the values
 * LAPACK gives), a real f64 matrix with a conjugate pair and a complex one against numpy's
 * values, in LAPACK's order; the vectors checked in the program (A v = w v, u^H A = w u^H);
 * vectors not asked for are zeros. */
static const char kEigProgram[] =
    "func.func @geev_jax_iota_f32() {\n"
    "  %0 = stablehlo.iota dim = 0 : tensor<16xf32>\n"
    "  %1 = stablehlo.reshape %0 : (tensor<16xf32>) -> tensor<4x4xf32>\n"
    "  %2:5 = stablehlo.custom_call @lapack_sgeev_ffi(%1) {mhlo.backend_config = "
    "{compute_left = 86 : ui8, compute_right = 86 : ui8}, operand_layouts = [dense<[0, 1]> "
    ": tensor<2xindex>], result_layouts = [dense<0> : tensor<1xindex>, dense<0> : "
    "tensor<1xindex>, dense<[0, 1]> : tensor<2xindex>, dense<[0, 1]> : tensor<2xindex>, "
    "dense<> : tensor<0xindex>]} : (tensor<4x4xf32>) -> (tensor<4xf32>, tensor<4xf32>, "
    "tensor<4x4xcomplex<f32>>, tensor<4x4xcomplex<f32>>, tensor<i32>)\n"
    "  %w = stablehlo.complex %2#0, %2#1 : tensor<4xcomplex<f32>>\n"
    "  check.expect_almost_eq_const %2#0, dense<[32.464241, -2.4642482, 0.0, 0.0]> : "
    "tensor<4xf32> {tolerance = 1.0e-4 : f64}\n"
    "  check.expect_almost_eq_const %2#1, dense<[0.0, 0.0, 0.0, 0.0]> : tensor<4xf32> "
    "{tolerance = 1.0e-5 : f64}\n"
    "  check.expect_eq_const %2#4, dense<0> : tensor<i32>\n"
    "  %ac = stablehlo.convert %1 : (tensor<4x4xf32>) -> tensor<4x4xcomplex<f32>>\n"
    "  %av = stablehlo.dot_general %ac, %2#3, contracting_dims = [1] x [0] : "
    "(tensor<4x4xcomplex<f32>>, tensor<4x4xcomplex<f32>>) -> tensor<4x4xcomplex<f32>>\n"
    "  %wb = stablehlo.broadcast_in_dim %w, dims = [1] : (tensor<4xcomplex<f32>>) -> "
    "tensor<4x4xcomplex<f32>>\n"
    "  %vw = stablehlo.multiply %2#3, %wb : tensor<4x4xcomplex<f32>>\n"
    "  check.expect_almost_eq %av, %vw {tolerance = 1.0e-3 : f64} : "
    "tensor<4x4xcomplex<f32>>\n"
    "  %lre = stablehlo.real %2#2 : (tensor<4x4xcomplex<f32>>) -> tensor<4x4xf32>\n"
    "  %lim = stablehlo.imag %2#2 : (tensor<4x4xcomplex<f32>>) -> tensor<4x4xf32>\n"
    "  %lneg = stablehlo.negate %lim : tensor<4x4xf32>\n"
    "  %lc = stablehlo.complex %lre, %lneg : tensor<4x4xcomplex<f32>>\n"
    "  %lh = stablehlo.transpose %lc, dims = [1, 0] : (tensor<4x4xcomplex<f32>>) -> "
    "tensor<4x4xcomplex<f32>>\n"
    "  %la = stablehlo.dot_general %lh, %ac, contracting_dims = [1] x [0] : "
    "(tensor<4x4xcomplex<f32>>, tensor<4x4xcomplex<f32>>) -> tensor<4x4xcomplex<f32>>\n"
    "  %wc = stablehlo.broadcast_in_dim %w, dims = [0] : (tensor<4xcomplex<f32>>) -> "
    "tensor<4x4xcomplex<f32>>\n"
    "  %wl = stablehlo.multiply %wc, %lh : tensor<4x4xcomplex<f32>>\n"
    "  check.expect_almost_eq %la, %wl {tolerance = 1.0e-3 : f64} : "
    "tensor<4x4xcomplex<f32>>\n"
    "  func.return\n"
    "}\n"
    "// -----\n"
    "func.func @geev_pairs_f64() {\n"
    "  %a = stablehlo.constant dense<[[-5.0, -4.0, 0.0, 5.0, 4.0], [-2.0, -2.0, 3.0, -5.0, "
    "5.0], [0.0, -1.0, -5.0, -1.0, -5.0], [4.0, -5.0, 1.0, 1.0, 1.0], [4.0, 1.0, 3.0, -5.0, "
    "-4.0]]> : tensor<5x5xf64>\n"
    "  %2:5 = stablehlo.custom_call @lapack_dgeev_ffi(%a) {mhlo.backend_config = "
    "{compute_left = 86 : ui8, compute_right = 86 : ui8}, operand_layouts = [dense<[0, 1]> "
    ": tensor<2xindex>], result_layouts = [dense<0> : tensor<1xindex>, dense<0> : "
    "tensor<1xindex>, dense<[0, 1]> : tensor<2xindex>, dense<[0, 1]> : tensor<2xindex>, "
    "dense<> : tensor<0xindex>]} : (tensor<5x5xf64>) -> (tensor<5xf64>, tensor<5xf64>, "
    "tensor<5x5xcomplex<f64>>, tensor<5x5xcomplex<f64>>, tensor<i32>)\n"
    "  check.expect_almost_eq_const %2#0, dense<[7.130480696380186, -9.948628252685522, "
    "-4.286318683239889, -4.286318683239889, -3.609215077214888]> : tensor<5xf64> "
    "{tolerance = 1.0e-12 : f64}\n"
    "  check.expect_almost_eq_const %2#1, dense<[0.0, 0.0, 3.780902554533869, "
    "-3.780902554533869, 0.0]> : tensor<5xf64> {tolerance = 1.0e-12 : f64}\n"
    "  %w = stablehlo.complex %2#0, %2#1 : tensor<5xcomplex<f64>>\n"
    "  %ac = stablehlo.convert %a : (tensor<5x5xf64>) -> tensor<5x5xcomplex<f64>>\n"
    "  %av = stablehlo.dot_general %ac, %2#3, contracting_dims = [1] x [0] : "
    "(tensor<5x5xcomplex<f64>>, tensor<5x5xcomplex<f64>>) -> tensor<5x5xcomplex<f64>>\n"
    "  %wb = stablehlo.broadcast_in_dim %w, dims = [1] : (tensor<5xcomplex<f64>>) -> "
    "tensor<5x5xcomplex<f64>>\n"
    "  %vw = stablehlo.multiply %2#3, %wb : tensor<5x5xcomplex<f64>>\n"
    "  check.expect_almost_eq %av, %vw {tolerance = 1.0e-12 : f64} : "
    "tensor<5x5xcomplex<f64>>\n"
    "  %lre = stablehlo.real %2#2 : (tensor<5x5xcomplex<f64>>) -> tensor<5x5xf64>\n"
    "  %lim = stablehlo.imag %2#2 : (tensor<5x5xcomplex<f64>>) -> tensor<5x5xf64>\n"
    "  %lneg = stablehlo.negate %lim : tensor<5x5xf64>\n"
    "  %lc = stablehlo.complex %lre, %lneg : tensor<5x5xcomplex<f64>>\n"
    "  %lh = stablehlo.transpose %lc, dims = [1, 0] : (tensor<5x5xcomplex<f64>>) -> "
    "tensor<5x5xcomplex<f64>>\n"
    "  %la = stablehlo.dot_general %lh, %ac, contracting_dims = [1] x [0] : "
    "(tensor<5x5xcomplex<f64>>, tensor<5x5xcomplex<f64>>) -> tensor<5x5xcomplex<f64>>\n"
    "  %wc = stablehlo.broadcast_in_dim %w, dims = [0] : (tensor<5xcomplex<f64>>) -> "
    "tensor<5x5xcomplex<f64>>\n"
    "  %wl = stablehlo.multiply %wc, %lh : tensor<5x5xcomplex<f64>>\n"
    "  check.expect_almost_eq %la, %wl {tolerance = 1.0e-12 : f64} : "
    "tensor<5x5xcomplex<f64>>\n"
    "  func.return\n"
    "}\n"
    "// -----\n"
    "func.func @geev_c128_right_only() {\n"
    "  %a = stablehlo.constant dense<[[(-5.0, -2.0), (-4.0, 0.0), (0.0, 0.0), (5.0, 2.0), "
    "(4.0, -1.0)], [(-2.0, 1.0), (-2.0, 1.0), (3.0, -2.0), (-5.0, -1.0), (5.0, -1.0)], "
    "[(0.0, -2.0), (-1.0, 1.0), (-5.0, -2.0), (-1.0, 1.0), (-5.0, 0.0)], [(4.0, 0.0), "
    "(-5.0, 1.0), (1.0, -1.0), (1.0, -1.0), (1.0, -2.0)], [(4.0, 0.0), (1.0, -2.0), (3.0, "
    "1.0), (-5.0, 0.0), (-4.0, -2.0)]]> : tensor<5x5xcomplex<f64>>\n"
    "  %2:4 = stablehlo.custom_call @lapack_zgeev_ffi(%a) {mhlo.backend_config = "
    "{compute_left = 78 : ui8, compute_right = 86 : ui8}, operand_layouts = [dense<[0, 1]> "
    ": tensor<2xindex>], result_layouts = [dense<0> : tensor<1xindex>, dense<[0, 1]> : "
    "tensor<2xindex>, dense<[0, 1]> : tensor<2xindex>, dense<> : tensor<0xindex>]} : "
    "(tensor<5x5xcomplex<f64>>) -> (tensor<5xcomplex<f64>>, tensor<5x5xcomplex<f64>>, "
    "tensor<5x5xcomplex<f64>>, tensor<i32>)\n"
    "  check.expect_almost_eq_const %2#0, dense<[(7.504822058327413, -0.07956489845910619), "
    "(-2.5364765273259913, -4.896870323487432), (-7.567265475603781, -3.283407326553162), "
    "(-7.635607494858541, -0.03453723460802029), (-4.765472560539117, 2.294379783107723)]> "
    ": tensor<5xcomplex<f64>> {tolerance = 1.0e-12 : f64}\n"
    "  check.expect_almost_eq_const %2#1, dense<(0.0, 0.0)> : tensor<5x5xcomplex<f64>> "
    "{tolerance = 0.0 : f64}\n"
    "  %av = stablehlo.dot_general %a, %2#2, contracting_dims = [1] x [0] : "
    "(tensor<5x5xcomplex<f64>>, tensor<5x5xcomplex<f64>>) -> tensor<5x5xcomplex<f64>>\n"
    "  %wb = stablehlo.broadcast_in_dim %2#0, dims = [1] : (tensor<5xcomplex<f64>>) -> "
    "tensor<5x5xcomplex<f64>>\n"
    "  %vw = stablehlo.multiply %2#2, %wb : tensor<5x5xcomplex<f64>>\n"
    "  check.expect_almost_eq %av, %vw {tolerance = 1.0e-12 : f64} : "
    "tensor<5x5xcomplex<f64>>\n"
    "  func.return\n"
    "}\n";

enum { kEigFunctions = 3 };

static void run_program(kiln_device_t *dev) {
  kiln_test_run_checks(kProgram, sizeof kProgram - 1, "lapack.mlir", dev, kFunctions);
  kiln_test_run_checks(kComplexProgram, sizeof kComplexProgram - 1, "lapack_complex.mlir", dev,
                       kComplexFunctions);
  kiln_test_run_checks(kEigProgram, sizeof kEigProgram - 1, "lapack_eig.mlir", dev, kEigFunctions);
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

/* lapack_?gesvd_ffi (jnp.linalg.svd's QR algorithm) has gesdd's form: the same results, on
 * the host and the evaluator. */
static void test_gesvd_gives_gesdds_results(void **state) {
  (void)state;
  static const float a[12] = {1, 2, 3, 4, 5, 6, 7, 8, 10, 1, 0, 1};
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t *got[2], *want[2];
  for (int k = 0; k < 2; k++) {
    char hlo[512];
    snprintf(hlo, sizeof hlo,
             "HloModule m\nENTRY e {\n  a = f64[4,3] parameter(0)\n"
             "  ROOT v = (f64[4,3], f64[3], f64[4,4], f64[3,3], s32[]) custom-call(a), "
             "custom_call_target=\"lapack_dges%s_ffi\", api_version=API_VERSION_TYPED_FFI, "
             "backend_config={mode = 65 : ui8}\n}\n",
             k ? "vd" : "dd");
    kiln_status st[2];
    run_both(hlo, a, &arena, &got[k], &want[k], st);
    for (int i = 0; i < 2; i++)
      if (st[i]) fail_msg("%s", kiln_status_message(st[i]));
  }
  assert_true(kiln_literal_equal(got[0], got[1]));
  assert_true(kiln_literal_equal(want[0], want[1]));
  /* s: numpy.linalg.svd's singular values */
  assert_true(fabs(kiln_literal_get_f64(want[1]->tuple_elements[1], 0) - 17.45089558) < 1e-6);
  kiln_arena_destroy(&arena);
}

/* A form kiln does not implement (a complex tridiagonal solve): the compiler and the evaluator
 * name the call. */
static void test_unimplemented_lapack_forms_are_refused_by_name(void **state) {
  (void)state;
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t *got = NULL, *want = NULL;
  kiln_status st[2];
  run_both(
      "HloModule m\nENTRY e {\n  a = c64[2,3] parameter(0)\n"
      "  ROOT p = (c64[2,3], c64[2,3], c64[2,3], c64[2,3], s32[]) custom-call(a, a, a, a), "
      "custom_call_target=\"lapack_cgtsv_ffi\", api_version=API_VERSION_TYPED_FFI\n}\n",
      NULL, &arena, &got, &want, st);
  for (int i = 0; i < 2; i++) {
    assert_non_null(st[i]);
    assert_int_equal(kiln_status_code(st[i]), KILN_UNIMPLEMENTED);
    assert_non_null(strstr(kiln_status_message(st[i]), "custom call p (lapack_cgtsv_ffi)"));
    kiln_status_free(st[i]);
  }
  kiln_arena_destroy(&arena);
}

/* Runs `hlo` (one [2, 3, 3] parameter a[b][i][j] = 1 + (i + j) % 3 + b, plus i (i - j) when
 * complex: Hermitian) on the host, directly and through a serialized executable read back:
 * the same bits. */
static void run_serialized_both_ways(const char *hlo) {
  kiln_hlo_module_t *m = NULL;
  assert_null(kiln_hlo_parse_module(hlo, strlen(hlo), NULL, &m));
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t *a = kiln_literal_make(&arena, m->entry->parameters[0]->shape), *r[2];
  bool cplx = kiln_elem_type_is_complex(a->shape->type);
  for (int64_t x = 0; x < a->num_elements; x++) {
    int64_t i = (x / 3) % 3, j = x % 3;
    double re = 1 + (double)((i + j) % 3) + (double)(x / 9);
    if (cplx)
      kiln_literal_set_c128(a, x, re, (double)(i - j));
    else
      kiln_literal_set_f64(a, x, re);
  }
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

/* The host's built-in eigh, QR, SVD, gtsv and eig, serialized and read back: the same bits (their
 * f64 views next to s32 infos; format 4 records each view's element size). */
static void test_builtin_targets_survive_serialization(void **state) {
  (void)state;
  run_serialized_both_ways(
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
      "  g = (f64[2,3], f64[2,3], c128[2,3,3], c128[2,3,3], s32[2]) custom-call(a), "
      "custom_call_target=\"lapack_dgeev_ffi\", api_version=API_VERSION_TYPED_FFI, "
      "backend_config={compute_left = 86 : ui8, compute_right = 78 : ui8}\n"
      "  ROOT r = ((f64[2,3,3]{1,2,0}, f64[2,3], s32[2]), (f64[2,3,3], f64[2,3], s32[2], f64[8]), "
      "(f64[2,3,3], f64[2,3], f64[2,3,3], f64[2,3,3], s32[2]), "
      "(f64[2,3], f64[2,3], f64[2,3], f64[2,3,3], s32[2]), "
      "(f64[2,3], f64[2,3], c128[2,3,3], c128[2,3,3], s32[2])) tuple(e, q, v, t, g)\n}\n");
}

/* The complex built-ins likewise (16-byte views, the recipe's complex flag). */
static void test_complex_builtin_targets_survive_serialization(void **state) {
  (void)state;
  run_serialized_both_ways(
      "HloModule m\nENTRY e {\n  a = c128[2,3,3] parameter(0)\n"
      "  e = (c128[2,3,3]{1,2,0}, f64[2,3], s32[2]) custom-call(a), "
      "custom_call_target=\"lapack_zheevd_ffi\", api_version=API_VERSION_TYPED_FFI, "
      "backend_config={mode = 86 : ui8, uplo = 85 : ui8}\n"
      "  q = (c128[2,3,3], c128[2,3]) custom-call(a), custom_call_target=\"lapack_zgeqrf_ffi\", "
      "api_version=API_VERSION_TYPED_FFI\n"
      "  q0 = c128[2,3,3] get-tuple-element(q), index=0\n"
      "  q1 = c128[2,3] get-tuple-element(q), index=1\n"
      "  g = c128[2,3,3] custom-call(q0, q1), custom_call_target=\"lapack_zungqr_ffi\", "
      "api_version=API_VERSION_TYPED_FFI\n"
      "  v = (c128[2,3,3], f64[2,3], c128[2,3,3], c128[2,3,3], s32[2]) custom-call(a), "
      "custom_call_target=\"lapack_zgesdd_ffi\", api_version=API_VERSION_TYPED_FFI, "
      "backend_config={mode = 65 : ui8}\n"
      "  x = (c128[2,3], c128[2,3,3], c128[2,3,3], s32[2]) custom-call(a), "
      "custom_call_target=\"lapack_zgeev_ffi\", api_version=API_VERSION_TYPED_FFI, "
      "backend_config={compute_left = 86 : ui8, compute_right = 86 : ui8}\n"
      "  ROOT r = ((c128[2,3,3]{1,2,0}, f64[2,3], s32[2]), (c128[2,3,3], c128[2,3]), c128[2,3,3], "
      "(c128[2,3,3], f64[2,3], c128[2,3,3], c128[2,3,3], s32[2]), "
      "(c128[2,3], c128[2,3,3], c128[2,3,3], s32[2])) tuple(e, q, g, v, x)\n}\n");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lapack_targets_on_the_reference_evaluator),
      cmocka_unit_test(test_lapack_targets_on_the_host_backend),
      cmocka_unit_test(test_potrf_info_names_the_first_failing_column),
      cmocka_unit_test(test_gesvd_gives_gesdds_results),
      cmocka_unit_test(test_unimplemented_lapack_forms_are_refused_by_name),
      cmocka_unit_test(test_builtin_targets_survive_serialization),
      cmocka_unit_test(test_complex_builtin_targets_survive_serialization),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
