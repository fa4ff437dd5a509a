// grid_sample for 4-D and 5-D float32 input on the CPU, as XLA FFI custom calls.
//
// Same semantics as sidebyside.sampling.taps (taps_2d: PyTorch's vectorised CPU kernel;
// taps_3d: its scalar 3-D kernel): the unnormalisation rounded once (std::fma) in 2-D
// and twice in 3-D, as PyTorch's CPU kernels round it (built with -ffp-contract=off, so
// the compiler fuses nothing else), border/reflection on the float coordinate, non-finite coordinates
// sent out of bounds, nearest rounding half to even, bicubic (A = -0.75) with the
// padding applied to each integer tap, and PyTorch's gradients (none through a clipped
// coordinate, none to the grid in nearest). The Python tests hold it to PyTorch's
// results in every mode, padding and align_corners.
//
// Why it exists: XLA:CPU compiles the gathers of the jax.numpy path into a scalar loop
// that recomputes every point's coordinates for every channel; here each point's taps
// and weights are computed once and the channels read in a tight loop (bilinear: a
// row's two taps in one 8-byte read, Windows below; the backward pass one channel at a
// time over a chunk of points, BackwardBatch below), with the batch
// split over the cores this process may use (as PyTorch splits it), on XLA's own
// intra-op thread pool.
//
// Layout: input (..., C, H, W), grid (..., H_out, W_out, 2); leading dimensions are the
// batch (vmap adds more). Built by sidebyside.sampling.native with the headers of
// jax.ffi.include_dir().

#include <sched.h>

#ifdef __AVX2__
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

#ifdef __AVX2__
constexpr bool kAvx2 = true;
#else
constexpr bool kAvx2 = false;
#endif

enum Mode : int64_t { kNearest = 0, kBilinear = 1, kBicubic = 2 };
enum Padding : int64_t { kZeros = 0, kBorder = 1, kReflection = 2 };
constexpr float kOutOfBounds = -100.0f;
constexpr float kCubicA = -0.75f;

struct Coord {
  float value;
  float grad;  // d value / d grid
};

// d unnormalised coordinate / d grid value
inline float Scale(int64_t size, bool align_corners) { return align_corners ? (size - 1) / 2.0f : size / 2.0f; }

inline Coord Unnormalize(float g, int64_t size, bool align_corners) {
  const float scale = Scale(size, align_corners);
  if (align_corners) return {(g + 1.0f) * scale, scale};
  return {std::fma(g + 1.0f, scale, -0.5f), scale};  // one rounding, as PyTorch's kernel
}

// Clamp to [0, size - 1]; NaN goes to 0; gradient 1 strictly inside, else 0.
inline Coord Clip(Coord x, int64_t size) {
  const float high = static_cast<float>(size - 1);
  if (!(x.value > 0.0f)) return {0.0f, 0.0f};
  if (x.value >= high) return {high, 0.0f};
  return x;
}

// Reflect about -0.5 and size - 0.5 (align_corners=false) or 0 and size - 1, in the
// arithmetic of PyTorch's vectorised 2-D kernel or (vectorised=false) its scalar 3-D one.
inline Coord Reflect(Coord x, int64_t size, bool align_corners, bool vectorised = true) {
  const float low = align_corners ? 0.0f : -0.5f;
  const float span = align_corners ? static_cast<float>(size - 1) : static_cast<float>(size);
  if (span == 0.0f) return {0.0f, 0.0f};
  const float t = x.value - low;
  const bool negative = t < 0.0f;
  const float a = negative ? -t : t;
  if (!vectorised) {
    const float extra = std::fmod(a, span);
    const bool odd = std::fmod(std::floor(a / span), 2.0f) == 1.0f;
    const float sign = (negative ? -1.0f : 1.0f) * (odd ? -1.0f : 1.0f);
    return {odd ? span - extra + low : extra + low, x.grad * sign};
  }
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
  float weight[16], dwdx[16], dwdy[16], dwdz[16];  // dwdz: 3-D only
  float row_weight[4], col_weight[16];  // bicubic: 4 rows of 4, summed by rows as PyTorch does
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

// 5-D input (nearest, trilinear): the arithmetic of PyTorch's scalar 3-D CPU kernel, as
// sidebyside.sampling.taps.taps_3d writes it with fused=False (unnormalisation rounded
// twice, reflection with fmod: both differ from the 2-D kernel's).
inline Coord Unnormalize3(float g, int64_t size, bool align_corners) {
  if (align_corners) return {((g + 1.0f) / 2.0f) * static_cast<float>(size - 1), Scale(size, align_corners)};
  return {((g + 1.0f) * static_cast<float>(size) - 1.0f) / 2.0f, Scale(size, align_corners)};
}

template <int64_t kPadding>
inline Coord Coord3(float g, int64_t size, bool align_corners) {
  Coord x = Unnormalize3(g, size, align_corners);
  if constexpr (kPadding == kBorder) x = Clip(x, size);
  if constexpr (kPadding == kReflection) x = Clip(Reflect(x, size, align_corners, /*vectorised=*/false), size);
  return FiniteOrOut(x);
}

template <int64_t kMode, int64_t kPadding>
inline __attribute__((always_inline)) void MakeTaps3(const float* gp, int64_t d, int64_t h, int64_t w,
                                                     bool align_corners, Taps* taps) {
  const Coord x = Coord3<kPadding>(gp[0], w, align_corners);
  const Coord y = Coord3<kPadding>(gp[1], h, align_corners);
  const Coord z = Coord3<kPadding>(gp[2], d, align_corners);
  if constexpr (kMode == kNearest) {
    const float xn = std::nearbyint(x.value), yn = std::nearbyint(y.value), zn = std::nearbyint(z.value);
    taps->n = 1;
    taps->inside[0] = InsideInt(xn, w) && InsideInt(yn, h) && InsideInt(zn, d);
    taps->index[0] = taps->inside[0] ? (static_cast<int64_t>(zn) * h + static_cast<int64_t>(yn)) * w +
                                           static_cast<int64_t>(xn)
                                     : 0;
    taps->weight[0] = 1.0f;
    taps->dwdx[0] = taps->dwdy[0] = taps->dwdz[0] = 0.0f;
    return;
  }
  const float x0 = std::floor(x.value), y0 = std::floor(y.value), z0 = std::floor(z.value);
  const float x1 = x0 + 1, y1 = y0 + 1, z1 = z0 + 1;
  // Distances as PyTorch's scalar 3-D kernel forms them (far corner minus point).
  const float xs[2] = {x0, x1}, ys[2] = {y0, y1}, zs[2] = {z0, z1};
  const float wxs[2] = {x1 - x.value, x.value - x0}, wys[2] = {y1 - y.value, y.value - y0};
  const float wzs[2] = {z1 - z.value, z.value - z0};
  const float sign[2] = {-1.0f, 1.0f};
  taps->n = 8;
  for (int k_z = 0; k_z < 2; ++k_z) {
    for (int k_y = 0; k_y < 2; ++k_y) {
      for (int k_x = 0; k_x < 2; ++k_x) {
        const int k = 4 * k_z + 2 * k_y + k_x;
        taps->inside[k] = InsideInt(xs[k_x], w) && InsideInt(ys[k_y], h) && InsideInt(zs[k_z], d);
        taps->index[k] = taps->inside[k] ? (static_cast<int64_t>(zs[k_z]) * h + static_cast<int64_t>(ys[k_y])) * w +
                                               static_cast<int64_t>(xs[k_x])
                                         : 0;
        taps->weight[k] = wxs[k_x] * wys[k_y] * wzs[k_z];
        taps->dwdx[k] = sign[k_x] * x.grad * wys[k_y] * wzs[k_z];
        taps->dwdy[k] = wxs[k_x] * sign[k_y] * y.grad * wzs[k_z];
        taps->dwdz[k] = wxs[k_x] * wys[k_y] * sign[k_z] * z.grad;
      }
    }
  }
}

// Bilinear's two taps in a row are neighbours in memory: one 8-byte read fetches both.
// Per point and row, `start` is the flat index of a pair of pixels inside the row,
// clamp(x0, 0, w - 2) (so that the read never leaves the plane, at x0 = -1 or w - 1 too),
// and `shift` is x0 minus that column: 0, or 1 where x0 = w - 1 (the left tap is the
// pair's second pixel), or below 0 where x0 < 0 (the right tap is the first). A tap
// outside the image is masked as before, whatever it reads. Needs w >= 2.
template <int kChunk>
struct Windows {
  alignas(64) int32_t start[2][kChunk];
  alignas(64) int32_t shift[kChunk];
};

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
  if constexpr (kRows == 1 && kCols == 1) {  // nearest: weight 1, the product is the value itself
    const __m256i idx = _mm256_load_si256(reinterpret_cast<const __m256i*>(&index[0][p]));
    const __m256 inside = _mm256_load_ps(reinterpret_cast<const float*>(&mask[0][p]));
    return _mm256_mask_i32gather_ps(_mm256_setzero_ps(), plane, idx, inside, 4);
  }
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

#ifdef __AVX2__
// The coordinate functions above for 8 points at once, operation for operation (the
// 2-D passes, and 3-D trilinear in zeros and border padding; 3-D's reflection, with
// fmod, and 3-D nearest stay scalar).
inline __m256 UnnormalizeV(__m256 g, int64_t size, bool align_corners) {
  const __m256 g1 = _mm256_add_ps(g, _mm256_set1_ps(1.0f)), scale = _mm256_set1_ps(Scale(size, align_corners));
  if (align_corners) return _mm256_mul_ps(g1, scale);
  return _mm256_fmadd_ps(g1, scale, _mm256_set1_ps(-0.5f));
}

inline __m256 Unnormalize3V(__m256 g, int64_t size, bool align_corners) {  // rounded twice, as Unnormalize3
  const __m256 g1 = _mm256_add_ps(g, _mm256_set1_ps(1.0f)), two = _mm256_set1_ps(2.0f);
  if (align_corners) return _mm256_mul_ps(_mm256_div_ps(g1, two), _mm256_set1_ps(static_cast<float>(size - 1)));
  return _mm256_div_ps(_mm256_sub_ps(_mm256_mul_ps(g1, _mm256_set1_ps(static_cast<float>(size))), _mm256_set1_ps(1.0f)),
                       two);
}

inline __m256 ClipV(__m256 x, int64_t size) {
  const __m256 high = _mm256_set1_ps(static_cast<float>(size - 1));
  x = _mm256_and_ps(x, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ));  // not above 0 (or NaN): 0
  return _mm256_blendv_ps(x, high, _mm256_cmp_ps(x, high, _CMP_GE_OQ));
}

// `turned`, where given: the lanes whose gradient Reflect turns over (negative side xor
// odd flip), all ones or zero.
inline __m256 ReflectV(__m256 x, int64_t size, bool align_corners, __m256* turned = nullptr) {
  const float low_s = align_corners ? 0.0f : -0.5f;
  const float span = align_corners ? static_cast<float>(size - 1) : static_cast<float>(size);
  if (span == 0.0f) {
    if (turned != nullptr) *turned = _mm256_setzero_ps();
    return _mm256_setzero_ps();
  }
  const __m256 low = _mm256_set1_ps(low_s), twice = _mm256_set1_ps(2.0f * span);
  const __m256 t = _mm256_sub_ps(x, low);
  const __m256 negative = _mm256_cmp_ps(t, _mm256_setzero_ps(), _CMP_LT_OQ);
  const __m256 a = _mm256_blendv_ps(t, _mm256_sub_ps(_mm256_setzero_ps(), t), negative);
  const __m256 double_flips = _mm256_round_ps(_mm256_div_ps(a, twice), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 extra = _mm256_fnmadd_ps(double_flips, twice, a);
  const __m256 reflected = _mm256_sub_ps(twice, extra);
  const __m256 flip = _mm256_cmp_ps(extra, reflected, _CMP_GT_OQ);
  if (turned != nullptr) *turned = _mm256_xor_ps(negative, flip);
  return _mm256_add_ps(_mm256_blendv_ps(extra, reflected, flip), low);
}

// Unnormalize, Pad and FiniteOrOut (3-D: Coord3); where `grad` is given, also the
// coordinate's derivative by the grid value as they carry it (the backward pass): the
// scale, turned over by a reflection, 0 where clipped or not finite.
template <int64_t kPadding, int kDims = 2>
inline __m256 CoordV(__m256 g, int64_t size, bool align_corners, __m256* grad = nullptr) {
  static_assert(kDims == 2 || kPadding != kReflection, "3-D reflection (fmod) is scalar only");
  __m256 x = kDims == 2 ? UnnormalizeV(g, size, align_corners) : Unnormalize3V(g, size, align_corners);
  __m256 d = _mm256_set1_ps(Scale(size, align_corners));
  if constexpr (kPadding == kReflection) {
    __m256 turned;
    x = ReflectV(x, size, align_corners, &turned);
    d = _mm256_xor_ps(d, _mm256_and_ps(turned, _mm256_set1_ps(-0.0f)));
  }
  if constexpr (kPadding != kZeros) {  // Clip: gradient 0 unless strictly inside (0, size - 1)
    const __m256 high = _mm256_set1_ps(static_cast<float>(size - 1));
    d = _mm256_and_ps(d, _mm256_and_ps(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ),
                                       _mm256_cmp_ps(x, high, _CMP_LT_OQ)));
    x = ClipV(x, size);
  }
  const __m256 abs = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
  const __m256 finite = _mm256_cmp_ps(abs, _mm256_set1_ps(3.4028235e38f), _CMP_LE_OQ);  // false for NaN, inf
  if (grad != nullptr) *grad = _mm256_and_ps(d, finite);
  return _mm256_blendv_ps(_mm256_set1_ps(kOutOfBounds), x, finite);
}

// The grid coordinates of 8 consecutive points, stored x0 y0 x1 y1 ... x7 y7, split into
// their x's and y's in point order.
inline void LoadGrid8(const float* gp, __m256* gx, __m256* gy) {
  const __m256 lo = _mm256_loadu_ps(gp), hi = _mm256_loadu_ps(gp + 8);
  *gx = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0x88)), 0xD8));
  *gy = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0xDD)), 0xD8));
}

// One tap of 8 points at integer-valued coordinates at = {x, y} (3-D: {x, y, z}) in an
// image of sizes = {w, h} ({w, h, d}): flat index (0 where outside), mask and weight into
// the chunk's arrays at [k][p].
template <int kChunk, int kDims>
inline void TapV(const __m256 (&at)[kDims], const int64_t (&sizes)[kDims], __m256 weight_k, int k, int p,
                 int32_t (*index)[kChunk], uint32_t (*mask)[kChunk], float (*weight)[kChunk]) {
  const __m256 zero = _mm256_setzero_ps();
  __m256 inside = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
  __m256i flat = _mm256_setzero_si256();
  for (int a = kDims - 1; a >= 0; --a) {  // flat = (z * h + y) * w + x
    const __m256 high = _mm256_set1_ps(static_cast<float>(sizes[a] - 1));
    inside = _mm256_and_ps(inside, _mm256_and_ps(_mm256_cmp_ps(at[a], zero, _CMP_GE_OQ),
                                                 _mm256_cmp_ps(at[a], high, _CMP_LE_OQ)));
    const __m256i i = _mm256_cvttps_epi32(_mm256_min_ps(_mm256_max_ps(at[a], zero), high));
    flat = a == kDims - 1
               ? i
               : _mm256_add_epi32(_mm256_mullo_epi32(flat, _mm256_set1_epi32(static_cast<int32_t>(sizes[a]))), i);
  }
  _mm256_store_si256(reinterpret_cast<__m256i*>(&index[k][p]), _mm256_and_si256(flat, _mm256_castps_si256(inside)));
  _mm256_store_ps(reinterpret_cast<float*>(&mask[k][p]), inside);
  _mm256_store_ps(&weight[k][p], weight_k);
}

// Nearest or bilinear taps of the 8 points whose grid coordinates are gx, gy (bilinear:
// and the row windows, where `windows` is given).
template <int64_t kMode, int64_t kPadding, int kChunk>
inline void TapsV(__m256 gx, __m256 gy, int64_t h, int64_t w, bool align_corners, int p, int32_t (*index)[kChunk],
                  uint32_t (*mask)[kChunk], float (*weight)[kChunk], Windows<kChunk>* windows = nullptr) {
  const __m256 x = CoordV<kPadding>(gx, w, align_corners), y = CoordV<kPadding>(gy, h, align_corners);
  if constexpr (kMode == kNearest) {
    const int r = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;  // half to even
    TapV<kChunk, 2>({_mm256_round_ps(x, r), _mm256_round_ps(y, r)}, {w, h}, _mm256_set1_ps(1.0f), 0, p, index, mask,
                    weight);
  } else {
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 x0 = _mm256_floor_ps(x), y0 = _mm256_floor_ps(y);
    const __m256 wx = _mm256_sub_ps(x, x0), ex = _mm256_sub_ps(one, wx);
    const __m256 ny = _mm256_sub_ps(y, y0), sy = _mm256_sub_ps(one, ny);
    const __m256 x1 = _mm256_add_ps(x0, one), y1 = _mm256_add_ps(y0, one);
    TapV<kChunk, 2>({x0, y0}, {w, h}, _mm256_mul_ps(sy, ex), 0, p, index, mask, weight);
    TapV<kChunk, 2>({x1, y0}, {w, h}, _mm256_mul_ps(sy, wx), 1, p, index, mask, weight);
    TapV<kChunk, 2>({x0, y1}, {w, h}, _mm256_mul_ps(ny, ex), 2, p, index, mask, weight);
    TapV<kChunk, 2>({x1, y1}, {w, h}, _mm256_mul_ps(ny, wx), 3, p, index, mask, weight);
    if (windows != nullptr) {
      // x0, y0 are integral (or -100 for a non-finite coordinate); clamped before the conversion
      const __m256 zero = _mm256_setzero_ps(), hmax = _mm256_set1_ps(static_cast<float>(h - 1));
      const __m256i column = _mm256_cvttps_epi32(_mm256_min_ps(_mm256_max_ps(x0, zero),
                                                               _mm256_set1_ps(static_cast<float>(w - 2))));
      const __m256i left = _mm256_cvttps_epi32(_mm256_max_ps(x0, _mm256_set1_ps(-2.0f)));  // -2: below 0 whatever it was
      _mm256_store_si256(reinterpret_cast<__m256i*>(&windows->shift[p]), _mm256_sub_epi32(left, column));
      const __m256i width = _mm256_set1_epi32(static_cast<int32_t>(w));
      const __m256 ys[2] = {y0, y1};
      for (int j = 0; j < 2; ++j) {
        const __m256i row = _mm256_cvttps_epi32(_mm256_min_ps(_mm256_max_ps(ys[j], zero), hmax));
        _mm256_store_si256(reinterpret_cast<__m256i*>(&windows->start[j][p]),
                           _mm256_add_epi32(_mm256_mullo_epi32(row, width), column));
      }
    }
  }
}

// Bilinear's value for 8 points from the row windows: per row one masked 8-byte gather
// per 4 points (half the reads of four 4-byte gathers), the pairs split into the left
// and right taps, each tap where(inside, value, 0) * weight, summed in SampleAvx2's order.
template <int kChunk>
inline __m256 SampleBilinearPairs(const float* plane, const Windows<kChunk>& windows, const uint32_t (*mask)[kChunk],
                                  const float (*weight)[kChunk], int p) {
  const __m256i shift = _mm256_load_si256(reinterpret_cast<const __m256i*>(&windows.shift[p]));
  const __m256 left_is_second = _mm256_castsi256_ps(_mm256_cmpeq_epi32(shift, _mm256_set1_epi32(1)));
  const __m256 right_is_first = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_setzero_si256(), shift));
  const double* pairs = reinterpret_cast<const double*>(plane);
  __m256 value = _mm256_setzero_ps();
  for (int j = 0; j < 2; ++j) {
    const __m256 inside_left = _mm256_load_ps(reinterpret_cast<const float*>(&mask[2 * j][p]));
    const __m256 inside_right = _mm256_load_ps(reinterpret_cast<const float*>(&mask[2 * j + 1][p]));
    const __m256i either = _mm256_castps_si256(_mm256_or_ps(inside_left, inside_right));
    const __m256i start = _mm256_load_si256(reinterpret_cast<const __m256i*>(&windows.start[j][p]));
    const __m256d a = _mm256_mask_i32gather_pd(_mm256_setzero_pd(), pairs, _mm256_castsi256_si128(start),
        _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm256_castsi256_si128(either))), 4);
    const __m256d b = _mm256_mask_i32gather_pd(_mm256_setzero_pd(), pairs, _mm256_extracti128_si256(start, 1),
        _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm256_extracti128_si256(either, 1))), 4);
    // a: points 0-3 as (first, second) pairs, b: points 4-7; split into firsts and seconds in point order
    const __m256 fa = _mm256_castpd_ps(a), fb = _mm256_castpd_ps(b);
    const __m256 first = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(fa, fb, 0x88)), 0xD8));
    const __m256 second = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(fa, fb, 0xDD)), 0xD8));
    const __m256 left = _mm256_and_ps(_mm256_blendv_ps(first, second, left_is_second), inside_left);
    const __m256 right = _mm256_and_ps(_mm256_blendv_ps(second, first, right_is_first), inside_right);
    const __m256 term_left = _mm256_mul_ps(left, _mm256_load_ps(&weight[2 * j][p]));
    const __m256 term_right = _mm256_mul_ps(right, _mm256_load_ps(&weight[2 * j + 1][p]));
    value = j == 0 ? _mm256_add_ps(term_left, term_right) : _mm256_add_ps(_mm256_add_ps(value, term_left), term_right);
  }
  return value;
}

// Bicubic taps of the 8 points whose grid coordinates are gx, gy, operation for operation as
// MakeTapsT<kBicubic> (the coefficients as CubicFar and CubicNear write them, a product
// and a sum apiece, never fused): 16 taps, 4 column weights per row and 4 row weights.
inline __m256 CubicFarV(__m256 x) {  // ((A x - 5A) x + 8A) x - 4A
  __m256 r = _mm256_sub_ps(_mm256_mul_ps(_mm256_set1_ps(kCubicA), x), _mm256_set1_ps(5 * kCubicA));
  r = _mm256_add_ps(_mm256_mul_ps(r, x), _mm256_set1_ps(8 * kCubicA));
  return _mm256_sub_ps(_mm256_mul_ps(r, x), _mm256_set1_ps(4 * kCubicA));
}

inline __m256 CubicNearV(__m256 x) {  // ((A + 2) x - (A + 3)) x x + 1
  const __m256 r = _mm256_sub_ps(_mm256_mul_ps(_mm256_set1_ps(kCubicA + 2), x), _mm256_set1_ps(kCubicA + 3));
  return _mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(r, x), x), _mm256_set1_ps(1.0f));
}

inline __m256 CubicFarDV(__m256 x) {  // (3A x - 10A) x + 8A
  const __m256 r = _mm256_sub_ps(_mm256_mul_ps(_mm256_set1_ps(3 * kCubicA), x), _mm256_set1_ps(10 * kCubicA));
  return _mm256_add_ps(_mm256_mul_ps(r, x), _mm256_set1_ps(8 * kCubicA));
}

inline __m256 CubicNearDV(__m256 x) {  // (3 (A + 2) x - 2 (A + 3)) x
  const __m256 r =
      _mm256_sub_ps(_mm256_mul_ps(_mm256_set1_ps(3 * (kCubicA + 2)), x), _mm256_set1_ps(2 * (kCubicA + 3)));
  return _mm256_mul_ps(r, x);
}

// The four taps along one axis: integer coordinate (0 where outside), inside mask and
// cubic coefficient (and, where `derivative` is given, the coefficients' derivatives by
// the coordinate, as Cubic writes them), from the unnormalised coordinate v of 8 points.
template <int64_t kPadding>
inline void CubicAxisV(__m256 v, int64_t size, bool align_corners, __m256i index[4], __m256 inside[4],
                       __m256 coefficient[4], __m256* derivative = nullptr) {
  const __m256 one = _mm256_set1_ps(1.0f), two = _mm256_set1_ps(2.0f);
  const __m256 v0 = _mm256_floor_ps(v);
  const __m256 t = _mm256_sub_ps(v, v0);
  coefficient[0] = CubicFarV(_mm256_add_ps(t, one));
  coefficient[1] = CubicNearV(t);
  coefficient[2] = CubicNearV(_mm256_sub_ps(one, t));
  coefficient[3] = CubicFarV(_mm256_sub_ps(two, t));
  if (derivative != nullptr) {
    const __m256 negate = _mm256_set1_ps(-0.0f);
    derivative[0] = CubicFarDV(_mm256_add_ps(t, one));
    derivative[1] = CubicNearDV(t);
    derivative[2] = _mm256_xor_ps(CubicNearDV(_mm256_sub_ps(one, t)), negate);
    derivative[3] = _mm256_xor_ps(CubicFarDV(_mm256_sub_ps(two, t)), negate);
  }
  const __m256 low = _mm256_set1_ps(-1.0f), high = _mm256_set1_ps(static_cast<float>(size));
  for (int k = 0; k < 4; ++k) {
    __m256 tap = _mm256_add_ps(v0, _mm256_set1_ps(static_cast<float>(k - 1)));
    if constexpr (kPadding == kBorder) tap = ClipV(tap, size);
    if constexpr (kPadding == kReflection) tap = ClipV(ReflectV(tap, size, align_corners), size);
    inside[k] = _mm256_and_ps(_mm256_cmp_ps(tap, low, _CMP_GT_OQ), _mm256_cmp_ps(tap, high, _CMP_LT_OQ));
    index[k] = _mm256_and_si256(_mm256_cvttps_epi32(_mm256_and_ps(tap, inside[k])), _mm256_castps_si256(inside[k]));
  }
}

template <int64_t kPadding, int kChunk>
inline void TapsCubicV(__m256 gx, __m256 gy, int64_t h, int64_t w, bool align_corners, int p, int32_t (*index)[kChunk],
                       uint32_t (*mask)[kChunk], float (*weight)[kChunk], float (*row_weight)[kChunk]) {
  __m256i ix[4], iy[4];
  __m256 mx[4], my[4], cx[4], cy[4];
  CubicAxisV<kPadding>(UnnormalizeV(gx, w, align_corners), w, align_corners, ix, mx, cx);
  CubicAxisV<kPadding>(UnnormalizeV(gy, h, align_corners), h, align_corners, iy, my, cy);
  const __m256i width = _mm256_set1_epi32(static_cast<int32_t>(w));
  for (int j = 0; j < 4; ++j) {
    _mm256_store_ps(&row_weight[j][p], cy[j]);
    const __m256i row = _mm256_mullo_epi32(iy[j], width);
    for (int i = 0; i < 4; ++i) {
      const int k = 4 * j + i;
      _mm256_store_si256(reinterpret_cast<__m256i*>(&index[k][p]), _mm256_add_epi32(row, ix[i]));
      _mm256_store_ps(reinterpret_cast<float*>(&mask[k][p]), _mm256_and_ps(mx[i], my[j]));
      _mm256_store_ps(&weight[k][p], cx[i]);
    }
  }
}

// The backward pass's taps of 8 points, operation for operation as MakeTapsT: index,
// mask, weight (bicubic: the product of the column's and the row's) and the weight's
// derivatives by the grid's x and y (dwdx, dwdy), into the chunk's arrays at [k][p].
template <int64_t kMode, int64_t kPadding, int kChunk>
inline void GradTapsV(__m256 gx, __m256 gy, int64_t h, int64_t w, bool align_corners, int p, int32_t (*index)[kChunk],
                      uint32_t (*mask)[kChunk], float (*weight)[kChunk], float (*dwdx)[kChunk], float (*dwdy)[kChunk]) {
  const __m256 negate = _mm256_set1_ps(-0.0f);
  if constexpr (kMode == kBicubic) {
    __m256i ix[4], iy[4];
    __m256 mx[4], my[4], cx[4], cy[4], dcx[4], dcy[4];
    CubicAxisV<kPadding>(UnnormalizeV(gx, w, align_corners), w, align_corners, ix, mx, cx, dcx);
    CubicAxisV<kPadding>(UnnormalizeV(gy, h, align_corners), h, align_corners, iy, my, cy, dcy);
    const __m256 sx = _mm256_set1_ps(Scale(w, align_corners)), sy = _mm256_set1_ps(Scale(h, align_corners));
    const __m256i width = _mm256_set1_epi32(static_cast<int32_t>(w));
    for (int j = 0; j < 4; ++j) {
      const __m256i row = _mm256_mullo_epi32(iy[j], width);
      for (int i = 0; i < 4; ++i) {
        const int k = 4 * j + i;
        _mm256_store_si256(reinterpret_cast<__m256i*>(&index[k][p]), _mm256_add_epi32(row, ix[i]));
        _mm256_store_ps(reinterpret_cast<float*>(&mask[k][p]), _mm256_and_ps(mx[i], my[j]));
        _mm256_store_ps(&weight[k][p], _mm256_mul_ps(cx[i], cy[j]));
        _mm256_store_ps(&dwdx[k][p], _mm256_mul_ps(_mm256_mul_ps(dcx[i], cy[j]), sx));
        _mm256_store_ps(&dwdy[k][p], _mm256_mul_ps(_mm256_mul_ps(cx[i], dcy[j]), sy));
      }
    }
  } else {  // bilinear
    __m256 xg, yg;
    const __m256 x = CoordV<kPadding>(gx, w, align_corners, &xg), y = CoordV<kPadding>(gy, h, align_corners, &yg);
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 x0 = _mm256_floor_ps(x), y0 = _mm256_floor_ps(y);
    const __m256 wx = _mm256_sub_ps(x, x0), ny = _mm256_sub_ps(y, y0);
    const __m256 xs[2] = {x0, _mm256_add_ps(x0, one)}, ys[2] = {y0, _mm256_add_ps(y0, one)};
    const __m256 wxs[2] = {_mm256_sub_ps(one, wx), wx}, wys[2] = {_mm256_sub_ps(one, ny), ny};
    const __m256 dxs[2] = {_mm256_xor_ps(xg, negate), xg}, dys[2] = {_mm256_xor_ps(yg, negate), yg};
    for (int j = 0; j < 2; ++j) {
      for (int i = 0; i < 2; ++i) {
        const int k = 2 * j + i;
        TapV<kChunk, 2>({xs[i], ys[j]}, {w, h}, _mm256_mul_ps(wys[j], wxs[i]), k, p, index, mask, weight);
        _mm256_store_ps(&dwdx[k][p], _mm256_mul_ps(wys[j], dxs[i]));
        _mm256_store_ps(&dwdy[k][p], _mm256_mul_ps(dys[j], wxs[i]));
      }
    }
  }
}

// Trilinear taps of the 8 points whose grid coordinates start at gp (x y z of each point
// in turn), operation for operation as MakeTaps3, into the chunk's arrays at [k][p]; where
// `dw` is given, the weight's derivatives by x, y and z too (dw[a][k][p]). Zeros and
// border padding.
template <int64_t kPadding, int kChunk>
inline void Taps3V(const float* gp, int64_t d, int64_t h, int64_t w, bool align_corners, int p,
                   int32_t (*index)[kChunk], uint32_t (*mask)[kChunk], float (*weight)[kChunk],
                   float (*dw)[8][kChunk] = nullptr) {
  const __m256i stride = _mm256_setr_epi32(0, 3, 6, 9, 12, 15, 18, 21);
  const int64_t sizes[3] = {w, h, d};
  const __m256 one = _mm256_set1_ps(1.0f), negate = _mm256_set1_ps(-0.0f);
  __m256 corner[3][2], distance[3][2], grad[3];  // per axis: the two corners, their weights, d coordinate / d grid
  for (int a = 0; a < 3; ++a) {
    const __m256 v = CoordV<kPadding, 3>(_mm256_i32gather_ps(gp + a, stride, 4), sizes[a], align_corners, &grad[a]);
    corner[a][0] = _mm256_floor_ps(v);
    corner[a][1] = _mm256_add_ps(corner[a][0], one);
    distance[a][0] = _mm256_sub_ps(corner[a][1], v);  // far corner minus point, as MakeTaps3
    distance[a][1] = _mm256_sub_ps(v, corner[a][0]);
  }
  for (int k_z = 0; k_z < 2; ++k_z) {
    for (int k_y = 0; k_y < 2; ++k_y) {
      for (int k_x = 0; k_x < 2; ++k_x) {
        const int k = 4 * k_z + 2 * k_y + k_x;
        const __m256 wx = distance[0][k_x], wy = distance[1][k_y], wz = distance[2][k_z];
        const __m256 wxy = _mm256_mul_ps(wx, wy);
        TapV<kChunk, 3>({corner[0][k_x], corner[1][k_y], corner[2][k_z]}, sizes, _mm256_mul_ps(wxy, wz), k, p, index,
                        mask, weight);
        if (dw != nullptr) {  // the sign as MakeTaps3 multiplies it in: first in x, second in y, third in z
          const __m256 gx_signed = k_x ? grad[0] : _mm256_xor_ps(grad[0], negate);
          _mm256_store_ps(&dw[0][k][p], _mm256_mul_ps(_mm256_mul_ps(gx_signed, wy), wz));
          const __m256 wx_signed = k_y ? wx : _mm256_xor_ps(wx, negate);
          _mm256_store_ps(&dw[1][k][p], _mm256_mul_ps(_mm256_mul_ps(wx_signed, grad[1]), wz));
          const __m256 wxy_signed = k_z ? wxy : _mm256_xor_ps(wxy, negate);
          _mm256_store_ps(&dw[2][k][p], _mm256_mul_ps(wxy_signed, grad[2]));
        }
      }
    }
  }
}
#endif

// The taps of the chunk's points [0, count), which start at point `start` of batch
// element b, into the chunk's arrays: 8 points at a time with AVX2 (nearest, bilinear
// and bicubic), the rest one by one.
template <int64_t kMode, int64_t kPadding, int kChunk, int kRows, int kTaps>
void ChunkTaps(const float* g, int64_t b, int64_t points, int64_t start, int count, int64_t h, int64_t w,
               bool align_corners, int32_t (*index)[kChunk], uint32_t (*mask)[kChunk], float (*weight)[kChunk],
               float (*row_weight)[kChunk], Windows<kChunk>* windows = nullptr) {
  int first = 0;
#ifdef __AVX2__
  for (; first + 8 <= count; first += 8) {
    __m256 gx, gy;
    LoadGrid8(g + 2 * (b * points + start + first), &gx, &gy);
    if constexpr (kMode == kBicubic) {
      TapsCubicV<kPadding, kChunk>(gx, gy, h, w, align_corners, first, index, mask, weight, row_weight);
    } else {
      TapsV<kMode, kPadding, kChunk>(gx, gy, h, w, align_corners, first, index, mask, weight, windows);
    }
  }
#endif
  Taps taps;
  for (int p = first; p < count; ++p) {
    const float* gp = g + 2 * (b * points + start + p);
    MakeTapsT<kMode, kPadding>(gp[0], gp[1], h, w, align_corners, &taps);
    for (int k = 0; k < kTaps; ++k) {
      index[k][p] = static_cast<int32_t>(taps.index[k]);
      mask[k][p] = taps.inside[k] ? 0xFFFFFFFFu : 0u;
      weight[k][p] = kMode == kBicubic ? taps.col_weight[k] : taps.weight[k];
    }
    for (int j = 0; j < kRows; ++j) row_weight[j][p] = kMode == kBicubic ? taps.row_weight[j] : 1.0f;
  }
}

// Forward for one batch element, in chunks of points: first every point's taps (index,
// mask, weight) into flat arrays, then the chunk's samples. Nearest and bilinear take 8
// points at a time for a block of channels (the reads of the same taps in several planes
// together), bicubic one channel at a time. The blocking was chosen by timing the
// alternatives against PyTorch's kernel with tools/grid-sample-duel.py (one thread, same
// memory, 3 to 64 channels); the figures are in git history, not here.
template <int64_t kMode, int64_t kPadding>
void ForwardBatch(const float* x, const float* g, float* o, int64_t b, int64_t c, int64_t h, int64_t w,
                  int64_t points, bool align_corners) {
  constexpr int kChunk = 64;
  constexpr int kRows = kMode == kBicubic ? 4 : 1;
  constexpr int kCols = kMode == kNearest ? 1 : (kMode == kBilinear ? 4 : 4);
  constexpr int kTaps = kRows * kCols;
  const int64_t block_size = kMode == kNearest ? 4 : std::max<int64_t>(1, c);  // bilinear: every channel at once
  alignas(64) int32_t index[kTaps][kChunk];
  alignas(64) uint32_t mask[kTaps][kChunk];
  alignas(64) float weight[kTaps][kChunk];  // bicubic: the column weight
  alignas(64) float row_weight[kRows][kChunk];
  Windows<kChunk> windows;  // bilinear with AVX2, where a row holds a pair of pixels
#ifdef __AVX2__
  const bool pairs = kMode == kBilinear && w >= 2;
#else
  const bool pairs = false;
#endif
  for (int64_t start = 0; start < points; start += kChunk) {
    const int count = static_cast<int>(std::min<int64_t>(kChunk, points - start));
    ChunkTaps<kMode, kPadding, kChunk, kRows, kTaps>(g, b, points, start, count, h, w, align_corners, index, mask,
                                                     weight, row_weight, pairs ? &windows : nullptr);
    const int vector_points = kAvx2 ? count / 8 * 8 : 0;
#ifdef __AVX2__
    if constexpr (kMode == kBicubic) {  // channel by channel
      for (int64_t ch = 0; ch < c; ++ch) {
        const float* plane = x + (b * c + ch) * h * w;
        float* out = o + (b * c + ch) * points + start;
        for (int q = 0; q < vector_points; q += 8) {
          _mm256_storeu_ps(out + q, SampleAvx2<kRows, kCols, kChunk>(plane, index, mask, weight, row_weight, q));
        }
      }
    } else {  // 8 points at a time for a block of channels, the reads of the same taps in several planes together
      for (int64_t block = 0; block < c; block += block_size) {
        const int64_t block_end = std::min<int64_t>(c, block + block_size);
        for (int q = 0; q < vector_points; q += 8) {
          for (int64_t ch = block; ch < block_end; ++ch) {
            const float* plane = x + (b * c + ch) * h * w;
            float* out = o + (b * c + ch) * points + start + q;
            if (pairs) {
              _mm256_storeu_ps(out, SampleBilinearPairs<kChunk>(plane, windows, mask, weight, q));
            } else {
              _mm256_storeu_ps(out, SampleAvx2<kRows, kCols, kChunk>(plane, index, mask, weight, row_weight, q));
            }
          }
        }
      }
    }
#endif
    for (int64_t ch = 0; ch < c; ++ch) {  // the rest one by one
      const float* plane = x + (b * c + ch) * h * w;
      float* out = o + (b * c + ch) * points + start;
      for (int q = vector_points; q < count; ++q) {
        out[q] = SampleScalar<kRows, kCols, kChunk>(plane, index, mask, weight, row_weight, q);
      }
    }
  }
}

int Cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set) > 0 ? CPU_COUNT(&set) : 1;
  return 1;
}

// Runs body(b) for every batch element b in [0, batch) on XLA's intra-op thread pool,
// the threads XLA's own CPU operations use: no thread is started per call, and the
// kernel does not compete with XLA for the cores. The batch elements are claimed one at
// a time, by the calling thread too, so the call finishes even where no pool thread is
// free, and it waits only for elements that a pool thread has claimed (a task that starts
// late finds nothing left and never touches `body`).
//
// The pool's threads sleep between calls; PyTorch's OpenMP threads spin for a while
// after a call and find the next one awake, so each call here pays a pool thread's
// wake-up, a fixed cost that weighs most on short calls. The units of work stay whole
// batch elements: smaller pieces of points shorten the wait for the last one but made
// bilinear and bicubic slower per call.
template <typename Body>
void ParallelBatches(ffi::ThreadPool& pool, int64_t batch, const Body& body) {
  const int64_t workers = std::min<int64_t>({batch, static_cast<int64_t>(Cores()), pool.num_threads()});
  if (workers <= 1) {
    for (int64_t b = 0; b < batch; ++b) body(b);
    return;
  }
  struct State {
    std::atomic<int64_t> next{0}, done{0};
    int64_t batch = 0;
    std::function<void(int64_t)> body;
  };
  auto state = std::make_shared<State>();
  state->batch = batch;
  state->body = [&body](int64_t b) { body(b); };
  const auto work = [](State& s) {
    for (int64_t b = s.next.fetch_add(1); b < s.batch; b = s.next.fetch_add(1)) {
      s.body(b);
      s.done.fetch_add(1, std::memory_order_release);
    }
  };
  for (int64_t t = 1; t < workers; ++t) pool.Schedule([state, work] { work(*state); });
  work(*state);
  while (state->done.load(std::memory_order_acquire) < batch) std::this_thread::yield();
}

struct Shape {
  int64_t dims, batch, c, d, h, w, points;  // d = 1 for 2-D
};

// (..., C, H, W) with grid (..., H_out, W_out, 2), or (..., C, D, H, W) with grid
// (..., D_out, H_out, W_out, 3); the leading dimensions are the batch.
ffi::Error GetShape(const ffi::Buffer<ffi::F32>& input, const ffi::Buffer<ffi::F32>& grid, Shape* s) {
  auto in = input.dimensions();
  auto g = grid.dimensions();
  const int64_t dims = g.size() ? g[g.size() - 1] : 0;
  if ((dims != 2 && dims != 3) || static_cast<int64_t>(in.size()) < dims + 2 || g.size() != in.size()) {
    return ffi::Error::InvalidArgument(
        "grid_sample_cpu: expected input (..., C, H, W) with grid (..., H_out, W_out, 2), or input "
        "(..., C, D, H, W) with grid (..., D_out, H_out, W_out, 3)");
  }
  const size_t lead = in.size() - dims - 1;  // batch dimensions
  s->dims = dims;
  s->batch = 1;
  for (size_t i = 0; i < lead; ++i) {
    if (in[i] != g[i]) return ffi::Error::InvalidArgument("grid_sample_cpu: input and grid batch sizes differ");
    s->batch *= in[i];
  }
  s->c = in[lead];
  s->d = dims == 3 ? in[lead + 1] : 1;
  s->h = in[in.size() - 2];
  s->w = in[in.size() - 1];
  s->points = 1;
  for (size_t i = lead; i + 1 < g.size(); ++i) s->points *= g[i];
  return ffi::Error::Success();
}

// The taps of the chunk's points [first, count), which start at point `start` of batch
// element b, one point at a time (2-D: MakeTapsT; 3-D: MakeTaps3): index, mask and weight
// and, where `dw` is given, the weight's derivatives by each grid coordinate.
template <int kDims, int64_t kMode, int64_t kPadding, int kChunk, int kTaps>
void ScalarTaps(const float* g, int64_t b, const Shape& s, int64_t start, int first, int count, bool align_corners,
                int32_t (*index)[kChunk], uint32_t (*mask)[kChunk], float (*weight)[kChunk],
                float (*dw)[kTaps][kChunk] = nullptr) {
  Taps taps;
  for (int p = first; p < count; ++p) {
    const float* gp = g + kDims * (b * s.points + start + p);
    if constexpr (kDims == 2) {
      MakeTapsT<kMode, kPadding>(gp[0], gp[1], s.h, s.w, align_corners, &taps);
    } else {
      MakeTaps3<kMode, kPadding>(gp, s.d, s.h, s.w, align_corners, &taps);
    }
    const float* derivatives[3] = {taps.dwdx, taps.dwdy, taps.dwdz};
    for (int k = 0; k < kTaps; ++k) {
      index[k][p] = static_cast<int32_t>(taps.index[k]);
      mask[k][p] = taps.inside[k] ? 0xFFFFFFFFu : 0u;
      weight[k][p] = taps.weight[k];
      if (dw != nullptr) {
        for (int a = 0; a < kDims; ++a) dw[a][k][p] = derivatives[a][k];
      }
    }
  }
}

// The 3-D trilinear taps of the chunk's points [0, count), which start at point `start` of
// batch element b: 8 points at a time with AVX2 (Taps3V) in zeros and border padding, the
// rest (and reflection, whose fmod stays scalar) one by one; with `dw`, the weight's
// derivatives too.
template <int64_t kPadding, int kChunk>
void Chunk3Taps(const float* g, int64_t b, const Shape& s, int64_t start, int count, bool align_corners,
                int32_t (*index)[kChunk], uint32_t (*mask)[kChunk], float (*weight)[kChunk],
                float (*dw)[8][kChunk] = nullptr) {
  int first = 0;
#ifdef __AVX2__
  if constexpr (kPadding != kReflection) {
    for (; first + 8 <= count; first += 8) {
      Taps3V<kPadding, kChunk>(g + 3 * (b * s.points + start + first), s.d, s.h, s.w, align_corners, first, index,
                               mask, weight, dw);
    }
  }
#endif
  ScalarTaps<3, kBilinear, kPadding, kChunk, 8>(g, b, s, start, first, count, align_corners, index, mask, weight, dw);
}

// 3-D forward for one batch element (PyTorch's 3-D CPU kernel is scalar). Nearest goes
// point by point, reading every channel at each point's one tap. Trilinear works in
// chunks of points: the chunk's taps first (8 points at a time with AVX2, Taps3V, in
// zeros and border padding; one by one in reflection), then channel by channel, 8 points
// at a time with AVX2 gathers, the 8 taps' terms summed in tap order either way. Chunks
// and vector taps were kept because they beat the point-by-point loop and scalar taps
// for trilinear (and lost for nearest).
template <int64_t kMode, int64_t kPadding>
void Forward3Batch(const float* x, const float* g, float* o, int64_t b, const Shape& s, bool align_corners) {
  const int64_t volume = s.d * s.h * s.w;
  if constexpr (kMode == kNearest) {
    Taps taps;
    for (int64_t p = 0; p < s.points; ++p) {
      MakeTaps3<kMode, kPadding>(g + 3 * (b * s.points + p), s.d, s.h, s.w, align_corners, &taps);
      for (int64_t ch = 0; ch < s.c; ++ch) {
        const float* plane = x + (b * s.c + ch) * volume;
        o[(b * s.c + ch) * s.points + p] = (taps.inside[0] ? plane[taps.index[0]] : 0.0f) * taps.weight[0];
      }
    }
    return;
  }
  constexpr int kChunk = 64;
  constexpr int kTaps = 8;
  alignas(64) int32_t index[kTaps][kChunk];
  alignas(64) uint32_t mask[kTaps][kChunk];
  alignas(64) float weight[kTaps][kChunk];
  for (int64_t start = 0; start < s.points; start += kChunk) {
    const int count = static_cast<int>(std::min<int64_t>(kChunk, s.points - start));
    Chunk3Taps<kPadding, kChunk>(g, b, s, start, count, align_corners, index, mask, weight);
    for (int64_t ch = 0; ch < s.c; ++ch) {
      const float* plane = x + (b * s.c + ch) * volume;
      float* out = o + (b * s.c + ch) * s.points + start;
      int q = 0;
#ifdef __AVX2__
      for (; q + 8 <= count; q += 8) {
        _mm256_storeu_ps(out + q, SampleAvx2<1, kTaps, kChunk>(plane, index, mask, weight, weight, q));
      }
#endif
      for (; q < count; ++q) out[q] = SampleScalar<1, kTaps, kChunk>(plane, index, mask, weight, weight, q);
    }
  }
}

// The forward pass of batch element b, with the mode and padding chosen at run time
// (both checked by the caller; 3-D has no bicubic).
void ForwardOne(const float* x, const float* g, float* o, int64_t b, const Shape& s, int64_t mode, int64_t padding,
                bool align_corners) {
  if (s.dims == 3) {
    using Batch3 = void (*)(const float*, const float*, float*, int64_t, const Shape&, bool);
    static constexpr Batch3 kBatch3[2][3] = {
        {Forward3Batch<kNearest, kZeros>, Forward3Batch<kNearest, kBorder>, Forward3Batch<kNearest, kReflection>},
        {Forward3Batch<kBilinear, kZeros>, Forward3Batch<kBilinear, kBorder>, Forward3Batch<kBilinear, kReflection>}};
    kBatch3[mode][padding](x, g, o, b, s, align_corners);
    return;
  }
  using Batch = void (*)(const float*, const float*, float*, int64_t, int64_t, int64_t, int64_t, int64_t, bool);
  static constexpr Batch kBatch[3][3] = {
      {ForwardBatch<kNearest, kZeros>, ForwardBatch<kNearest, kBorder>, ForwardBatch<kNearest, kReflection>},
      {ForwardBatch<kBilinear, kZeros>, ForwardBatch<kBilinear, kBorder>, ForwardBatch<kBilinear, kReflection>},
      {ForwardBatch<kBicubic, kZeros>, ForwardBatch<kBicubic, kBorder>, ForwardBatch<kBicubic, kReflection>}};
  kBatch[mode][padding](x, g, o, b, s.c, s.h, s.w, s.points, align_corners);
}

bool KnownModeAndPadding(const Shape& s, int64_t mode, int64_t padding) {
  return mode >= 0 && mode <= 2 && padding >= 0 && padding <= 2 && !(s.dims == 3 && mode == kBicubic);
}

ffi::Error Forward(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> input, ffi::Buffer<ffi::F32> grid,
                   ffi::ResultBuffer<ffi::F32> out, int64_t mode, int64_t padding, bool align_corners) {
  Shape s;
  if (auto error = GetShape(input, grid, &s); error.failure()) return error;
  if (!KnownModeAndPadding(s, mode, padding)) {
    return ffi::Error::InvalidArgument("grid_sample_cpu: unknown mode or padding");
  }
  const float* x = input.typed_data();
  const float* g = grid.typed_data();
  float* o = out->typed_data();
  ParallelBatches(pool, s.batch, [&](int64_t b) { ForwardOne(x, g, o, b, s, mode, padding, align_corners); });
  return ffi::Error::Success();
}

// Nearest's backward for one batch element: the input gradient is a sum of copies of
// the cotangent (in point order, per channel, as PyTorch adds them); no grid gradient.
template <int64_t kPadding>
void NearestBackwardBatch(const float* c, float* gin_b, float* gg, int64_t b, int64_t channels, int64_t h, int64_t w,
                          int64_t points, bool align_corners, const float* g) {
  constexpr int kChunk = 64;
  alignas(64) int32_t index[1][kChunk];
  alignas(64) uint32_t mask[1][kChunk];
  alignas(64) float weight[1][kChunk];
  alignas(64) float row_weight[1][kChunk];
  std::fill(gg + 2 * b * points, gg + 2 * (b + 1) * points, 0.0f);
  for (int64_t start = 0; start < points; start += kChunk) {
    const int count = static_cast<int>(std::min<int64_t>(kChunk, points - start));
    ChunkTaps<kNearest, kPadding, kChunk, 1, 1>(g, b, points, start, count, h, w, align_corners, index, mask, weight,
                                                row_weight);
    for (int64_t ch = 0; ch < channels; ++ch) {
      const float* ct = c + (b * channels + ch) * points + start;
      float* gplane = gin_b + ch * h * w;
      for (int p = 0; p < count; ++p) {
        if (mask[0][p]) gplane[index[0][p]] += ct[p];
      }
    }
  }
}

// Backward for one batch element (2-D bilinear and bicubic, 3-D nearest and trilinear);
// all but 3-D nearest in chunks of points: first the chunk's taps (index, mask, weight and the weight's
// derivatives by the grid's coordinates; 8 points at a time with AVX2 in 2-D and in 3-D
// trilinear with zeros or border padding, where they beat scalar taps), then one
// channel at a time over the whole chunk: the grid gradient's terms 8 points at a time
// with AVX2, then the input gradient's additions point by point. Each point's grid
// gradient sums channel by channel, tap by tap, and each pixel of the input gradient adds
// its terms in point and tap order, as a point-by-point loop would: the vector way and the
// scalar way give the same bits. Channel by channel, the chunk works in one plane of the
// input and one of its gradient at a time. All channels per point (PyTorch's order, and
// this kernel's order before tools/grid-sample-duel.py --backward compared the two)
// thrash the L1 cache where planes lie a power of two apart.
template <int kDims, int64_t kMode, int64_t kPadding>
void BackwardBatch(const float* x, const float* g, const float* c, float* gin_b, float* gg, int64_t b,
                   const Shape& s, bool align_corners) {
  const int64_t volume = s.d * s.h * s.w;
  if constexpr (kMode == kNearest) {  // 3-D (2-D: NearestBackwardBatch): one tap, no grid gradient, point by point
    Taps taps;                        // (point by point: chunks were no faster here)
    for (int64_t p = 0; p < s.points; ++p) {
      MakeTaps3<kMode, kPadding>(g + 3 * (b * s.points + p), s.d, s.h, s.w, align_corners, &taps);
      for (int64_t ch = 0; ch < s.c; ++ch) {
        if (taps.inside[0]) gin_b[ch * volume + taps.index[0]] += c[(b * s.c + ch) * s.points + p] * taps.weight[0];
      }
    }
    std::fill(gg + kDims * b * s.points, gg + kDims * (b + 1) * s.points, 0.0f);
    return;
  }
  constexpr int kChunk = 64;
  constexpr int kTaps = kDims == 3 ? 8 : (kMode == kBicubic ? 16 : 4);
  alignas(64) int32_t index[kTaps][kChunk];
  alignas(64) uint32_t mask[kTaps][kChunk];
  alignas(64) float weight[kTaps][kChunk];
  alignas(64) float dw[kDims][kTaps][kChunk];  // d weight / d grid coordinate (x, y, z)
  alignas(64) float sum[kDims][kChunk];  // the grid gradient of the chunk's points
  for (int64_t start = 0; start < s.points; start += kChunk) {
    const int count = static_cast<int>(std::min<int64_t>(kChunk, s.points - start));
    if constexpr (kDims == 3) {
      Chunk3Taps<kPadding, kChunk>(g, b, s, start, count, align_corners, index, mask, weight, dw);
    } else {
      int first = 0;
#ifdef __AVX2__
      for (; first + 8 <= count; first += 8) {
        __m256 gx, gy;
        LoadGrid8(g + 2 * (b * s.points + start + first), &gx, &gy);
        GradTapsV<kMode, kPadding, kChunk>(gx, gy, s.h, s.w, align_corners, first, index, mask, weight, dw[0], dw[1]);
      }
#endif
      ScalarTaps<2, kMode, kPadding, kChunk, kTaps>(g, b, s, start, first, count, align_corners, index, mask, weight,
                                                    dw);
    }
    for (int a = 0; a < kDims; ++a) std::fill(sum[a], sum[a] + count, 0.0f);
    for (int64_t ch = 0; ch < s.c; ++ch) {
      const float* ct = c + (b * s.c + ch) * s.points + start;
      const float* plane = x + (b * s.c + ch) * volume;
      float* gplane = gin_b + ch * volume;
      int q = 0;
#ifdef __AVX2__
      for (; q + 8 <= count; q += 8) {
        const __m256 cv = _mm256_loadu_ps(ct + q);
        __m256 acc[kDims];
        for (int a = 0; a < kDims; ++a) acc[a] = _mm256_load_ps(sum[a] + q);
        for (int k = 0; k < kTaps; ++k) {
          const __m256i idx = _mm256_load_si256(reinterpret_cast<const __m256i*>(&index[k][q]));
          const __m256 inside = _mm256_load_ps(reinterpret_cast<const float*>(&mask[k][q]));
          // where(inside, value, 0) * cotangent: 0 * NaN stays NaN, as the jax.numpy path
          const __m256 v = _mm256_mul_ps(_mm256_and_ps(_mm256_i32gather_ps(plane, idx, 4), inside), cv);
          for (int a = 0; a < kDims; ++a) {
            acc[a] = _mm256_add_ps(acc[a], _mm256_mul_ps(v, _mm256_load_ps(&dw[a][k][q])));
          }
        }
        for (int a = 0; a < kDims; ++a) _mm256_store_ps(sum[a] + q, acc[a]);
      }
#endif
      for (; q < count; ++q) {
        for (int k = 0; k < kTaps; ++k) {
          const float v = (mask[k][q] ? plane[index[k][q]] : 0.0f) * ct[q];
          for (int a = 0; a < kDims; ++a) sum[a][q] += v * dw[a][k][q];
        }
      }
      for (int p = 0; p < count; ++p) {
        for (int k = 0; k < kTaps; ++k) {
          if (mask[k][p]) gplane[index[k][p]] += ct[p] * weight[k][p];
        }
      }
    }
    for (int p = 0; p < count; ++p) {
      for (int a = 0; a < kDims; ++a) gg[kDims * (b * s.points + start + p) + a] = sum[a][p];
    }
  }
}

// The backward pass of batch element b, which owns its slice of the input gradient
// `gin` (zeroed here) and of the grid gradient `gg`; mode and padding as ForwardOne.
void BackwardOne(const float* x, const float* g, const float* c, float* gin, float* gg, int64_t b, const Shape& s,
                 int64_t mode, int64_t padding, bool align_corners) {
  float* gin_b = gin + b * s.c * s.d * s.h * s.w;
  std::fill(gin_b, gin_b + s.c * s.d * s.h * s.w, 0.0f);
  using Batch = void (*)(const float*, const float*, const float*, float*, float*, int64_t, const Shape&, bool);
  if (s.dims == 3) {
    static constexpr Batch kBatch3[2][3] = {
        {BackwardBatch<3, kNearest, kZeros>, BackwardBatch<3, kNearest, kBorder>,
         BackwardBatch<3, kNearest, kReflection>},
        {BackwardBatch<3, kBilinear, kZeros>, BackwardBatch<3, kBilinear, kBorder>,
         BackwardBatch<3, kBilinear, kReflection>}};
    kBatch3[mode][padding](x, g, c, gin_b, gg, b, s, align_corners);
    return;
  }
  if (mode == kNearest) {
    if (padding == kZeros) NearestBackwardBatch<kZeros>(c, gin_b, gg, b, s.c, s.h, s.w, s.points, align_corners, g);
    if (padding == kBorder) NearestBackwardBatch<kBorder>(c, gin_b, gg, b, s.c, s.h, s.w, s.points, align_corners, g);
    if (padding == kReflection) {
      NearestBackwardBatch<kReflection>(c, gin_b, gg, b, s.c, s.h, s.w, s.points, align_corners, g);
    }
    return;
  }
  static constexpr Batch kBatch[2][3] = {
      {BackwardBatch<2, kBilinear, kZeros>, BackwardBatch<2, kBilinear, kBorder>,
       BackwardBatch<2, kBilinear, kReflection>},
      {BackwardBatch<2, kBicubic, kZeros>, BackwardBatch<2, kBicubic, kBorder>,
       BackwardBatch<2, kBicubic, kReflection>}};
  kBatch[mode - kBilinear][padding](x, g, c, gin_b, gg, b, s, align_corners);
}

ffi::Error Backward(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> input, ffi::Buffer<ffi::F32> grid,
                    ffi::Buffer<ffi::F32> cot, ffi::ResultBuffer<ffi::F32> grad_input,
                    ffi::ResultBuffer<ffi::F32> grad_grid, int64_t mode, int64_t padding, bool align_corners) {
  Shape s;
  if (auto error = GetShape(input, grid, &s); error.failure()) return error;
  if (!KnownModeAndPadding(s, mode, padding)) {
    return ffi::Error::InvalidArgument("grid_sample_cpu: unknown mode or padding");
  }
  const float* x = input.typed_data();
  const float* g = grid.typed_data();
  const float* c = cot.typed_data();
  float* gin = grad_input->typed_data();
  float* gg = grad_grid->typed_data();
  ParallelBatches(pool, s.batch, [&](int64_t b) { BackwardOne(x, g, c, gin, gg, b, s, mode, padding, align_corners); });
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(SidebysideGridSampleForward, Forward,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Attr<int64_t>("mode")
                                  .Attr<int64_t>("padding")
                                  .Attr<bool>("align_corners"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(SidebysideGridSampleBackward, Backward,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Attr<int64_t>("mode")
                                  .Attr<int64_t>("padding")
                                  .Attr<bool>("align_corners"));
