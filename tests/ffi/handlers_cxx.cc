// FFI handlers written in C++ against OpenXLA's header-only binding (xla/ffi/api/ffi.h from
// ../shared/abi), built with g++ -std=c++17 into a shared library that test_ffi_cxx opens with
// dlopen through kiln's registry. Nothing here knows about kiln.
#include <cmath>
#include <cstdint>
#include <memory>
#include <string_view>
#include <thread>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

// out = in * scale (typed buffers: a non-f32 buffer is a decoding error).
static ffi::Error Scale(ffi::Buffer<ffi::F32> in, ffi::ResultBuffer<ffi::F32> out, float scale) {
  if (in.element_count() != out->element_count())
    return ffi::Error::InvalidArgument("scale: sizes differ");
  for (size_t i = 0; i < in.element_count(); ++i) out->typed_data()[i] = in.typed_data()[i] * scale;
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    KilnCxxScale, Scale,
    ffi::Ffi::Bind().Arg<ffi::Buffer<ffi::F32>>().Ret<ffi::Buffer<ffi::F32>>().Attr<float>("scale"),
    {ffi::Traits::kCmdBufferCompatible});

// Every attribute kind, written to an f64 result in a fixed order.
static ffi::Error Attrs(ffi::ResultBuffer<ffi::F64> out, bool b, int8_t i8, int16_t i16,
                        int32_t i32, int64_t i64, uint8_t u8, uint16_t u16, uint32_t u32,
                        uint64_t u64, float f32, double f64, ffi::Span<const int64_t> arr,
                        ffi::Span<const float> farr, std::string_view str, ffi::Dictionary dict) {
  if (out->element_count() < 16) return ffi::Error::InvalidArgument("attrs: need 16 results");
  double* o = out->typed_data();
  o[0] = b;
  o[1] = i8;
  o[2] = i16;
  o[3] = i32;
  o[4] = static_cast<double>(i64);
  o[5] = u8;
  o[6] = u16;
  o[7] = u32;
  o[8] = static_cast<double>(u64);
  o[9] = f32;
  o[10] = f64;
  double s = 0;
  for (int64_t v : arr) s += static_cast<double>(v);
  o[11] = s + 1000.0 * static_cast<double>(arr.size());
  s = 0;
  for (float v : farr) s += v;
  o[12] = s;
  o[13] = static_cast<double>(str.size()) + (str == "hello" ? 100.0 : 0.0);
  auto lo = dict.get<int64_t>("lo");
  if (lo.has_error()) return lo.error();
  auto name = dict.get<std::string_view>("name");
  if (name.has_error()) return name.error();
  o[14] = static_cast<double>(*lo);
  o[15] = static_cast<double>(dict.size()) + (*name == "inner" ? 100.0 : 0.0);
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(KilnCxxAttrs, Attrs,
                              ffi::Ffi::Bind()
                                  .Ret<ffi::Buffer<ffi::F64>>()
                                  .Attr<bool>("b")
                                  .Attr<int8_t>("i8")
                                  .Attr<int16_t>("i16")
                                  .Attr<int32_t>("i32")
                                  .Attr<int64_t>("i64")
                                  .Attr<uint8_t>("u8")
                                  .Attr<uint16_t>("u16")
                                  .Attr<uint32_t>("u32")
                                  .Attr<uint64_t>("u64")
                                  .Attr<float>("f32")
                                  .Attr<double>("f64")
                                  .Attr<ffi::Span<const int64_t>>("arr")
                                  .Attr<ffi::Span<const float>>("farr")
                                  .Attr<std::string_view>("str")
                                  .Attr<ffi::Dictionary>("dict"));

// out = sum of any number of f32 arguments.
static ffi::Error Sum(ffi::RemainingArgs args, ffi::ResultBuffer<ffi::F32> out) {
  size_t n = out->element_count();
  for (size_t i = 0; i < n; ++i) out->typed_data()[i] = 0;
  for (size_t k = 0; k < args.size(); ++k) {
    auto buf = args.get<ffi::Buffer<ffi::F32>>(k);
    if (buf.has_error()) return buf.error();
    if (buf->element_count() != n) return ffi::Error::InvalidArgument("sum: sizes differ");
    for (size_t i = 0; i < n; ++i) out->typed_data()[i] += buf->typed_data()[i];
  }
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(KilnCxxSum, Sum,
                              ffi::Ffi::Bind().RemainingArgs().Ret<ffi::Buffer<ffi::F32>>());

// State across stages: instantiate keeps `bias`, execute adds it.
struct KilnBias {
  static ffi::TypeId id;
  explicit KilnBias(float b) : bias(b) {}
  float bias;
};
ffi::TypeId KilnBias::id = {};
XLA_FFI_REGISTER_TYPE(ffi::GetXlaFfiApi(), "kiln_test_bias", &KilnBias::id,
                      ffi::MakeTypeInfo<KilnBias>());

static ffi::ErrorOr<std::unique_ptr<KilnBias>> BiasInstantiate(float bias) {
  return std::make_unique<KilnBias>(bias);
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(KilnCxxBiasInstantiate, BiasInstantiate,
                              ffi::Ffi::BindInstantiate().Attr<float>("bias"));

static ffi::Error BiasExecute(KilnBias* state, ffi::Buffer<ffi::F32> in,
                              ffi::ResultBuffer<ffi::F32> out) {
  for (size_t i = 0; i < in.element_count(); ++i)
    out->typed_data()[i] = in.typed_data()[i] + state->bias;
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(KilnCxxBiasExecute, BiasExecute,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::State<KilnBias>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());

// A failing handler.
static ffi::Error Fail(std::string_view why) {
  return ffi::Error(ffi::ErrorCode::kInternal,
                    std::string("C++ handler failed: ") + std::string(why));
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(KilnCxxFail, Fail, ffi::Ffi::Bind().Attr<std::string_view>("why"));

// An asynchronous handler: a thread doubles the input, then completes the future.
static ffi::Future Async(ffi::Buffer<ffi::F32> in, ffi::ResultBuffer<ffi::F32> out) {
  ffi::Promise promise;
  ffi::Future future(promise);
  const float* x = in.typed_data();
  float* y = out->typed_data();
  size_t n = in.element_count();
  std::thread([promise, x, y, n]() mutable {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (size_t i = 0; i < n; ++i) y[i] = 2 * x[i];
    promise.SetAvailable();
  }).detach();
  return future;
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    KilnCxxAsync, Async,
    ffi::Ffi::Bind().Arg<ffi::Buffer<ffi::F32>>().Ret<ffi::Buffer<ffi::F32>>());

// Platform context: device ordinal and run id, written to an s64 result.
static ffi::Error Context(ffi::RunId run_id, int32_t ordinal, ffi::ResultBuffer<ffi::S64> out) {
  out->typed_data()[0] = run_id.run_id;
  out->typed_data()[1] = ordinal;
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    KilnCxxContext, Context,
    ffi::Ffi::Bind().Ctx<ffi::RunId>().Ctx<ffi::DeviceOrdinal>().Ret<ffi::Buffer<ffi::S64>>());

// Registers itself when loaded, through XLA's C++ accessor the host exports.
static ffi::Error SelfReg(ffi::Buffer<ffi::F32> in, ffi::ResultBuffer<ffi::F32> out) {
  for (size_t i = 0; i < in.element_count(); ++i) out->typed_data()[i] = -in.typed_data()[i];
  return ffi::Error::Success();
}
XLA_FFI_DEFINE_HANDLER(kSelfReg, SelfReg,
                       ffi::Ffi::Bind().Arg<ffi::Buffer<ffi::F32>>().Ret<ffi::Buffer<ffi::F32>>());
XLA_FFI_REGISTER_HANDLER(ffi::GetXlaFfiApi(), "kiln_cxx_negate", "Host", kSelfReg);
