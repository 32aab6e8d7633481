// The bytecode compiler: a typed, fused ir::Module → vm::ExecutableData, in
// the steps the pipeline (lib/compiler/pipeline.cpp) names one by one:
// lower_to_bytecode, then over each function's code with virtual registers
// plan_memory, fuse_fresh_tensors, insert_kills, allocate_registers, and
// link. Each step of the Relay VM's lowering is its own unit:
//   free_vars.cpp      closure conversion: what a closure captures
//   function_compiler  A-normal form on the fly (every sub-expression gets a
//                      register), lambda lifting (a closure becomes a VM
//                      function whose first parameters are its captures;
//                      known closures are called directly, loops become
//                      TailCalls), register allocation
//   op_call.cpp        manifest memory: every kernel's outputs are explicit
//                      AllocStorage / AllocTensor, shaped from the types
//                      (dims of the arguments) or else by a call of the
//                      kernel's shape function where the shape is not static;
//                      reshapes become views; scalar integer ops run in the VM
//   match.cpp          match compiled to tag tests and jumps
//   memory_plan.cpp    static-size storages that stay in a frame share an
//                      arena per region between calls, by liveness
//   fresh_tensors.cpp  a storage only one tensor views is allocated with it
//   kill_registers.cpp a value's register is cleared right after its last use
//   register_allocation.cpp  virtual registers onto few frame registers
//                      (liveness, interference, greedy colouring)
//   primitive.cpp      the table of primitive functions, by content
//   report.cpp         the CompileReport and the DOT view of a fused program
//   link.cpp           the functions' code laid out in one stream
// The code is in namespace vm: it builds the VM's own data structures.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/op.hpp"
#include "nimble/compile.hpp"
#include "nimble/ir/module.hpp"
#include "vm/executable_data.hpp"

namespace nimble::vm {

inline constexpr std::uint32_t kNoReg = 0xFFFFFFFFu;

/// The free variables of `fn` (excluding `self`), in first-use order.
[[nodiscard]] std::vector<const ir::VarNode*> free_vars(const ir::FunctionNode& fn,
                                                        const ir::VarNode* self);

/// The variables `body` reads anywhere, nested functions included (not the
/// ones it binds and never reads).
[[nodiscard]] std::unordered_set<const ir::VarNode*> read_vars(const ir::Expr& body);

/// Coalesces the static-size storages of one function's `code` whose tensors
/// stay in its frame into arenas, one per region between calls, by liveness
/// (memory_plan.cpp). Returns the new virtual register count.
struct MemoryPlanStats {
  std::uint64_t arena_bytes = 0;        ///< of all its arenas; 0: nothing planned
  std::uint64_t lower_bound_bytes = 0;  ///< the most planned bytes in use at one instruction
};
std::uint32_t plan_memory(std::vector<Instruction>& code, std::span<const std::uint32_t> arg_pool,
                          std::uint32_t num_params, std::uint32_t num_virtual,
                          MemoryPlanStats* stats = nullptr);

/// Turns each AllocStorage that one AllocTensor views, whole and from its
/// start, into one AllocFreshTensor with it (fresh_tensors.cpp).
void fuse_fresh_tensors(std::vector<Instruction>& code, std::span<const std::uint32_t> arg_pool,
                        std::uint32_t num_virtual);

/// The bytes of an AllocFreshTensor's tensor.
[[nodiscard]] std::uint64_t fresh_tensor_bytes(std::span<const std::int64_t> shape_pool, const Instruction& in);

/// Inserts a KillRegister where each register that may own memory dies
/// (kill_registers.cpp), so that nothing holds a dead value's storage.
void insert_kills(std::vector<Instruction>& code, std::span<const std::uint32_t> arg_pool,
                  std::uint32_t num_virtual);

/// Maps the virtual registers of one function's `code` (and the argument
/// lists it indexes in `arg_pool`) onto frame registers, in place; parameter
/// k stays register k. Returns the frame's register count.
std::uint32_t allocate_registers(std::vector<Instruction>& code, std::span<std::uint32_t> arg_pool,
                                 std::uint32_t num_params, std::uint32_t num_virtual);

/// The ops of a primitive (fused) function, in order (primitive.cpp).
[[nodiscard]] std::vector<std::string> fused_ops(const ir::FunctionNode& fn);

/// `module` (typed, fused) as a Graphviz digraph (report.cpp).
[[nodiscard]] std::string fused_program_dot(const ir::Module& module);

/// One function's bytecode between lowering and linking.
struct BytecodeFunction {
  std::vector<Instruction> code;
  std::uint32_t num_params = 0;   ///< captures and parameters: registers 0..n-1
  std::uint32_t num_virtual = 0;  ///< registers used (frame registers once allocated)
  MemoryPlanStats plan;           ///< what plan_memory did (for the report)
};

/// A module's bytecode before linking: `data` holds everything but the
/// code; functions[i] is data.functions[i]'s code.
struct BytecodeModule {
  ExecutableData data;
  std::vector<BytecodeFunction> functions;
  /// Per primitive its ops, in order (fused ones; for the report).
  std::vector<std::vector<std::string>> primitive_ops;
};

/// A typed module (placed for `target`) as bytecode with virtual registers:
/// A-normal form, closures lifted, memory manifest, shapes computed, match
/// as tag tests and jumps (function_compiler.cpp and its units).
[[nodiscard]] BytecodeModule lower_to_bytecode(const ir::Module& module, Device target = Device::cpu());

/// plan_memory, fuse_fresh_tensors, insert_kills and allocate_registers
/// (below) on every function of `module`.
void plan_memory(BytecodeModule& module);
void fuse_fresh_tensors(BytecodeModule& module);
void insert_kills(BytecodeModule& module);
void allocate_registers(BytecodeModule& module);

/// The functions' code laid out in one stream, each function's range and
/// frame size set (link.cpp).
[[nodiscard]] ExecutableData link(BytecodeModule module);

/// `report`'s functions from `module`'s (after register allocation; report.cpp).
void fill_report(const BytecodeModule& module, CompileReport& report);

/// State shared by all functions of one module's compilation.
class ModuleCompiler {
 public:
  /// `target`: where kernels run (the module is placed for it).
  ModuleCompiler(const ir::Module& module, Device target);
  /// lower_to_bytecode.
  [[nodiscard]] BytecodeModule run();

  const ir::Module& module() const { return module_; }
  [[nodiscard]] Device target() const { return target_; }
  ExecutableData& data() { return data_; }

  /// Index of global function `name`.
  [[nodiscard]] std::uint32_t global_index(const std::string& name) const;
  /// A VM function for closure `fn` (compiled later), whose first
  /// `captured.size()` parameters are the captured variables.
  std::uint32_t lift(const ir::FunctionNode& fn, std::vector<const ir::VarNode*> captured,
                     const ir::VarNode* self, const std::string& name);
  /// Index of a constant (deduplicated by node).
  std::uint32_t constant(const ir::ConstantNode& c);
  std::uint32_t constant(Tensor t);
  std::uint32_t string(std::string s);
  /// Index of the primitive for `call` (deduplicated by content).
  /// The primitive `call` is, run on `device` (a shape function's: the CPU).
  std::uint32_t primitive(const ir::CallNode& call, PrimitiveKind kind, Device device = Device::cpu());
  std::uint32_t shape(std::span<const std::int64_t> dims);
  std::uint32_t args(std::span<const std::uint32_t> regs);

 private:
  struct Pending {
    const ir::FunctionNode* fn;
    std::vector<const ir::VarNode*> captured;
    const ir::VarNode* self;
    std::uint32_t index;
  };

  const ir::Module& module_;
  Device target_;
  ExecutableData data_;
  std::map<std::string, std::uint32_t, std::less<>> globals_;
  std::deque<Pending> pending_;
  std::vector<BytecodeFunction> code_;  // per function
  std::unordered_map<const ir::ConstantNode*, std::uint32_t> constants_;
  std::map<std::tuple<PrimitiveKind, std::string, DeviceKind, std::int32_t>, std::uint32_t> primitives_;
  std::map<std::string, std::uint32_t, std::less<>> op_counts_;  // for primitive names
  // For the report: per primitive its ops (fused ones).
  std::vector<std::vector<std::string>> primitive_ops_;
};

/// Compiles one function body.
class FunctionCompiler {
 public:
  FunctionCompiler(ModuleCompiler& mc, std::uint32_t self_index);

  /// Captured variables, then parameters, take registers 0..n-1; `self`, if
  /// set, names this function (a let-bound loop calling itself).
  void bind_params(std::span<const ir::VarNode* const> captured,
                   std::span<const ir::VarNode* const> params, const ir::VarNode* self);
  void compile_body(const ir::Expr& body) {
    read_ = read_vars(body);
    compile_tail(body);
  }
  std::vector<Instruction> take_code() { return std::move(code_); }
  [[nodiscard]] std::uint32_t num_registers() const { return next_reg_; }
  /// Captures and parameters: the first registers.
  [[nodiscard]] std::uint32_t num_params() const { return num_params_; }

  // --- used by the units of the compiler ---
  std::uint32_t new_reg() { return next_reg_++; }
  std::size_t emit(Instruction in) {
    code_.push_back(in);
    return code_.size() - 1;
  }
  std::size_t pc() const { return code_.size(); }
  /// Points the jump in field `field` (1: b, 2: c; 0: a) of instruction `at` to `target`.
  void patch_jump(std::size_t at, int field, std::size_t target);
  std::uint32_t compile_value(const ir::Expr& e);
  void compile_tail(const ir::Expr& e);
  std::uint32_t compile_op_call(const ir::CallNode& call);
  /// An op call or a call of a primitive (fused) function as one kernel;
  /// `what` names it in messages.
  std::uint32_t compile_kernel_call(const ir::CallNode& call, std::string_view what);
  /// Compiles `match`; in tail position each clause returns, else the result
  /// is in the returned register.
  std::uint32_t compile_match(const ir::MatchNode& match, bool tail);
  ModuleCompiler& module_compiler() { return mc_; }

  struct Binding {
    std::uint32_t reg = kNoReg;  // the value's register
    // A closure known here: called directly as `func` with `captured` first.
    std::int64_t func = -1;
    std::vector<std::uint32_t> captured;
  };
  void bind(const ir::VarNode* var, Binding b) { env_[var] = std::move(b); }
  /// Whether the body being compiled reads `var` (a pattern's variable that
  /// it never reads is not loaded).
  [[nodiscard]] bool is_read(const ir::VarNode* var) const { return read_.contains(var); }
  /// The let value that defined `var`, if any (op_call's pattern matching).
  [[nodiscard]] const ir::Expr* definition(const ir::VarNode* var) const;

 private:
  std::uint32_t var_reg(const ir::VarNode* var);
  std::vector<std::uint32_t> compile_args(const std::vector<ir::Expr>& args);
  /// Emits a call of a function or closure; tail: TailCall / Ret.
  std::uint32_t compile_call(const ir::CallNode& call, bool tail);
  void bind_let(const ir::LetNode& let);
  std::uint32_t compile_if(const ir::IfNode& node, bool tail);
  std::uint32_t alloc_closure(const ir::FunctionNode& fn, const ir::VarNode* self, const std::string& name);

  ModuleCompiler& mc_;
  std::uint32_t self_index_;
  std::vector<Instruction> code_;
  std::uint32_t next_reg_ = 0;
  std::uint32_t num_params_ = 0;
  std::unordered_map<const ir::VarNode*, Binding> env_;
  std::unordered_map<const ir::VarNode*, ir::Expr> defs_;
  std::unordered_set<const ir::VarNode*> read_;
  int closures_ = 0;
};

}  // namespace nimble::vm
