#include "runtime/cpu_features.hpp"

#include <algorithm>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace nimble::runtime {
namespace {

#if defined(__x86_64__)

struct Regs {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

// cpuid(leaf, subleaf); false past the highest leaf of the leaf's range (basic or extended): LLVM's
// "MaxLevel >= leaf &&" guard.
bool cpuid(unsigned leaf, unsigned subleaf, Regs& r) {
  r = {};
  return __get_cpuid_count(leaf, subleaf, &r.eax, &r.ebx, &r.ecx, &r.edx) != 0;
}

constexpr bool bit(unsigned reg, unsigned n) {
  return ((reg >> n) & 1U) != 0;
}

// The low half of XCR0: which register state the OS saves on a context switch. Only to be run when
// cpuid reports OSXSAVE.
unsigned xcr0() {
  unsigned eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0U));
  return eax;
}

// A port of the x86 branch of LLVM 19.1's sys::getHostCPUFeatures (TargetParser/Host.cpp): the same
// leaves, bits, OS-state conditions and derived names, in the same order. Keep the two in step when
// LLVM moves (a feature LLVM names that this omits would make a valid kernel object look unusable).
std::vector<std::string> detect() {
  std::vector<std::string> out;
  const auto set = [&out](const char* name, bool on) {
    if (on) out.emplace_back(name);
  };

  if (__get_cpuid_max(0, nullptr) < 1) return out;
  Regs r;
  cpuid(1, 0, r);
  const unsigned leaf1_ecx = r.ecx;

  set("cx8", bit(r.edx, 8));
  set("cmov", bit(r.edx, 15));
  set("mmx", bit(r.edx, 23));
  set("fxsr", bit(r.edx, 24));
  set("sse", bit(r.edx, 25));
  set("sse2", bit(r.edx, 26));

  set("sse3", bit(r.ecx, 0));
  set("pclmul", bit(r.ecx, 1));
  set("ssse3", bit(r.ecx, 9));
  set("cx16", bit(r.ecx, 13));
  set("sse4.1", bit(r.ecx, 19));
  set("sse4.2", bit(r.ecx, 20));
  set("crc32", bit(r.ecx, 20));  // LLVM: Features["crc32"] = Features["sse4.2"]
  set("movbe", bit(r.ecx, 22));
  set("popcnt", bit(r.ecx, 23));
  set("aes", bit(r.ecx, 25));
  set("rdrnd", bit(r.ecx, 30));

  // A vector/tile feature counts only if the OS saves its registers across context switches: XCR0
  // bits 1-2 (SSE, AVX), 5-7 (AVX-512 opmask, ZMM0-15 upper, ZMM16-31), 17-18 (AMX).
  const bool xsave = bit(leaf1_ecx, 27);  // OSXSAVE: the OS enabled XGETBV
  const unsigned xcr = xsave ? xcr0() : 0U;
  const bool avx_save = xsave && bit(leaf1_ecx, 28) && (xcr & 0x6U) == 0x6U;
#if defined(__APPLE__)
  // LLVM: Darwin saves AVX-512 state lazily, on first use, so XCR0 does not show it yet.
  const bool avx512_save = true;
#else
  const bool avx512_save = avx_save && (xcr & 0xe0U) == 0xe0U;
#endif
  constexpr unsigned kAmxBits = (1U << 17) | (1U << 18);
  const bool amx_save = xsave && (xcr & kAmxBits) == kAmxBits;

  set("avx", avx_save);
  set("fma", bit(leaf1_ecx, 12) && avx_save);
  set("xsave", bit(leaf1_ecx, 26) && avx_save);
  set("f16c", bit(leaf1_ecx, 29) && avx_save);

  const bool ext1 = cpuid(0x80000001U, 0, r);
  set("sahf", ext1 && bit(r.ecx, 0));
  set("lzcnt", ext1 && bit(r.ecx, 5));
  set("sse4a", ext1 && bit(r.ecx, 6));
  set("prfchw", ext1 && bit(r.ecx, 8));
  set("xop", ext1 && bit(r.ecx, 11) && avx_save);
  set("lwp", ext1 && bit(r.ecx, 15));
  set("fma4", ext1 && bit(r.ecx, 16) && avx_save);
  set("tbm", ext1 && bit(r.ecx, 21));
  set("mwaitx", ext1 && bit(r.ecx, 29));
  set("64bit", ext1 && bit(r.edx, 29));

  const bool ext8 = cpuid(0x80000008U, 0, r);
  set("clzero", ext8 && bit(r.ebx, 0));
  set("rdpru", ext8 && bit(r.ebx, 4));
  set("wbnoinvd", ext8 && bit(r.ebx, 9));

  const bool leaf7 = cpuid(7, 0, r);
  set("fsgsbase", leaf7 && bit(r.ebx, 0));
  set("sgx", leaf7 && bit(r.ebx, 2));
  set("bmi", leaf7 && bit(r.ebx, 3));
  set("avx2", leaf7 && bit(r.ebx, 5) && avx_save);
  set("bmi2", leaf7 && bit(r.ebx, 8));
  set("invpcid", leaf7 && bit(r.ebx, 10));
  set("rtm", leaf7 && bit(r.ebx, 11));
  set("avx512f", leaf7 && bit(r.ebx, 16) && avx512_save);
  set("evex512", leaf7 && bit(r.ebx, 16) && avx512_save);  // LLVM 19: set whenever avx512f is
  set("avx512dq", leaf7 && bit(r.ebx, 17) && avx512_save);
  set("rdseed", leaf7 && bit(r.ebx, 18));
  set("adx", leaf7 && bit(r.ebx, 19));
  set("avx512ifma", leaf7 && bit(r.ebx, 21) && avx512_save);
  set("clflushopt", leaf7 && bit(r.ebx, 23));
  set("clwb", leaf7 && bit(r.ebx, 24));
  set("avx512cd", leaf7 && bit(r.ebx, 28) && avx512_save);
  set("sha", leaf7 && bit(r.ebx, 29));
  set("avx512bw", leaf7 && bit(r.ebx, 30) && avx512_save);
  set("avx512vl", leaf7 && bit(r.ebx, 31) && avx512_save);

  set("avx512vbmi", leaf7 && bit(r.ecx, 1) && avx512_save);
  set("pku", leaf7 && bit(r.ecx, 4));
  set("waitpkg", leaf7 && bit(r.ecx, 5));
  set("avx512vbmi2", leaf7 && bit(r.ecx, 6) && avx512_save);
  set("shstk", leaf7 && bit(r.ecx, 7));
  set("gfni", leaf7 && bit(r.ecx, 8));
  set("vaes", leaf7 && bit(r.ecx, 9) && avx_save);
  set("vpclmulqdq", leaf7 && bit(r.ecx, 10) && avx_save);
  set("avx512vnni", leaf7 && bit(r.ecx, 11) && avx512_save);
  set("avx512bitalg", leaf7 && bit(r.ecx, 12) && avx512_save);
  set("avx512vpopcntdq", leaf7 && bit(r.ecx, 14) && avx512_save);
  set("rdpid", leaf7 && bit(r.ecx, 22));
  set("kl", leaf7 && bit(r.ecx, 23));
  set("cldemote", leaf7 && bit(r.ecx, 25));
  set("movdiri", leaf7 && bit(r.ecx, 27));
  set("movdir64b", leaf7 && bit(r.ecx, 28));
  set("enqcmd", leaf7 && bit(r.ecx, 29));

  set("uintr", leaf7 && bit(r.edx, 5));
  set("avx512vp2intersect", leaf7 && bit(r.edx, 8) && avx512_save);
  set("serialize", leaf7 && bit(r.edx, 14));
  set("tsxldtrk", leaf7 && bit(r.edx, 16));
  set("pconfig", leaf7 && bit(r.edx, 18));
  set("amx-bf16", leaf7 && bit(r.edx, 22) && amx_save);
  set("avx512fp16", leaf7 && bit(r.edx, 23) && avx512_save);
  set("amx-tile", leaf7 && bit(r.edx, 24) && amx_save);
  set("amx-int8", leaf7 && bit(r.edx, 25) && amx_save);

  // Leaf 7's EAX is its highest subleaf; some CPUs return non-zero garbage for invalid subleaves.
  const bool leaf7_1 = leaf7 && r.eax >= 1 && cpuid(7, 1, r);
  set("sha512", leaf7_1 && bit(r.eax, 0));
  set("sm3", leaf7_1 && bit(r.eax, 1));
  set("sm4", leaf7_1 && bit(r.eax, 2));
  set("raoint", leaf7_1 && bit(r.eax, 3));
  set("avxvnni", leaf7_1 && bit(r.eax, 4) && avx_save);
  set("avx512bf16", leaf7_1 && bit(r.eax, 5) && avx512_save);
  set("amx-fp16", leaf7_1 && bit(r.eax, 21) && amx_save);
  set("cmpccxadd", leaf7_1 && bit(r.eax, 7));
  set("hreset", leaf7_1 && bit(r.eax, 22));
  set("avxifma", leaf7_1 && bit(r.eax, 23) && avx_save);
  set("avxvnniint8", leaf7_1 && bit(r.edx, 4) && avx_save);
  set("avxneconvert", leaf7_1 && bit(r.edx, 5) && avx_save);
  set("amx-complex", leaf7_1 && bit(r.edx, 8) && amx_save);
  set("avxvnniint16", leaf7_1 && bit(r.edx, 10) && avx_save);
  set("prefetchi", leaf7_1 && bit(r.edx, 14));
  set("usermsr", leaf7_1 && bit(r.edx, 15));
  const bool avx10_1_256 = leaf7_1 && bit(r.edx, 19);
  set("avx10.1-256", avx10_1_256);
  // LLVM 19 checks no XCR0 state for APX (its extended GPRs) and enables all of APX-F's parts.
  const bool apx_f = leaf7_1 && bit(r.edx, 21);
  for (const char* name : {"egpr", "push2pop2", "ppx", "ndd", "ccmp", "cf"}) set(name, apx_f);

  const bool leaf_d = cpuid(0xd, 1, r);
  set("xsaveopt", leaf_d && bit(r.eax, 0) && avx_save);
  set("xsavec", leaf_d && bit(r.eax, 1) && avx_save);
  set("xsaves", leaf_d && bit(r.eax, 3) && avx_save);

  const bool leaf14 = cpuid(0x14, 0, r);
  set("ptwrite", leaf14 && bit(r.ebx, 4));

  // LLVM queries leaves 0x19 and 0x24 without setting ECX; their feature bits are in subleaf 0.
  const bool leaf19 = cpuid(0x19, 0, r);
  set("widekl", leaf7 && leaf19 && bit(r.ebx, 2));

  const bool leaf24 = cpuid(0x24, 0, r);
  set("avx10.1-512", avx10_1_256 && leaf24 && bit(r.ebx, 18));

  std::sort(out.begin(), out.end());
  return out;
}

#else

std::vector<std::string> detect() {
  return {};
}

#endif

}  // namespace

const std::vector<std::string>& host_cpu_features() {
  // Never destroyed: a background compilation may read it while the process
  // exits (BackgroundCompiler::process()).
  static const std::vector<std::string>* const features = new std::vector<std::string>(detect());
  return *features;
}

bool host_has_cpu_feature(std::string_view feature) {
  const auto& features = host_cpu_features();
  return std::binary_search(features.begin(), features.end(), feature);
}

}  // namespace nimble::runtime
