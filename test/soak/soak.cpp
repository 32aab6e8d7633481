// The soak test: `threads` threads run W1 (LSTM), W2 (Tree-LSTM) and W3
// (BERT, two layers) at shapes drawn at random, each thread on its own VMs
// over the three shared Executables, for `seconds`; kernels specialize in
// the background and persist in a disk cache that another process may be
// using at the same time (test/soak/run.sh starts two), limited in size so
// that entries are evicted while others load them; about eight times a run
// a thread clears the process's kernel cache and every thread makes new VMs,
// so that kernels come back from disk or are compiled again. Every output is checked against the reference
// interpreter's for the same arguments.
//
//   nimble_soak <seconds> <threads> <cache directory> [cache bytes]
//
// Prints one line of counts; exits 1 on the first wrong output or Error.
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "models/bert.hpp"
#include "models/lstm.hpp"
#include "models/tree_lstm.hpp"
#include "models/workloads.hpp"
#include "nimble/nimble.hpp"
#include "support/model_args.hpp"
#include "support/same_value.hpp"

using namespace nimble;

namespace {

Value tree_value(const workloads::TreeShape& t, const Adt& tree) {
  if (t.leaf >= 0) return tree["Leaf"].value({Tensor::scalar(t.leaf)});
  return tree["Node"].value({tree_value(*t.left, tree), tree_value(*t.right, tree)});
}

// One workload: its module, its Executable, and the arguments and reference
// output per size it is run at.
struct Workload {
  std::string entry;
  ir::Module module;
  vm::Executable exe;
  std::vector<std::pair<std::vector<Value>, Value>> cases;
};

Workload make(const std::string& entry, ir::Module module) {
  vm::Executable exe = compile(module);
  return {entry, std::move(module), std::move(exe), {}};
}

void add_case(Workload& w, std::vector<Value> args) {
  Value expected = evaluate(w.module, w.entry, args);
  w.cases.emplace_back(std::move(args), std::move(expected));
}

std::vector<Workload> workloads_to_run() {
  std::vector<Workload> all;
  {
    Builder b;
    models::build_lstm(b);
    Workload w = make("lstm", b.build());
    const std::vector<Tensor> weights = workloads::w1_weights();
    for (std::int64_t length : {1, 3, 6, 11}) {
      std::vector<Value> args{workloads::w1_input(length)};
      args.insert(args.end(), weights.begin(), weights.end());
      add_case(w, std::move(args));
    }
    all.push_back(std::move(w));
  }
  {
    Builder b;
    models::build_tree_lstm(b);
    Workload w = make("tree_lstm", b.build());
    const Adt tree(w.module.find_adt("Tree"));
    const std::vector<Tensor> weights = workloads::w2_weights();
    for (std::int64_t leaves : {1, 5, 8, 19}) {
      std::vector<Value> args{tree_value(*workloads::w2_tree(leaves), tree), workloads::w2_leaves(leaves)};
      args.insert(args.end(), weights.begin(), weights.end());
      add_case(w, std::move(args));
    }
    all.push_back(std::move(w));
  }
  {
    Builder b;
    models::build_bert(b);
    Workload w = make("bert", b.build());
    for (std::int64_t length : {2, 7, 13}) add_case(w, nimble::testing::bert_args(w.module, 2, length));
    all.push_back(std::move(w));
  }
  return all;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fputs("usage: nimble_soak <seconds> <threads> <cache directory> [cache bytes]\n", stderr);
    return 2;
  }
  const double seconds = std::atof(argv[1]);
  const int threads = std::atoi(argv[2]);
  KernelCacheOptions options;
  options.background = true;
  options.disk_cache_dir = argv[3];
  options.disk_cache_max_bytes = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : std::uint64_t{1} << 20;
  KernelCache::global().configure(options);
#ifdef NIMBLE_SOAK_SERIAL_KERNELS
  // ThreadSanitizer cannot follow oneTBB's uninstrumented workers.
  set_num_threads(1);
#endif

  try {
    const std::vector<Workload> all = workloads_to_run();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    std::atomic<std::uint64_t> runs{0}, clears{0};
    std::atomic<bool> failed{false};
    // About eight clears a run, whatever the speed (a sanitizer's is a tenth).
    const auto clear_every = std::chrono::duration<double>(seconds / 8);
    std::mutex clearing;
    auto last_clear = std::chrono::steady_clock::now();
    std::mutex report;
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        std::mt19937_64 random(0x5eedULL * static_cast<std::uint64_t>(t + 1) + static_cast<std::uint64_t>(::getpid()));
        std::vector<vm::VirtualMachine> machines;
        std::uint64_t machines_made_at = ~std::uint64_t{0};  // the clear count they were made after
        try {
          while (!failed.load() && std::chrono::steady_clock::now() < deadline) {
            // A VM keeps the kernels it used: after a clear, new VMs take
            // them from the cache again (from disk, or compiled anew).
            if (const std::uint64_t c = clears.load(); c != machines_made_at) {
              machines.clear();
              for (const Workload& w : all) machines.emplace_back(w.exe);
              machines_made_at = c;
            }
            const std::size_t k = random() % all.size();
            const Workload& w = all[k];
            const auto& [args, expected] = w.cases[random() % w.cases.size()];
            const Value out = machines[k].invoke(w.entry, args);
            if (!nimble::testing::close_value(out, expected, Tolerance{.rtol = 1e-4, .atol = 1e-5})) {
              const std::lock_guard<std::mutex> lock(report);
              fmt::print(stderr, "nimble_soak: thread {}: @{} gave a wrong output\n", t, w.entry);
              failed = true;
            }
            runs.fetch_add(1);
            bool clear_now = false;
            {
              const std::lock_guard<std::mutex> lock(clearing);
              if (std::chrono::steady_clock::now() - last_clear > clear_every) {
                last_clear = std::chrono::steady_clock::now();
                clear_now = true;
              }
            }
            if (clear_now) {
              KernelCache::global().clear();
              clears.fetch_add(1);
            }
          }
        } catch (const Error& e) {
          const std::lock_guard<std::mutex> lock(report);
          fmt::print(stderr, "nimble_soak: thread {}: {}\n", t, e.what());
          failed = true;
        }
      });
    }
    for (std::thread& th : pool) th.join();
    KernelCache::global().wait_for_background();
    const EngineStats s = engine_stats();
    std::uint64_t cached = 0;
    for (const DiskCacheEntry& e : list_disk_cache(options.disk_cache_dir)) cached += e.bytes;
    // The disk cache must have been in use (every compile asks it first).
    // How many kernels came back from it after a clear depends on timing
    // and on the other process's evictions, so it is reported, not required.
    bool exercised = true;
    if (s.disk_hits + s.disk_misses == 0) {
      fmt::print(stderr, "nimble_soak: the disk cache was never asked for a kernel: is it off?\n");
      exercised = false;
    }
    const bool passed = !failed && exercised;
    fmt::print("nimble_soak {}: {} runs on {} threads, {} cache clears; disk: {} hits, {} misses, {} rejected, "
               "{} bytes kept (limit {})\n",
               passed ? "passed" : "FAILED", runs.load(), threads, clears.load(), s.disk_hits, s.disk_misses,
               s.disk_rejected, cached, options.disk_cache_max_bytes);
    return passed ? 0 : 1;
  } catch (const Error& e) {
    fmt::print(stderr, "nimble_soak: {}\n", e.what());
    return 1;
  }
}
