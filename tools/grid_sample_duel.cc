// The native grid_sample kernel's forward (src/sidebyside/sampling/grid_sample_cpu.cc,
// included whole) against PyTorch's own CPU kernel (at::grid_sampler_2d), in one process,
// on one thread, on the same memory, interleaved: no dispatch, thread pool or allocator on
// either side, only the kernels. Built and run by tools/grid-sample-duel.py, which writes
// the inputs (x.bin, g.bin) and reads the one line this prints.
//
// usage: grid_sample_duel N C H W MODE(0 nearest, 1 bilinear, 2 bicubic) PADDING(0 zeros,
//        1 border, 2 reflection) ALIGN_CORNERS(0/1) REPEATS

#include KERNEL_SOURCE

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <vector>

namespace {

template <int64_t kMode>
void OursForMode(const float* x, const float* g, float* o, int64_t n, int64_t c, int64_t h, int64_t w,
                 int64_t padding, bool align_corners) {
  for (int64_t b = 0; b < n; ++b) {
    if (padding == kZeros) ForwardBatch<kMode, kZeros>(x, g, o, b, c, h, w, h * w, align_corners);
    if (padding == kBorder) ForwardBatch<kMode, kBorder>(x, g, o, b, c, h, w, h * w, align_corners);
    if (padding == kReflection) ForwardBatch<kMode, kReflection>(x, g, o, b, c, h, w, h * w, align_corners);
  }
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 9) {
    std::fprintf(stderr, "usage: %s N C H W MODE PADDING ALIGN_CORNERS REPEATS\n", argv[0]);
    return 2;
  }
  const int64_t n = std::atoll(argv[1]), c = std::atoll(argv[2]), h = std::atoll(argv[3]), w = std::atoll(argv[4]);
  const int mode = std::atoi(argv[5]), padding = std::atoi(argv[6]), repeats = std::atoi(argv[8]);
  const bool align_corners = std::atoi(argv[7]) != 0;
  at::set_num_threads(1);
  std::vector<float> x(n * c * h * w), g(n * h * w * 2), o(n * c * h * w);
  std::ifstream("x.bin", std::ios::binary).read(reinterpret_cast<char*>(x.data()), x.size() * sizeof(float));
  std::ifstream("g.bin", std::ios::binary).read(reinterpret_cast<char*>(g.data()), g.size() * sizeof(float));
  const at::Tensor xt = at::from_blob(x.data(), {n, c, h, w}), gt = at::from_blob(g.data(), {n, h, w, 2});
  at::Tensor theirs_out;
  const auto ours = [&] {
    if (mode == kNearest) OursForMode<kNearest>(x.data(), g.data(), o.data(), n, c, h, w, padding, align_corners);
    if (mode == kBilinear) OursForMode<kBilinear>(x.data(), g.data(), o.data(), n, c, h, w, padding, align_corners);
    if (mode == kBicubic) OursForMode<kBicubic>(x.data(), g.data(), o.data(), n, c, h, w, padding, align_corners);
  };
  // PyTorch numbers its modes bilinear 0, nearest 1, bicubic 2
  const int64_t torch_mode = mode == kNearest ? 1 : (mode == kBilinear ? 0 : 2);
  const auto theirs = [&] { theirs_out = at::grid_sampler_2d(xt, gt, torch_mode, padding, align_corners); };
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
  const bool same = at::equal(theirs_out, at::from_blob(o.data(), {n, c, h, w}));
  std::printf("ours_ms %.4f torch_ms %.4f ratio %.4f q1 %.4f q3 %.4f same_bits %d\n", Median(ours_s) * 1e3,
              Median(theirs_s) * 1e3, ratio[ratio.size() / 2], ratio[ratio.size() / 4], ratio[3 * ratio.size() / 4],
              same ? 1 : 0);
  return 0;
}
