// grid_sample for 4-D float32 input on the CPU, as XLA FFI custom calls.
//
// Same semantics as sidebyside.sampling.taps_2d (PyTorch's vectorised CPU kernel):
// unnormalisation, border/reflection on the float coordinate, non-finite coordinates
// sent out of bounds, nearest rounding half to even, bicubic (A = -0.75) with the
// padding applied to each integer tap, and PyTorch's gradients (none through a clipped
// coordinate, none to the grid in nearest). The Python tests hold it to PyTorch's
// results in every mode, padding and align_corners.
//
// Why it exists: XLA:CPU compiles the gathers of the jax.numpy path into a scalar loop
// that recomputes every point's coordinates for every channel; here each point's taps
// and weights are computed once and the channels read in a tight loop, with the batch
// split over the cores this process may use (as PyTorch splits it).
//
// Layout: input (..., C, H, W), grid (..., H_out, W_out, 2); leading dimensions are the
// batch (vmap adds more). Built by sidebyside.sampling_native with the headers of
// jax.ffi.include_dir().

#include <sched.h>

#ifdef __AVX2__
#include <immintrin.h>
#endif

#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

enum Mode : int64_t { kNearest = 0, kBilinear = 1, kBicubic = 2 };
enum Padding : int64_t { kZeros = 0, kBorder = 1, kReflection = 2 };
constexpr float kOutOfBounds = -100.0f;
constexpr float kCubicA = -0.75f;

struct Coord {
  float value;
  float grad;  // d value / d grid
};

inline Coord Unnormalize(float g, int64_t size, bool align_corners) {
  if (align_corners) {
    const float scale = (size - 1) / 2.0f;
    return {(g + 1.0f) * scale, scale};
  }
  const float scale = size / 2.0f;
  return {std::fma(g + 1.0f, scale, -0.5f), scale};  // one rounding, as PyTorch's kernel
}

// Clamp to [0, size - 1]; NaN goes to 0; gradient 1 strictly inside, else 0.
inline Coord Clip(Coord x, int64_t size) {
  const float high = static_cast<float>(size - 1);
  if (!(x.value > 0.0f)) return {0.0f, 0.0f};
  if (x.value >= high) return {high, 0.0f};
  return x;
}

inline Coord Reflect(Coord x, int64_t size, bool align_corners) {
  const float low = align_corners ? 0.0f : -0.5f;
  const float span = align_corners ? static_cast<float>(size - 1) : static_cast<float>(size);
  if (span == 0.0f) return {0.0f, 0.0f};
  const float t = x.value - low;
  const bool negative = t < 0.0f;
  const float a = negative ? -t : t;
  const float twice = 2.0f * span;
  const float double_flips = std::trunc(a / twice);
  const float extra = a - double_flips * twice;
  const float reflected = twice - extra;
  const bool flip = extra > reflected;
  const float sign = (negative ? -1.0f : 1.0f) * (flip ? -1.0f : 1.0f);
  return {(flip ? reflected : extra) + low, x.grad * sign};
}

inline Coord Pad(Coord x, int64_t size, int64_t padding, bool align_corners) {
  if (padding == kBorder) return Clip(x, size);
  if (padding == kReflection) return Clip(Reflect(x, size, align_corners), size);
  return x;
}

inline Coord FiniteOrOut(Coord x) {
  return std::isfinite(x.value) ? x : Coord{kOutOfBounds, 0.0f};
}

// Up to 16 taps of one output point: flat pixel index (valid only where inside),
// weight and its derivatives with respect to the grid's x and y.
struct Taps {
  int n = 0;
  int64_t index[16];
  bool inside[16];
  float weight[16], dwdx[16], dwdy[16];
  int rows = 1, cols = 1;       // bicubic: 4 x 4, summed by rows as PyTorch does
  float row_weight[4], col_weight[16];
};

inline float CubicFar(float x) { return ((kCubicA * x - 5 * kCubicA) * x + 8 * kCubicA) * x - 4 * kCubicA; }
inline float CubicNear(float x) { return ((kCubicA + 2) * x - (kCubicA + 3)) * x * x + 1; }
inline float CubicFarD(float x) { return (3 * kCubicA * x - 10 * kCubicA) * x + 8 * kCubicA; }
inline float CubicNearD(float x) { return (3 * (kCubicA + 2) * x - 2 * (kCubicA + 3)) * x; }

inline void Cubic(float t, float c[4], float d[4]) {
  c[0] = CubicFar(t + 1); c[1] = CubicNear(t); c[2] = CubicNear(1 - t); c[3] = CubicFar(2 - t);
  d[0] = CubicFarD(t + 1); d[1] = CubicNearD(t); d[2] = -CubicNearD(1 - t); d[3] = -CubicFarD(2 - t);
}

inline bool InsideInt(float v, int64_t size) { return v >= 0.0f && v <= static_cast<float>(size - 1); }

template <int64_t mode, int64_t padding>
inline __attribute__((always_inline)) void MakeTapsT(float gx, float gy, int64_t h, int64_t w, bool align_corners,
                                                     Taps* taps) {
  Coord x = Unnormalize(gx, w, align_corners);
  Coord y = Unnormalize(gy, h, align_corners);
  if constexpr (mode == kBicubic) {
    const float x0 = std::floor(x.value), y0 = std::floor(y.value);
    float cx[4], dcx[4], cy[4], dcy[4];
    Cubic(x.value - x0, cx, dcx);
    Cubic(y.value - y0, cy, dcy);
    int64_t ix[4], iy[4];
    bool mx[4], my[4];
    for (int k = 0; k < 4; ++k) {
      const float tx = Pad({x0 + (k - 1), 0.0f}, w, padding, align_corners).value;
      const float ty = Pad({y0 + (k - 1), 0.0f}, h, padding, align_corners).value;
      mx[k] = tx > -1.0f && tx < static_cast<float>(w);
      my[k] = ty > -1.0f && ty < static_cast<float>(h);
      ix[k] = mx[k] ? static_cast<int64_t>(std::trunc(tx)) : 0;
      iy[k] = my[k] ? static_cast<int64_t>(std::trunc(ty)) : 0;
    }
    taps->n = 16;
    taps->rows = 4;
    taps->cols = 4;
    for (int j = 0; j < 4; ++j) {
      taps->row_weight[j] = cy[j];
      for (int i = 0; i < 4; ++i) {
        const int k = 4 * j + i;
        taps->index[k] = iy[j] * w + ix[i];
        taps->inside[k] = mx[i] && my[j];
        taps->col_weight[k] = cx[i];
        taps->weight[k] = cx[i] * cy[j];
        taps->dwdx[k] = dcx[i] * cy[j] * x.grad;
        taps->dwdy[k] = cx[i] * dcy[j] * y.grad;
      }
    }
    return;
  }
  x = FiniteOrOut(Pad(x, w, padding, align_corners));
  y = FiniteOrOut(Pad(y, h, padding, align_corners));
  if constexpr (mode == kNearest) {
    const float xn = std::nearbyint(x.value), yn = std::nearbyint(y.value);  // half to even
    taps->n = 1;
    taps->inside[0] = InsideInt(xn, w) && InsideInt(yn, h);
    taps->index[0] = taps->inside[0] ? static_cast<int64_t>(yn) * w + static_cast<int64_t>(xn) : 0;
    taps->weight[0] = 1.0f;
    taps->dwdx[0] = taps->dwdy[0] = 0.0f;
    return;
  }
  const float x0 = std::floor(x.value), y0 = std::floor(y.value);
  const float wx = x.value - x0, ex = 1 - wx, ny = y.value - y0, sy = 1 - ny;
  const float xs[2] = {x0, x0 + 1}, ys[2] = {y0, y0 + 1};
  const float wxs[2] = {ex, wx}, wys[2] = {sy, ny};
  const float dxs[2] = {-x.grad, x.grad}, dys[2] = {-y.grad, y.grad};
  taps->n = 4;
  for (int j = 0; j < 2; ++j) {
    for (int i = 0; i < 2; ++i) {
      const int k = 2 * j + i;
      taps->inside[k] = InsideInt(xs[i], w) && InsideInt(ys[j], h);
      taps->index[k] = taps->inside[k] ? static_cast<int64_t>(ys[j]) * w + static_cast<int64_t>(xs[i]) : 0;
      taps->weight[k] = wys[j] * wxs[i];
      taps->dwdx[k] = wys[j] * dxs[i];
      taps->dwdy[k] = dys[j] * wxs[i];
    }
  }
}

// MakeTapsT with the mode and padding chosen at run time (the backward pass).
inline void MakeTaps(float gx, float gy, int64_t h, int64_t w, int64_t mode, int64_t padding, bool align_corners,
                     Taps* taps) {
  switch (mode * 3 + padding) {
    case kNearest * 3 + kZeros: return MakeTapsT<kNearest, kZeros>(gx, gy, h, w, align_corners, taps);
    case kNearest * 3 + kBorder: return MakeTapsT<kNearest, kBorder>(gx, gy, h, w, align_corners, taps);
    case kNearest * 3 + kReflection: return MakeTapsT<kNearest, kReflection>(gx, gy, h, w, align_corners, taps);
    case kBilinear * 3 + kZeros: return MakeTapsT<kBilinear, kZeros>(gx, gy, h, w, align_corners, taps);
    case kBilinear * 3 + kBorder: return MakeTapsT<kBilinear, kBorder>(gx, gy, h, w, align_corners, taps);
    case kBilinear * 3 + kReflection: return MakeTapsT<kBilinear, kReflection>(gx, gy, h, w, align_corners, taps);
    case kBicubic * 3 + kZeros: return MakeTapsT<kBicubic, kZeros>(gx, gy, h, w, align_corners, taps);
    case kBicubic * 3 + kBorder: return MakeTapsT<kBicubic, kBorder>(gx, gy, h, w, align_corners, taps);
    default: return MakeTapsT<kBicubic, kReflection>(gx, gy, h, w, align_corners, taps);
  }
}

// One output value of the chunk's point p from its taps, in the order of the jax.numpy
// path: within a row, where(inside, value, 0) * weight summed left to right, then the
// row times its weight (bicubic; other modes are one row of weight 1).
template <int kRows, int kCols, int kChunk>
inline float SampleScalar(const float* plane, const int32_t (*index)[kChunk], const uint32_t (*mask)[kChunk],
                          const float (*weight)[kChunk], const float (*row_weight)[kChunk], int p) {
  float value = 0.0f;
  for (int j = 0; j < kRows; ++j) {
    float row = 0.0f;
    for (int i = 0; i < kCols; ++i) {
      const int k = kCols * j + i;
      const float term = (mask[k][p] ? plane[index[k][p]] : 0.0f) * weight[k][p];
      row = i == 0 ? term : row + term;
    }
    const float term = kRows == 1 ? row : row * row_weight[j][p];
    value = j == 0 ? term : value + term;
  }
  return value;
}

#ifdef __AVX2__
// The same for 8 consecutive points, with AVX2 gathers (indices are safe where outside;
// the mask, all ones or zero, selects the value or +0).
template <int kRows, int kCols, int kChunk>
inline __m256 SampleAvx2(const float* plane, const int32_t (*index)[kChunk], const uint32_t (*mask)[kChunk],
                         const float (*weight)[kChunk], const float (*row_weight)[kChunk], int p) {
  __m256 value = _mm256_setzero_ps();
  for (int j = 0; j < kRows; ++j) {
    __m256 row = _mm256_setzero_ps();
    for (int i = 0; i < kCols; ++i) {
      const int k = kCols * j + i;
      const __m256i idx = _mm256_load_si256(reinterpret_cast<const __m256i*>(&index[k][p]));
      const __m256 inside = _mm256_load_ps(reinterpret_cast<const float*>(&mask[k][p]));
      const __m256 v = _mm256_and_ps(_mm256_i32gather_ps(plane, idx, 4), inside);
      const __m256 term = _mm256_mul_ps(v, _mm256_load_ps(&weight[k][p]));
      row = i == 0 ? term : _mm256_add_ps(row, term);
    }
    const __m256 term = kRows == 1 ? row : _mm256_mul_ps(row, _mm256_load_ps(&row_weight[j][p]));
    value = j == 0 ? term : _mm256_add_ps(value, term);
  }
  return value;
}
#endif

// Forward for one batch element, in chunks of points: first every point's taps (index,
// mask, weight) into flat arrays, then, channel by channel, the chunk's samples.
template <int64_t kMode, int64_t kPadding>
void ForwardBatch(const float* x, const float* g, float* o, int64_t b, int64_t c, int64_t h, int64_t w,
                  int64_t points, bool align_corners) {
  constexpr int kChunk = 64;
  constexpr int kRows = kMode == kBicubic ? 4 : 1;
  constexpr int kCols = kMode == kNearest ? 1 : (kMode == kBilinear ? 4 : 4);
  constexpr int kTaps = kRows * kCols;
  alignas(64) int32_t index[kTaps][kChunk];
  alignas(64) uint32_t mask[kTaps][kChunk];
  alignas(64) float weight[kTaps][kChunk];  // bicubic: the column weight
  alignas(64) float row_weight[kRows][kChunk];
  Taps taps;
  for (int64_t start = 0; start < points; start += kChunk) {
    const int count = static_cast<int>(std::min<int64_t>(kChunk, points - start));
    for (int p = 0; p < count; ++p) {
      const float* gp = g + 2 * (b * points + start + p);
      MakeTapsT<kMode, kPadding>(gp[0], gp[1], h, w, align_corners, &taps);
      for (int k = 0; k < kTaps; ++k) {
        index[k][p] = static_cast<int32_t>(taps.index[k]);
        mask[k][p] = taps.inside[k] ? 0xFFFFFFFFu : 0u;
        weight[k][p] = kMode == kBicubic ? taps.col_weight[k] : taps.weight[k];
      }
      for (int j = 0; j < kRows; ++j) row_weight[j][p] = kMode == kBicubic ? taps.row_weight[j] : 1.0f;
    }
    for (int64_t ch = 0; ch < c; ++ch) {
      const float* plane = x + (b * c + ch) * h * w;
      float* out = o + (b * c + ch) * points + start;
      int p = 0;
#ifdef __AVX2__
      for (; p + 8 <= count; p += 8) {
        _mm256_storeu_ps(out + p, SampleAvx2<kRows, kCols, kChunk>(plane, index, mask, weight, row_weight, p));
      }
#endif
      for (; p < count; ++p) out[p] = SampleScalar<kRows, kCols, kChunk>(plane, index, mask, weight, row_weight, p);
    }
  }
}

int Cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set) > 0 ? CPU_COUNT(&set) : 1;
  return 1;
}

// Runs body(b) for every batch element b in [0, batch), split over the cores.
template <typename Body>
void ParallelBatches(int64_t batch, Body body) {
  const int64_t workers = std::min<int64_t>(batch, Cores());
  if (workers <= 1) {
    for (int64_t b = 0; b < batch; ++b) body(b);
    return;
  }
  std::vector<std::thread> threads;
  for (int64_t t = 0; t < workers; ++t) {
    threads.emplace_back([=, &body] {
      for (int64_t b = t; b < batch; b += workers) body(b);
    });
  }
  for (auto& thread : threads) thread.join();
}

struct Shape {
  int64_t batch, c, h, w, points;
};

ffi::Error GetShape(const ffi::Buffer<ffi::F32>& input, const ffi::Buffer<ffi::F32>& grid, Shape* s) {
  auto in = input.dimensions();
  auto g = grid.dimensions();
  if (in.size() < 4 || g.size() != in.size() || g[g.size() - 1] != 2) {
    return ffi::Error::InvalidArgument("grid_sample_cpu: expected input (..., C, H, W) and grid (..., H_out, W_out, 2)");
  }
  s->batch = 1;
  for (size_t i = 0; i + 3 < in.size(); ++i) {
    if (in[i] != g[i]) return ffi::Error::InvalidArgument("grid_sample_cpu: input and grid batch sizes differ");
    s->batch *= in[i];
  }
  s->c = in[in.size() - 3];
  s->h = in[in.size() - 2];
  s->w = in[in.size() - 1];
  s->points = g[g.size() - 3] * g[g.size() - 2];
  return ffi::Error::Success();
}

ffi::Error Forward(ffi::Buffer<ffi::F32> input, ffi::Buffer<ffi::F32> grid, ffi::ResultBuffer<ffi::F32> out,
                   int64_t mode, int64_t padding, bool align_corners) {
  Shape s;
  if (auto error = GetShape(input, grid, &s); error.failure()) return error;
  const float* x = input.typed_data();
  const float* g = grid.typed_data();
  float* o = out->typed_data();
  using Batch = void (*)(const float*, const float*, float*, int64_t, int64_t, int64_t, int64_t, int64_t, bool);
  static constexpr Batch kBatch[3][3] = {
      {ForwardBatch<kNearest, kZeros>, ForwardBatch<kNearest, kBorder>, ForwardBatch<kNearest, kReflection>},
      {ForwardBatch<kBilinear, kZeros>, ForwardBatch<kBilinear, kBorder>, ForwardBatch<kBilinear, kReflection>},
      {ForwardBatch<kBicubic, kZeros>, ForwardBatch<kBicubic, kBorder>, ForwardBatch<kBicubic, kReflection>}};
  if (mode < 0 || mode > 2 || padding < 0 || padding > 2) {
    return ffi::Error::InvalidArgument("grid_sample_cpu: unknown mode or padding");
  }
  const Batch batch = kBatch[mode][padding];
  ParallelBatches(s.batch, [&](int64_t b) { batch(x, g, o, b, s.c, s.h, s.w, s.points, align_corners); });
  return ffi::Error::Success();
}

ffi::Error Backward(ffi::Buffer<ffi::F32> input, ffi::Buffer<ffi::F32> grid, ffi::Buffer<ffi::F32> cot,
                    ffi::ResultBuffer<ffi::F32> grad_input, ffi::ResultBuffer<ffi::F32> grad_grid, int64_t mode,
                    int64_t padding, bool align_corners) {
  Shape s;
  if (auto error = GetShape(input, grid, &s); error.failure()) return error;
  const float* x = input.typed_data();
  const float* g = grid.typed_data();
  const float* c = cot.typed_data();
  float* gin = grad_input->typed_data();
  float* gg = grad_grid->typed_data();
  ParallelBatches(s.batch, [&](int64_t b) {  // each batch element owns its slice of gin
    float* gin_b = gin + b * s.c * s.h * s.w;
    std::fill(gin_b, gin_b + s.c * s.h * s.w, 0.0f);
    Taps taps;
    for (int64_t p = 0; p < s.points; ++p) {
      const float* gp = g + 2 * (b * s.points + p);
      MakeTaps(gp[0], gp[1], s.h, s.w, mode, padding, align_corners, &taps);
      float ax = 0.0f, ay = 0.0f;
      for (int64_t ch = 0; ch < s.c; ++ch) {
        const float ct = c[(b * s.c + ch) * s.points + p];
        const float* plane = x + (b * s.c + ch) * s.h * s.w;
        float* gplane = gin_b + ch * s.h * s.w;
        for (int k = 0; k < taps.n; ++k) {
          if (mode != kNearest) {  // as the jax.numpy path: 0 * NaN stays NaN (bicubic at a NaN point)
            const float v = (taps.inside[k] ? plane[taps.index[k]] : 0.0f) * ct;
            ax += v * taps.dwdx[k];
            ay += v * taps.dwdy[k];
          }
          if (taps.inside[k]) gplane[taps.index[k]] += ct * taps.weight[k];
        }
      }
      gg[2 * (b * s.points + p)] = ax;
      gg[2 * (b * s.points + p) + 1] = ay;
    }
  });
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(SidebysideGridSampleForward, Forward,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Attr<int64_t>("mode")
                                  .Attr<int64_t>("padding")
                                  .Attr<bool>("align_corners"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(SidebysideGridSampleBackward, Backward,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Attr<int64_t>("mode")
                                  .Attr<int64_t>("padding")
                                  .Attr<bool>("align_corners"));
