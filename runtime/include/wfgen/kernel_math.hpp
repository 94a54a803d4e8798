// Helpers that generated element-wise kernels call. Header-only, std-only.
//
// The expression language (docs/expressions.md) promises that every
// expression is defined for every input: integer overflow wraps, integer
// division and remainder by zero give 0, float-to-integer conversion
// saturates. Plain C++ operators do not promise that (signed overflow and
// division by zero are undefined behaviour), so wfgen emits calls to these
// functions instead. Each one is small enough to inline and vectorise.
//
// Integer helpers take std::int32_t or std::int64_t (wfgen never emits them
// for other types); floating helpers take float or double and stay in that
// type (no promotion of float to double).
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#if defined(__SSE2__)
#include <immintrin.h>  // sqrt_lanes, exp_shifted, max_row
#elif defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>  // sqrt_lanes, max_row
#elif defined(__wasm_simd128__)
#include <wasm_simd128.h>  // sqrt_lanes, max_row
#endif

namespace wfgen::rt::math {

template <class T>
concept KernelInt = std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int64_t>;

template <class T>
concept KernelFloat = std::is_same_v<T, float> || std::is_same_v<T, double>;

// --- integers: two's complement wrap-around, no undefined behaviour ---------

template <KernelInt T>
constexpr T add(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
}

template <KernelInt T>
constexpr T sub(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
}

template <KernelInt T>
constexpr T mul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
}

template <KernelInt T>
constexpr T neg(T a) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(U{0} - static_cast<U>(a));
}

// Truncating division; x / 0 == 0 and MIN / -1 == MIN (wraps).
template <KernelInt T>
constexpr T idiv(T a, T b) {
  if (b == 0) return 0;
  if (b == -1) return neg(a);
  return static_cast<T>(a / b);
}

// Remainder with the sign of the dividend (C's %); x % 0 == 0, x % -1 == 0.
template <KernelInt T>
constexpr T imod(T a, T b) {
  if (b == 0 || b == -1) return 0;
  return static_cast<T>(a % b);
}

// |a|; abs(MIN) == MIN (wraps).
template <KernelInt T>
constexpr T iabs(T a) {
  return a < 0 ? neg(a) : a;
}

// Shifts with every count defined (C++ leaves counts outside [0, bits)
// undefined): shl(x, n) is x * 2^n wrapped, so 0 from n = bits on; shr(x, n)
// is floor(x / 2^n), so 0 or -1 from n = bits on. A count below 0 counts as 0.
template <KernelInt T>
constexpr T shl(T x, T n) {
  using U = std::make_unsigned_t<T>;
  if (n < 0) return x;
  if (n >= std::numeric_limits<U>::digits) return 0;
  return static_cast<T>(static_cast<U>(x) << n);
}

template <KernelInt T>
constexpr T shr(T x, T n) {
  if (n < 0) return x;
  constexpr T kLast = std::numeric_limits<T>::digits;  // 31 or 63: floor(x / 2^kLast) is already 0 or -1
  return static_cast<T>(x >> (n < kLast ? n : kLast));  // C++20: >> of a negative is floor
}

// Float to an integer element type: truncates toward zero, saturates at the
// type's limits, NaN gives 0.
template <class I, KernelFloat F>
constexpr I to_int(F x) {
  static_assert(std::is_integral_v<I>);
  if (!(x == x)) return 0;
  constexpr F lo = static_cast<F>(std::numeric_limits<I>::min());
  constexpr F hi = static_cast<F>(std::numeric_limits<I>::max());
  if (x <= lo) return std::numeric_limits<I>::min();
  if (x >= hi) return std::numeric_limits<I>::max();
  return static_cast<I>(x);
}

// --- any number type ---------------------------------------------------------

// std::min/std::max without <algorithm>: min(a, b) is (b < a ? b : a), so a
// NaN in `a` is returned and a NaN in `b` is not.
template <class T>
constexpr T min(T a, T b) {
  return b < a ? b : a;
}

template <class T>
constexpr T max(T a, T b) {
  return a < b ? b : a;
}

template <class T>
constexpr T clamp(T x, T lo, T hi) {
  return min(max(x, lo), hi);
}

// -1, 0 or 1; for floats sign(-0.0) == -0.0 and sign(NaN) is NaN.
template <class T>
constexpr T sign(T x) {
  return x > T(0) ? T(1) : (x < T(0) ? T(-1) : x);
}

// --- floating point -------------------------------------------------------------

namespace detail {
// std::bit_cast, which the libc++ of Debian 12's emscripten (3.1.6) does not
// have; GCC's and Clang's std::bit_cast are this builtin.
template <class To, class From>
constexpr To bit_cast(const From& from) noexcept {
  return __builtin_bit_cast(To, from);
}
}  // namespace detail

// c ? a : b for floats as a bit mask: no branch and no conditional
// expression for the compiler to if-convert (see exp).
inline float select(bool c, float a, float b) {
  const std::uint32_t m = 0u - static_cast<std::uint32_t>(c);
  return detail::bit_cast<float>((detail::bit_cast<std::uint32_t>(a) & m) | (detail::bit_cast<std::uint32_t>(b) & ~m));
}
inline double select(bool c, double a, double b) {
  const std::uint64_t m = std::uint64_t{0} - static_cast<std::uint64_t>(c);
  return detail::bit_cast<double>((detail::bit_cast<std::uint64_t>(a) & m) | (detail::bit_cast<std::uint64_t>(b) & ~m));
}

// exp(x) without branches or calls, so that loops over it vectorise (glibc's
// expf is a scalar call unless -ffast-math). Cephes' method: x = k ln2 + r
// with |r| <= ln2 / 2 (ln2 in two parts, so r is exact), exp(r) by a
// polynomial (float) or a Pade form (double), then times 2^k built in the
// exponent bits, in two factors so that results near overflow and in the
// subnormal range round once. Within 1 ulp of the correctly rounded result
// (tests/runtime/test_math.cpp: [-87, 88.5] step 2^-10, subnormals, edges);
// +inf gives inf, -inf gives 0, NaN gives NaN.
namespace detail {
// x clamped to [lo, hi] (without the upper clamp when `NotPositive`: an x
// known to be <= 0 or NaN, softmax's x - max, where it cannot act: a
// compare and a select fewer a vector), then split as k ln2 + r with
// |r| <= ln2 / 2: the first step of math::exp and fast::exp (float).
struct ExpReduced {
  float r;
  std::int32_t k;
};
template <bool NotPositive>
inline ExpReduced exp_reduce(float x, float hi, float lo) {
  // The clamps are bit-mask selects (rt::math::select): the comparisons run
  // unconditionally and their results only mask bits, so the loop has no
  // control flow. Written as ?: (or std::min/std::max), g++ 12 vectorised it
  // only with AVX-512's masked compares: on AVX2 the loop stayed scalar
  // ("control flow in loop", -ftrapping-math). Both compares are false for
  // NaN, which passes them and the arithmetic after (NaN times 2^k is NaN):
  // no NaN test at the end (5 instructions of ~38 a vector on AVX-512).
  float xc = x;
  if constexpr (!NotPositive) xc = select(!(xc >= hi), xc, hi);
  xc = select(!(xc <= lo), xc, lo);
  // k = round(x / ln2) by adding 1.5 * 2^23 (no float-to-int conversion: it
  // would stop the loop from vectorising); its low bits are k. ln2 in two
  // parts, so that r is exact.
  const float shifted = xc * 1.44269504088896341f + 12582912.0f;
  const float kf = shifted - 12582912.0f;
  return {(xc - kf * 0.693359375f) - kf * -2.12194440e-4f, detail::bit_cast<std::int32_t>(shifted) - 0x4B400000};
}

// 2^k as a float, for k in [-126, 127] (any bits otherwise: an unsigned shift).
inline float exp2_int(std::int32_t k) { return detail::bit_cast<float>(static_cast<std::uint32_t>(k + 127) << 23); }

// math::exp(float), `NotPositive` as in exp_reduce. `NoSubnormal`: an x
// below -87.3 gives exp(-87.3) ~ 1.2e-38 (2^k then one normal factor).
template <bool NotPositive, bool NoSubnormal = false>
inline float exp_float(float x) {
  const auto [r, k] = exp_reduce<NotPositive>(x, 89.0f, NoSubnormal ? -87.3f : -104.0f);
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * (r * r) + r + 1.0f;
  if constexpr (NoSubnormal) return y * exp2_int(k);  // k in [-126, 0] for x <= 0: 2^k is a normal float
  // k1 and k2 are each in [-75, 64] (any value for NaN: unsigned shifts).
  const std::int32_t k1 = k >> 1, k2 = k - k1;
  return y * exp2_int(k1) * exp2_int(k2);
}

// fast::exp(float) (below), `NotPositive` as in exp_reduce.
template <bool NotPositive>
inline float fast_exp_float(float x) {
  const auto [r, k] = exp_reduce<NotPositive>(x, 88.37f, -87.3f);
  float q = 8.3572001485e-3f;
  q = q * r + 4.1833804078e-2f;
  q = q * r + 1.6666630825e-1f;
  q = q * r + 4.9999748990e-1f;
  const float y = q * (r * r) + r + 1.0f;
  return y * exp2_int(k);  // k in [-126, 127]: 2^k is a normal float
}
}  // namespace detail

inline float exp(float x) { return detail::exp_float<false>(x); }

inline double exp(double x) {
  double xc = select(!(x >= 710.0), x, 710.0);  // as exp(float): bit-mask selects that NaN passes
  xc = select(!(xc <= -746.0), xc, -746.0);
  const double shifted = xc * 1.4426950408889634074 + 6755399441055744.0;  // 1.5 * 2^52
  const double kf = shifted - 6755399441055744.0;
  const std::int64_t k = detail::bit_cast<std::int64_t>(shifted) - detail::bit_cast<std::int64_t>(6755399441055744.0);
  const double r = (xc - kf * 6.93145751953125e-1) - kf * 1.42860682030941723212e-6;
  const double r2 = r * r;
  const double px = r * ((1.26177193074810590878e-4 * r2 + 3.02994407707441961300e-2) * r2 + 9.99999999999999999910e-1);
  const double qx = ((3.00198505138664455042e-6 * r2 + 2.52448340349684104192e-3) * r2 + 2.27265548208155028766e-1) * r2 +
                    2.00000000000000000009e0;
  const double y = 1.0 + 2.0 * (px / (qx - px));
  const std::int64_t k1 = k >> 1, k2 = k - k1;  // each in [-539, 513] (any value for NaN)
  return y * detail::bit_cast<double>(static_cast<std::uint64_t>(k1 + 1023) << 52) *
         detail::bit_cast<double>(static_cast<std::uint64_t>(k2 + 1023) << 52);
}

template <KernelFloat T>
inline T sigmoid(T x) {
  return T(1) / (T(1) + math::exp(-x));
}

// erf(x) without branches or calls, so that loops over it vectorise: glibc's
// erff is a scalar call, and gelu and its gradient (both erf) took 59 % of
// the tiny LM's training step at ~20 and ~47 ns an element (issue 38,
// docs/performance-history.md). N. Juffa's erff (both ranges computed, the
// result selected): |x| <= 0.927734375: x + x p(x^2); above: 1 - exp(q(|x|))
// with x's sign, q of degree 7 in |x|. Within 0.99 ulp of the exact result
// (every 7th float of [-5, 5] with FMA contraction, 1.16 without), so within
// 2 of the correctly rounded one (tests/runtime/test_math.cpp). +-inf gives
// +-1, NaN NaN (through the near range: the comparison that picks the tail
// is false for NaN).
//
// Written for a short chain of dependent operations: a vector loop of gelu
// over it runs as many elements at once as the core's window of
// instructions in flight holds, so its time goes with the chain's latency
// times the instructions (1024 x 256 floats, gelu with a bias: 104 -> 82 us
// on the bench's Zen 5 against Juffa's Horner form with math::exp inside).
// |x| by its bits; q's higher terms in x^2 beside the lower ones; exp(q)
// with ln2 in one part (k >= -126: the error k (ln2 - float(ln2)) <=
// 2.4e-7 is multiplied by exp(q), and where that is large enough to matter
// |k| is small) and a polynomial of degree 6 whose terms
// from r^2 are in r^2 by pairs (fitted, near minimax, on [-ln2/2, ln2/2]:
// relative error 4e-9); 1 - 2^k exp(r) as 1 - 2^k - 2^k (exp(r) - 1), one
// rounding (k <= -2 in the tail, so 1 - 2^k is exact).
inline float erf(float x) {
  const float t = detail::bit_cast<float>(detail::bit_cast<std::uint32_t>(x) & 0x7fffffffu), s = x * x;
  float p = -5.96761703e-4f;
  p = p * s + 4.99119423e-3f;
  p = p * s + -2.67681349e-2f;
  p = p * s + 1.12819925e-1f;
  p = p * s + -3.76125336e-1f;
  p = p * s + 1.28379166e-1f;
  const float near0 = p * x + x;
  const float q01 = -6.34846687e-1f * t + -1.28717512e-1f, q23 = 2.42546219e-2f * t + -1.06777877e-1f;
  const float q456 = -1.72853470e-5f * s + (3.83197126e-4f * t + -3.88396438e-3f);  // times s^2
  float q = ((q456 * s + q23) * s + q01) * t - t;
  // q <= 0, or NaN for an infinite x (q's terms inf - inf): both to -87.3,
  // where exp(q) < 2^-126 leaves 1 - exp(q) = 1 (a NaN x takes the near
  // range: the comparison that picks the tail is false for NaN).
  q = select(q > -87.3f, q, -87.3f);
  const float shifted = q * 1.44269504088896341f + 12582912.0f;  // k = round(q / ln2) in the low bits (see exp_reduce)
  const float kf = shifted - 12582912.0f;
  const float r = kf * -0.693147182f + q, r2 = r * r;
  const float e01 = 1.6666521132e-1f * r + 4.9999994040e-1f, e23 = 8.3687100559e-3f * r + 4.1668388993e-2f;
  const float em1 = ((1.3814611593e-3f * r2 + e23) * r2 + e01) * r2 + r;  // exp(r) - 1
  const float scale = detail::exp2_int(detail::bit_cast<std::int32_t>(shifted) - 0x4B400000);
  const float tail = -scale * em1 + (1.0f - scale);  // 1 - exp(q) >= 0: x's sign bit or-ed in
  const float signed_tail = detail::bit_cast<float>(detail::bit_cast<std::uint32_t>(tail) | (detail::bit_cast<std::uint32_t>(x) & 0x80000000u));
  return select(t > 0.927734375f, signed_tail, near0);
}

// Doubles keep the C library's erf (no kernel of the standard library is
// double-heavy enough for it to matter).
inline double erf(double x) { return std::erf(x); }

// The faster exp a build opts into with `math: fast` (spec builds; the
// kernels wfgen makes by fusion for that build call math::fast:: instead of
// math::). Every other helper is math's (the using-directive); only the
// float exp differs: a degree-5 polynomial (1 + r + r^2 q(r), q of degree 3
// fitted at Chebyshev nodes of [-ln2/2, ln2/2]) instead of degree 7, and 2^k
// as one factor, so there is no subnormal range. Its error: within 6 ulp of
// the correctly rounded result over every float of [-87, 88.3] (checked
// once exhaustively; tests/runtime/test_math.cpp checks a 2^-10 grid; the
// accurate exp: 1 ulp). Inputs below -87.3 give exp(-87.3) ~ 1.2e-38
// instead of a subnormal or 0 (an absolute error below 1.2e-38), inputs
// above 88.37 give exp(88.37) ~ 2.4e38 instead of larger results or inf;
// NaN gives NaN. Doubles keep the accurate exp.
namespace fast {
using namespace wfgen::rt::math;

inline float exp(float x) { return detail::fast_exp_float<false>(x); }

inline double exp(double x) { return wfgen::rt::math::exp(x); }

template <KernelFloat T>
inline T sigmoid(T x) {
  return T(1) / (T(1) + fast::exp(-x));
}

}  // namespace fast

// --- row helpers of the fused row kernels ------------------------------------------

// g++ 12 warns -W(maybe-)uninitialized inside AVX-512 intrinsics such as
// _mm512_max_ps and _mm512_reduce_add_ps, which pass _mm512_undefined_ps()
// as the unused merge source (fixed in g++ 13), in every file that inlines
// them, generated kernels included. The warnings are off from here to the
// end of the file: g++ looks where the helpers are written.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace detail {

#if defined(__AVX512F__)
// 2^(j/16) and 2^(j/32), rounded to float: the tables of exp_vector.
alignas(64) inline constexpr float kExp2Sixteenths[16] = {
    0x1.000000p+0f, 0x1.0b5586p+0f, 0x1.172b84p+0f, 0x1.2387a6p+0f, 0x1.306fe0p+0f, 0x1.3dea64p+0f, 0x1.4bfdaep+0f, 0x1.5ab07ep+0f,
    0x1.6a09e6p+0f, 0x1.7a1148p+0f, 0x1.8ace54p+0f, 0x1.9c4918p+0f, 0x1.ae89fap+0f, 0x1.c199bep+0f, 0x1.d5818ep+0f, 0x1.ea4afap+0f};
alignas(64) inline constexpr float kExp2ThirtySeconds[32] = {
    0x1.000000p+0f, 0x1.059b0ep+0f, 0x1.0b5586p+0f, 0x1.11301ep+0f, 0x1.172b84p+0f, 0x1.1d4874p+0f, 0x1.2387a6p+0f, 0x1.29e9e0p+0f,
    0x1.306fe0p+0f, 0x1.371a74p+0f, 0x1.3dea64p+0f, 0x1.44e086p+0f, 0x1.4bfdaep+0f, 0x1.5342b6p+0f, 0x1.5ab07ep+0f, 0x1.6247ecp+0f,
    0x1.6a09e6p+0f, 0x1.71f75ep+0f, 0x1.7a1148p+0f, 0x1.82589ap+0f, 0x1.8ace54p+0f, 0x1.93737cp+0f, 0x1.9c4918p+0f, 0x1.a5503cp+0f,
    0x1.ae89fap+0f, 0x1.b7f770p+0f, 0x1.c199bep+0f, 0x1.cb720ep+0f, 0x1.d5818ep+0f, 0x1.dfc974p+0f, 0x1.ea4afap+0f, 0x1.f50766p+0f};

// The exp of 16 floats, with the AVX-512 instructions g++ does not reach
// from the scalar code. x = (n / N) ln2 + r with n an integer, N = 16
// (Fast: 32) and |r| <= ln2 / 2N; exp(x) = 2^floor(n / N) * 2^((n mod N) / N)
// * exp(r): the middle factor from a table in registers (vpermps, vpermt2ps),
// exp(r) - 1 by a polynomial that the short range keeps short (degree 3,
// Fast: 2, fitted minimax on [-ln2 / 2N, ln2 / 2N]), and the power of two by
// vscalefps, which multiplies with one rounding, overflow to inf and
// subnormal results included. 11 and 10 vector operations (math::exp as g++
// vectorises it: ~33). Checked over every float of [-104.5, 89.5] against
// the correctly rounded exp (once, exhaustively; tests/runtime/test_math.cpp
// checks a grid): the accurate exp within 0.99 ulp, the fast one within
// 1.74 ulp (its clamps are fast::exp's). x is clamped first (vminps and
// vmaxps give their second operand when either is NaN: with x second, NaN
// passes, and NaN through the rest is NaN). `NotPositive`: the caller knows
// x <= 0 or NaN (x minus its row's max), so only the lower clamp is done;
// the upper one would change nothing, and each clamp is an eighth of the
// function's time on Zen 5 (0.24 of 1.97 ns a vector; docs/performance-history.md).
template <bool Fast, bool NotPositive = false>
inline __m512 exp_vector(__m512 x) {
  constexpr float hi = Fast ? 88.37f : 89.0f, lo = Fast ? -87.3f : -104.0f;
  if constexpr (!NotPositive) x = _mm512_min_ps(_mm512_set1_ps(hi), x);
  x = _mm512_max_ps(_mm512_set1_ps(lo), x);
  // s = x / ln2 + 1.5 * 2^(23 - log2 N): the sum rounds x / ln2 to a
  // multiple t = n / N of 1 / N, and the low bits of s's mantissa hold n
  // (the table index, n mod N); t = s - 1.5 * 2^(23 - log2 N) exactly.
  constexpr float round_to_table = Fast ? 393216.0f : 786432.0f;
  const __m512 s = _mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), _mm512_set1_ps(round_to_table));
  const __m512 t = _mm512_sub_ps(s, _mm512_set1_ps(round_to_table));
  // r = x - t ln2, ln2 in two parts: t (13 bits at most) times the first (9 bits) is exact.
  __m512 r = _mm512_fnmadd_ps(t, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(t, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 table, p;  // 2^((n mod N) / N) and exp(r) - 1
  if constexpr (Fast) {
    table = _mm512_permutex2var_ps(_mm512_load_ps(kExp2ThirtySeconds), _mm512_castps_si512(s), _mm512_load_ps(kExp2ThirtySeconds + 16));
    p = _mm512_mul_ps(_mm512_fmadd_ps(_mm512_set1_ps(0.49999998f), r, _mm512_set1_ps(1.00001464f)), r);
  } else {
    table = _mm512_permutexvar_ps(_mm512_castps_si512(s), _mm512_load_ps(kExp2Sixteenths));
    p = _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0.166674972f), r, _mm512_set1_ps(0.500016308f)), _mm512_mul_ps(r, r), r);
  }
  return _mm512_scalef_ps(_mm512_fmadd_ps(table, p, table), t);
}


// Lane 4r (r < 4) or 4 (r - 4) + 2 (r >= 4) of the result: the max (sum)
// of the 16 lanes of v[r], for 8 vectors at once: three levels of a tree of
// 128-bit then 32-bit shuffles, 23 operations (one row's
// _mm512_reduce_max_ps is 8, and a chain), each row's lanes combined in
// _mm512_reduce_add_ps's order (i + 8, then + 4, + 2, + 1). Rows of a tile
// side by side (attention's softmax).
template <class Op>
inline __m512 fold_rows8(const __m512* v, Op op) {
  __m512 pairs[4];  // [a0 op a2, a1 op a3, b0 op b2, b1 op b3] in 128-bit quarters, rows a = 2p, b = 2p + 1
  for (int p = 0; p < 4; ++p)
    pairs[p] = op(_mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                  _mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  __m512 quads[2];  // quarter k: 4 lanes of row k (quads[0]) or 4 + k (quads[1])
  for (int h = 0; h < 2; ++h)
    quads[h] = op(_mm512_shuffle_f32x4(pairs[2 * h], pairs[2 * h + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                  _mm512_shuffle_f32x4(pairs[2 * h], pairs[2 * h + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512 two = op(_mm512_shuffle_ps(quads[0], quads[1], _MM_SHUFFLE(1, 0, 1, 0)),
                        _mm512_shuffle_ps(quads[0], quads[1], _MM_SHUFFLE(3, 2, 3, 2)));
  return op(two, _mm512_permute_ps(two, _MM_SHUFFLE(2, 3, 0, 1)));
}
inline __m512 fold_rows8_max(const __m512* v) {
  return fold_rows8(v, [](__m512 x, __m512 y) { return _mm512_max_ps(x, y); });
}
inline __m512 fold_rows8_add(const __m512* v) {
  return fold_rows8(v, [](__m512 x, __m512 y) { return _mm512_add_ps(x, y); });
}
#endif

// The sum of x[0, n) in 16 running sums (a loop g++ vectorises without
// -ffast-math), folded in halves.
template <KernelFloat T>
inline T sum_row(const T* x, std::int64_t n) {
  T acc[16] = {};
  std::int64_t c = 0;
  for (; c + 16 <= n; c += 16)
    for (int l = 0; l < 16; ++l) acc[l] += x[c + l];
  for (; c < n; ++c) acc[0] += x[c];
  for (int half = 8; half >= 1; half /= 2)
    for (int l = 0; l < half; ++l) acc[l] += acc[l + half];
  return acc[0];
}

template <bool Fast, bool NotPositive, KernelFloat T>
inline T exp_shifted(T* dst, const T* src, T shift, std::int64_t n, const T* ahead) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    const __m512 s = _mm512_set1_ps(shift);
    __m512 sum = _mm512_setzero_ps();
    std::int64_t c = 0;
    for (; c + 16 <= n; c += 16) {
      if (ahead) __builtin_prefetch(ahead + c, 0, 3);  // a line of the row ahead a vector
      const __m512 e = exp_vector<Fast, NotPositive>(_mm512_sub_ps(_mm512_loadu_ps(src + c), s));
      _mm512_storeu_ps(dst + c, e);
      sum = _mm512_add_ps(sum, e);
    }
    if (c < n) {  // the last 1-15 elements under a mask: every element gets the same exp
      const __mmask16 m = static_cast<__mmask16>((1u << (n - c)) - 1u);
      const __m512 e = exp_vector<Fast, NotPositive>(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, src + c), s));
      _mm512_mask_storeu_ps(dst + c, m, e);
      sum = _mm512_mask_add_ps(sum, m, sum, e);
    }
    return _mm512_reduce_add_ps(sum);
  }
#endif
#if defined(__GNUC__)
  if (ahead)  // here, the row ahead at once: a prefetch in the loop below could keep it scalar
    for (std::int64_t c = 0; c < n; c += 64 / static_cast<std::int64_t>(sizeof(T))) __builtin_prefetch(ahead + c, 0, 3);
#endif
  // A loop of exp (which vectorises), then the sum in a loop of its own: a
  // sum in the same loop would keep it scalar (float addition does not reorder).
  for (std::int64_t c = 0; c < n; ++c) {
    const T x = src[c] - shift;
    if constexpr (!std::is_same_v<T, float>) dst[c] = math::exp(x);  // doubles: one exp, both clamps
    else if constexpr (Fast) dst[c] = fast_exp_float<NotPositive>(x);
    else dst[c] = exp_float<NotPositive>(x);
  }
  return sum_row(dst, n);
}

// The largest (Max) or smallest element of x[0, n); NaN when any element is
// NaN, as in the reduce kernels; -inf (inf) when n is 0.
template <bool Max, KernelFloat T>
inline T extreme_row(const T* x, std::int64_t n) {
  constexpr T start = Max ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    // Two vectors at a time; vmaxps(v, a) keeps a when v is NaN, and one
    // unordered compare of the two vectors flags a NaN in either.
    const __m512 fill = _mm512_set1_ps(start);
    __m512 a0 = fill, a1 = fill;
    __mmask16 nan = 0;
    std::int64_t c = 0;
    for (; c + 32 <= n; c += 32) {
      const __m512 v0 = _mm512_loadu_ps(x + c), v1 = _mm512_loadu_ps(x + c + 16);
      a0 = Max ? _mm512_max_ps(v0, a0) : _mm512_min_ps(v0, a0);
      a1 = Max ? _mm512_max_ps(v1, a1) : _mm512_min_ps(v1, a1);
      nan |= _mm512_cmp_ps_mask(v0, v1, _CMP_UNORD_Q);
    }
    for (; c < n; c += 16) {  // the rest, the last vector under a mask (its other lanes: the start value)
      const __mmask16 m = n - c >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (n - c)) - 1u);
      const __m512 v = _mm512_mask_loadu_ps(fill, m, x + c);
      a0 = Max ? _mm512_max_ps(v, a0) : _mm512_min_ps(v, a0);
      nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    }
    if (nan) return std::numeric_limits<float>::quiet_NaN();
    if constexpr (Max) return _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
    else return _mm512_reduce_min_ps(_mm512_min_ps(a0, a1));
  }
#elif defined(__AVX__)
  if constexpr (std::is_same_v<T, float>) {
    // The same with 8 lanes. The portable loop below stays scalar for
    // AVX2 (g++ 12 if-converts its ?: only with AVX-512's masked compares,
    // -ftrapping-math): the max of 4096 rows of 1024 took 1.33 ms there,
    // 0.14 ms this way (-mavx2 -mfma on the bench's Zen 5).
    __m256 a0 = _mm256_set1_ps(start), a1 = a0, nan = _mm256_setzero_ps();
    std::int64_t c = 0;
    for (; c + 16 <= n; c += 16) {
      const __m256 v0 = _mm256_loadu_ps(x + c), v1 = _mm256_loadu_ps(x + c + 8);
      a0 = Max ? _mm256_max_ps(v0, a0) : _mm256_min_ps(v0, a0);
      a1 = Max ? _mm256_max_ps(v1, a1) : _mm256_min_ps(v1, a1);
      nan = _mm256_or_ps(nan, _mm256_cmp_ps(v0, v1, _CMP_UNORD_Q));
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, Max ? _mm256_max_ps(a0, a1) : _mm256_min_ps(a0, a1));
    bool any_nan = _mm256_movemask_ps(nan) != 0;
    float acc = start;
    for (int l = 0; l < 8; ++l) acc = (Max ? lanes[l] > acc : lanes[l] < acc) ? lanes[l] : acc;
    for (; c < n; ++c) {
      acc = (Max ? x[c] > acc : x[c] < acc) ? x[c] : acc;
      any_nan |= x[c] != x[c];
    }
    return any_nan ? std::numeric_limits<float>::quiet_NaN() : acc;
  }
#elif (defined(__aarch64__) && defined(__ARM_NEON)) || defined(__wasm_simd128__)
  if constexpr (std::is_same_v<T, float>) {
    // NEON's fmax/fmin and WebAssembly's f32x4.max/min give NaN when either
    // operand is NaN, the reduction's own rule, so no NaN flag is needed.
    // g++ 12 leaves the portable loop below scalar on aarch64 too, with a
    // branch an element (-O3).
#if defined(__aarch64__)
    using V = float32x4_t;
    auto load = [](const float* p) { return vld1q_f32(p); };
    auto pick = [](V a, V b) { return Max ? vmaxq_f32(a, b) : vminq_f32(a, b); };
    auto fold = [](V a) { return Max ? vmaxvq_f32(a) : vminvq_f32(a); };
#else
    using V = v128_t;
    auto load = [](const float* p) { return wasm_v128_load(p); };
    auto pick = [](V a, V b) { return Max ? wasm_f32x4_max(a, b) : wasm_f32x4_min(a, b); };
    auto fold = [&](V a) {
      a = pick(a, wasm_i32x4_shuffle(a, a, 2, 3, 0, 1));
      return wasm_f32x4_extract_lane(pick(a, wasm_i32x4_shuffle(a, a, 1, 0, 3, 2)), 0);
    };
#endif
    const float fill[4] = {start, start, start, start};
    V a0 = load(fill), a1 = a0;
    std::int64_t c = 0;
    for (; c + 8 <= n; c += 8) {
      a0 = pick(a0, load(x + c));
      a1 = pick(a1, load(x + c + 4));
    }
    for (; c < n; c += 4) {  // the rest, a vector at a time, its missing lanes the start value
      float lanes[4] = {start, start, start, start};
      for (std::int64_t l = 0; l < 4 && c + l < n; ++l) lanes[l] = x[c + l];
      a0 = pick(a0, load(lanes));
    }
    return fold(pick(a0, a1));
  }
#endif
  // 16 lanes and a NaN flag each, folded in halves. g++ 12 leaves this loop
  // scalar on x86 (the ?: under -ftrapping-math, as above): an SSE2 build
  // takes 1.6 ms for the max of 4096 rows of 1024 (docs/performance-history.md).
  T acc[16];
  int nan[16] = {};
  for (int l = 0; l < 16; ++l) acc[l] = start;
  std::int64_t c = 0;
  for (; c + 16 <= n; c += 16) {
    for (int l = 0; l < 16; ++l) {
      const T v = x[c + l];
      acc[l] = (Max ? v > acc[l] : v < acc[l]) ? v : acc[l];
      nan[l] |= v != v;
    }
  }
  for (; c < n; ++c) {
    acc[0] = (Max ? x[c] > acc[0] : x[c] < acc[0]) ? x[c] : acc[0];
    nan[0] |= x[c] != x[c];
  }
  for (int half = 8; half >= 1; half /= 2) {
    for (int l = 0; l < half; ++l) {
      acc[l] = (Max ? acc[l + half] > acc[l] : acc[l + half] < acc[l]) ? acc[l + half] : acc[l];
      nan[l] |= nan[l + half];
    }
  }
  return nan[0] ? std::numeric_limits<T>::quiet_NaN() : acc[0];
}

}  // namespace detail

// dst[c] = exp(src[c] - shift) for c < n (dst may be src), and returns the
// sum of the dst[c] it wrote: math::exp's bound (1 ulp) and edges, but on
// AVX-512 targets a vector at a time through detail::exp_vector (0.99 ulp).
// The result of an element does not depend on its position (the tail goes
// through the vector code under a mask). Fused row kernels call it on the
// row they cache, and take the sum as the row's sum when the row sums it
// (softmax, log-sum-exp: one pass less over the row): softmax's exp(x -
// max) straight from the input row (storing x - max first and reading it
// back cost 9-14 % of softmax 4096 x 1024), any other exp(a) as
// exp_in_place on the stored a.
//
// `ahead`, when not null, is a row of n elements (a later row of the
// kernel's input) to bring into the cache meanwhile: on AVX-512 a line a
// vector, between the exps, so that those prefetches do not queue ahead of
// the row's own loads (rows from memory: softmax 4096 x 1024 in 0.83-0.88
// ms against 1.07-1.14 ms with the row after next prefetched at once).
template <KernelFloat T>
inline T exp_shifted(T* dst, const T* src, T shift, std::int64_t n, const T* ahead = nullptr) {
  return detail::exp_shifted<false, false>(dst, src, shift, n, ahead);
}
// exp_shifted with `max` the largest element of src[0, n) (max_row(src,
// n)): softmax's exp(x - max). Every src[c] - max is then <= 0 or NaN,
// and the vector code leaves out the upper clamp; the results are
// exp_shifted's. (A `max` more than 89 below an element would give that
// element an unspecified value instead of inf: no undefined behaviour.)
template <KernelFloat T>
inline T exp_minus_max(T* dst, const T* src, T max, std::int64_t n, const T* ahead = nullptr) {
  return detail::exp_shifted<false, true>(dst, src, max, n, ahead);
}
// x[c] = exp(x[c]) for c < n (x - 0 is x, NaN and -0 included), and returns their sum.
template <KernelFloat T>
inline T exp_in_place(T* x, std::int64_t n, const T* ahead = nullptr) {
  return exp_shifted(x, x, T(0), n, ahead);
}

namespace fast {
// As math::exp_shifted and exp_in_place with fast::exp's clamps: within
// fast::exp's 6 ulp (1.74 ulp on AVX-512 targets).
template <KernelFloat T>
inline T exp_shifted(T* dst, const T* src, T shift, std::int64_t n, const T* ahead = nullptr) {
  return detail::exp_shifted<true, false>(dst, src, shift, n, ahead);
}
template <KernelFloat T>
inline T exp_minus_max(T* dst, const T* src, T max, std::int64_t n, const T* ahead = nullptr) {
  return detail::exp_shifted<true, true>(dst, src, max, n, ahead);
}
template <KernelFloat T>
inline T exp_in_place(T* x, std::int64_t n, const T* ahead = nullptr) {
  return exp_shifted(x, x, T(0), n, ahead);
}
}  // namespace fast

// The largest element of x[0, n) (min_row: the smallest), NaN when any is
// NaN and -inf (inf) for an empty row, as a max (min) reduction: fused row
// kernels call it for the max of an input's row (softmax's first pass), on
// AVX-512 with two compares fewer a vector than the loop they would emit.
template <KernelFloat T>
inline T max_row(const T* x, std::int64_t n) {
  return detail::extreme_row<true>(x, n);
}
template <KernelFloat T>
inline T min_row(const T* x, std::int64_t n) {
  return detail::extreme_row<false>(x, n);
}

namespace detail {
#if defined(__AVX512F__)
// scaled_softmax_row (below) for a row of at most 64 floats, held in four
// vectors: the same operations in the same order as the general path (so
// the same bits), without its five loops over memory. Each of those loops
// branches on the row's length, which in a causal attention's rows changes
// every row (1, 2, ... 64 kept elements): 35 us for the tiny LM's 16 x 64
// rows of 64 (0.53 ns an element; docs/performance-history.md). Lanes past n hold
// -inf for the max and are masked out of the sum and the stores.
inline void scaled_softmax_row_short(float* dst, const float* src, float scale, std::int64_t n, std::int64_t cols) {
  const __m512 s = _mm512_set1_ps(scale), below = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const int kept = static_cast<int>((n + 15) / 16), all = static_cast<int>((cols + 15) / 16);
  auto lanes = [](std::int64_t left) {
    return left >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (left > 0 ? left : 0)) - 1u);
  };
  __m512 v[4];
  __m512 mx = below;
  __mmask16 nan = 0;
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    if (q >= kept) break;
    v[q] = _mm512_mask_mul_ps(below, lanes(n - 16 * q), s, _mm512_maskz_loadu_ps(lanes(n - 16 * q), src + 16 * q));
    mx = _mm512_max_ps(v[q], mx);
    nan |= _mm512_cmp_ps_mask(v[q], v[q], _CMP_UNORD_Q);
  }
  const __m512 max = nan ? _mm512_set1_ps(std::numeric_limits<float>::quiet_NaN()) : _mm512_set1_ps(_mm512_reduce_max_ps(mx));
  __m512 sum = _mm512_setzero_ps();
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    if (q >= kept) break;
    v[q] = exp_vector<false, true>(_mm512_sub_ps(v[q], max));
    sum = _mm512_mask_add_ps(sum, lanes(n - 16 * q), sum, v[q]);
  }
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    if (q >= all) break;
    const __m512 out = q < kept ? _mm512_maskz_mul_ps(lanes(n - 16 * q), v[q], inv) : _mm512_setzero_ps();
    _mm512_mask_storeu_ps(dst + 16 * q, lanes(cols - 16 * q), out);
  }
}
#endif
}  // namespace detail

// dst[j] = softmax(scale * src[0, n))[j] for j < n, and 0 for n <= j < cols
// (0 <= n <= cols; dst may be src): a row of attention's scaled, causal
// softmax (the scaled_softmax kernel). scale * src[j] rounded, its max
// (NaN when any is NaN), exp_minus_max, then each exp times 1 / their sum:
// the results of max_row and exp_minus_max.
template <KernelFloat T>
inline void scaled_softmax_row(T* dst, const T* src, T scale, std::int64_t n, std::int64_t cols) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    if (cols <= 64) {
      detail::scaled_softmax_row_short(dst, src, scale, n, cols);
      return;
    }
  }
#endif
  for (std::int64_t j = 0; j < n; ++j) dst[j] = scale * src[j];
  const T inv = T(1) / exp_minus_max(dst, dst, max_row(dst, n), n);
  for (std::int64_t j = 0; j < n; ++j) dst[j] *= inv;
  for (std::int64_t j = n; j < cols; ++j) dst[j] = T(0);
}

template <KernelFloat T>
inline T rsqrt(T x) {
  return T(1) / std::sqrt(x);
}

namespace detail {

// One vector square root in place, of `Bytes` bytes; kSqrtBytes: the widest
// the target has (0: none).
#if defined(__AVX512F__)
inline constexpr int kSqrtBytes = 64;
inline void sqrt_vector(float* v) { _mm512_storeu_ps(v, _mm512_sqrt_ps(_mm512_loadu_ps(v))); }
inline void sqrt_vector(double* v) { _mm512_storeu_pd(v, _mm512_sqrt_pd(_mm512_loadu_pd(v))); }
#elif defined(__AVX__)
inline constexpr int kSqrtBytes = 32;
inline void sqrt_vector(float* v) { _mm256_storeu_ps(v, _mm256_sqrt_ps(_mm256_loadu_ps(v))); }
inline void sqrt_vector(double* v) { _mm256_storeu_pd(v, _mm256_sqrt_pd(_mm256_loadu_pd(v))); }
#elif defined(__SSE2__)
inline constexpr int kSqrtBytes = 16;
inline void sqrt_vector(float* v) { _mm_storeu_ps(v, _mm_sqrt_ps(_mm_loadu_ps(v))); }
inline void sqrt_vector(double* v) { _mm_storeu_pd(v, _mm_sqrt_pd(_mm_loadu_pd(v))); }
#elif defined(__aarch64__) && defined(__ARM_NEON)
inline constexpr int kSqrtBytes = 16;
inline void sqrt_vector(float* v) { vst1q_f32(v, vsqrtq_f32(vld1q_f32(v))); }
inline void sqrt_vector(double* v) { vst1q_f64(v, vsqrtq_f64(vld1q_f64(v))); }
#elif defined(__wasm_simd128__)
inline constexpr int kSqrtBytes = 16;
inline void sqrt_vector(float* v) { wasm_v128_store(v, wasm_f32x4_sqrt(wasm_v128_load(v))); }
inline void sqrt_vector(double* v) { wasm_v128_store(v, wasm_f64x2_sqrt(wasm_v128_load(v))); }
#else
inline constexpr int kSqrtBytes = 0;
template <KernelFloat T>
void sqrt_vector(T*);  // never called: sqrt_lanes takes its scalar loop without vectors
#endif

}  // namespace detail

// v[l] = sqrt(v[l]) for l < N (a row kernel's per-row values, one row per
// lane), one vector square root per vector of the widest width the target
// has, when N lanes fill whole vectors. The same correctly rounded results
// as std::sqrt (NaN for a negative input), but std::sqrt may set errno, and
// with errno on (GCC's default) a loop of std::sqrt does not vectorise: 16
// scalar roots, each with its check, were a tenth of layernorm 64 x 32
// (bench/).
template <int N, KernelFloat T>
inline void sqrt_lanes(T* v) {
  constexpr int width = detail::kSqrtBytes / static_cast<int>(sizeof(T));  // lanes per vector
  if constexpr (width > 0 && N % width == 0) {
    for (int i = 0; i < N; i += width) detail::sqrt_vector(v + i);
  } else {
    for (int i = 0; i < N; ++i) v[i] = std::sqrt(v[i]);
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace wfgen::rt::math
