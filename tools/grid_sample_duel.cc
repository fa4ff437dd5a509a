// The native grid_sample kernel (src/sidebyside/grid_sample/grid_sample_cpu.cc, included
// whole) against PyTorch's own CPU kernel (at::grid_sampler_2d, or its backward), in one
// process, on one thread, on the same memory, interleaved: no dispatch, thread pool or
// allocator on either side, only the kernels. Built and run by tools/grid-sample-duel.py,
// which writes the inputs (x.bin, g.bin and the cotangent c.bin) and reads the one line
// this prints.
//
// usage: grid_sample_duel N C H W MODE(0 nearest, 1 bilinear, 2 bicubic) PADDING(0 zeros,
//        1 border, 2 reflection) ALIGN_CORNERS(0/1) REPEATS PASS(0 forward, 1 backward)

#include KERNEL_SOURCE

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <tuple>
#include <vector>

namespace {

// Largest |ours - theirs| over the largest |theirs|: 0 for the same values.
double RelativeError(const at::Tensor& ours, const at::Tensor& theirs) {
  const double scale = theirs.abs().max().item<double>();
  const double error = (ours - theirs).abs().max().item<double>();
  return scale > 0 ? error / scale : error;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 10) {
    std::fprintf(stderr, "usage: %s N C H W MODE PADDING ALIGN_CORNERS REPEATS PASS\n", argv[0]);
    return 2;
  }
  const int64_t n = std::atoll(argv[1]), c = std::atoll(argv[2]), h = std::atoll(argv[3]), w = std::atoll(argv[4]);
  const int mode = std::atoi(argv[5]), padding = std::atoi(argv[6]), repeats = std::atoi(argv[8]);
  const bool align_corners = std::atoi(argv[7]) != 0, backward = std::atoi(argv[9]) != 0;
  at::set_num_threads(1);
  const Shape shape{2, n, c, 1, h, w, h * w};
  std::vector<float> x(n * c * h * w), g(n * h * w * 2), o(n * c * h * w), cot(n * c * h * w), gin(n * c * h * w),
      gg(n * h * w * 2);
  std::ifstream("x.bin", std::ios::binary).read(reinterpret_cast<char*>(x.data()), x.size() * sizeof(float));
  std::ifstream("g.bin", std::ios::binary).read(reinterpret_cast<char*>(g.data()), g.size() * sizeof(float));
  std::ifstream("c.bin", std::ios::binary).read(reinterpret_cast<char*>(cot.data()), cot.size() * sizeof(float));
  const at::Tensor xt = at::from_blob(x.data(), {n, c, h, w}), gt = at::from_blob(g.data(), {n, h, w, 2});
  const at::Tensor ct = at::from_blob(cot.data(), {n, c, h, w});
  at::Tensor theirs_out, theirs_gin, theirs_gg;
  const auto ours = [&] {  // batch element by batch element, as Forward and Backward run them on one thread
    for (int64_t b = 0; b < n; ++b) {
      if (backward) {
        BackwardOne(x.data(), g.data(), cot.data(), gin.data(), gg.data(), b, shape, mode, padding, align_corners);
      } else {
        ForwardOne(x.data(), g.data(), o.data(), b, shape, mode, padding, align_corners);
      }
    }
  };
  // PyTorch numbers its modes bilinear 0, nearest 1, bicubic 2
  const int64_t torch_mode = mode == kNearest ? 1 : (mode == kBilinear ? 0 : 2);
  const auto theirs = [&] {
    if (backward) {
      std::tie(theirs_gin, theirs_gg) =
          at::grid_sampler_2d_backward(ct, xt, gt, torch_mode, padding, align_corners, {true, true});
      return;
    }
    theirs_out = at::grid_sampler_2d(xt, gt, torch_mode, padding, align_corners);
  };
  ours();
  theirs();
  // each repeat: a few calls of one side, then of the other, long enough to be timed
  std::vector<double> ours_s, theirs_s, ratio;
  for (int r = 0; r < repeats; ++r) {
    double t[2];
    for (int side = 0; side < 2; ++side) {
      const auto start = std::chrono::steady_clock::now();
      for (int k = 0; k < 5; ++k) side == 0 ? ours() : theirs();
      t[side] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / 5;
    }
    ours_s.push_back(t[0]);
    theirs_s.push_back(t[1]);
    ratio.push_back(t[0] / t[1]);
  }
  std::sort(ratio.begin(), ratio.end());
  std::printf("ours_ms %.4f torch_ms %.4f ratio %.4f q1 %.4f q3 %.4f", Median(ours_s) * 1e3, Median(theirs_s) * 1e3,
              ratio[ratio.size() / 2], ratio[ratio.size() / 4], ratio[3 * ratio.size() / 4]);
  if (backward) {  // the sums run in another order than PyTorch's: close, not the same bits
    const at::Tensor ours_gin = at::from_blob(gin.data(), {n, c, h, w});
    const at::Tensor ours_gg = at::from_blob(gg.data(), {n, h, w, 2});
    std::printf(" grad_input_rel_err %.3g grad_grid_rel_err %.3g\n", RelativeError(ours_gin, theirs_gin),
                RelativeError(ours_gg, theirs_gg));
  } else {
    std::printf(" same_bits %d\n", at::equal(theirs_out, at::from_blob(o.data(), {n, c, h, w})) ? 1 : 0);
  }
  return 0;
}
