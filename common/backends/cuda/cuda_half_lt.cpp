// cuda_half_lt.cpp — dpt/gpu_half_lt.h on a GPU: one cublasLtMatmul planned
// once (descriptors, epilogue, algorithm, workspace), queued by run().
//
// Layout. dpt is row-major and cuBLAS column-major: row-major c (m, n) is the
// column-major matrix cᵀ (n, m), and cᵀ = op(b)ᵀ · op(a)ᵀ. So, as gemm_half
// (cuda_half.cu), cuBLASLt's A is dpt's b, its B is dpt's a, and its D is
// (n rows, m columns); each operand's leading dimension is its stored row
// length. What that makes of the epilogues, in dpt's terms:
//   BIAS adds one entry per row of D:            one per column of c (n);
//   the ReLU bit mask is shaped as D, its leading dimension (bits) a multiple
//     of 128 ≥ D's rows: row i of c owns bits [i·ld, i·ld + n), ld = n
//     rounded up to 128 (relu_mask_row_bits);
//   BGRADB sums cuBLASLt's op(B) = dpt's op(a) over k: one per column of D,
//     one per row of c (m) — a Linear layer's db from dW = dyᵀ·x's dyᵀ.
//
// Each plan owns its cuBLASLt handle and workspace, so plans never share
// scratch, and a CUDA graph that captured run() replays into memory the plan
// keeps until it is destroyed (destroy the graph first).
//
// Left out: a handle shared per thread (cuda_thread_state.cuh keeps cuBLAS's),
// trying the heuristic's second choice when the first fails at run time.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <sstream>
#include <string>

#include "dpt/check.h"
#include "dpt/gpu.h"
#include "dpt/gpu_half_lt.h"
#include "library_check.h"

namespace dpt::gpu {

namespace {

constexpr std::size_t kMaxWorkspace = 32u << 20;  // what cuBLAS suggests for Hopper

// A refusal: the plan's words, the function called (its name, without the
// arguments), and cuBLASLt's name for the status.
[[noreturn]] void refused(const std::string& what, const std::string& call, cublasStatus_t status) {
  DPT_FAIL(what << ": " << call.substr(0, call.find('(')) << " returned " << cublasLtGetStatusName(status) << " ("
                << cublasLtGetStatusString(status) << ")");
}
// A cuBLASLt call's status; a refusal names it and the plan's `what` (a
// local of the caller).
#define DPT_LT_CHECK(call)                                                 \
  do {                                                                     \
    const cublasStatus_t dpt_lt_status_ = (call);                          \
    if (dpt_lt_status_ != CUBLAS_STATUS_SUCCESS) refused(what, #call, dpt_lt_status_); \
  } while (0)

cudaDataType_t half_type(Half format) { return format == Half::BF16 ? CUDA_R_16BF : CUDA_R_16F; }

cublasLtEpilogue_t lt_epilogue(Epilogue e) {
  switch (e) {
    case Epilogue::Bias: return CUBLASLT_EPILOGUE_BIAS;
    case Epilogue::BiasRelu: return CUBLASLT_EPILOGUE_RELU_AUX_BIAS;
    case Epilogue::ReluBackward: return CUBLASLT_EPILOGUE_DRELU;
    case Epilogue::BiasGradient: return CUBLASLT_EPILOGUE_BGRADB;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// The largest power of two, at most 256, that divides the address: what the
// heuristic may assume of an operand it does not see (A, B, C, D).
uint32_t alignment_of(const void* p) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  uint32_t bytes = 256;
  while (bytes > 1 && address % bytes != 0) bytes /= 2;
  return bytes;
}

// The epilogue's vectors and mask: cuBLASLt's heuristic picks vector loads
// by their alignment (it reads those pointers, not A's or B's); this plan
// asks 16 bytes of them, as cuBLASLt does of its operands for full speed.
bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

}  // namespace

struct LtGemm::Plan {
  int device = 0;
  std::string what;  // "cuBLASLt bias+relu GEMM (m, n, k) bf16 on cuda:0"
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;  // cuBLASLt's A, B and D (C is D: beta = 0)
  cublasLtMatmulPreference_t preference = nullptr;
  cublasLtMatmulAlgo_t algo{};
  const void* a_ptr = nullptr;  // cuBLASLt's A: dpt's b
  const void* b_ptr = nullptr;  // cuBLASLt's B: dpt's a
  void* d_ptr = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;

  ~Plan() {  // nothing here may throw; a failed destroy only leaks
    if (workspace) cudaFree(workspace);
    if (preference) cublasLtMatmulPreferenceDestroy(preference);
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
    if (handle) cublasLtDestroy(handle);
  }
};

LtGemm::LtGemm(int device, Half format, bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
               Epilogue epilogue, const LtOperands& ops)
    : plan_(std::make_unique<Plan>()) {
  Plan& p = *plan_;
  p.device = device;
  {
    std::ostringstream s;
    s << "cuBLASLt " << epilogue_name(epilogue) << " GEMM (" << m << ", " << n << ", " << k << ") "
      << (format == Half::BF16 ? "bf16" : "fp16") << " on cuda:" << device;
    p.what = s.str();
  }
  const std::string& what = p.what;
  // ---- the contract, checked before cuBLASLt sees anything
  DPT_CHECK(m > 0 && n > 0 && k > 0, what << ": sizes must be positive");
  DPT_CHECK(ops.a && ops.b, what << ": a and b are needed");
  DPT_CHECK((ops.c16 != nullptr) != (ops.c32 != nullptr), what << ": give exactly one of c16 and c32");
  const bool uses_bias = epilogue == Epilogue::Bias || epilogue == Epilogue::BiasRelu;
  const bool uses_mask = epilogue == Epilogue::BiasRelu || epilogue == Epilogue::ReluBackward;
  if (uses_bias)
    DPT_CHECK(ops.bias && aligned16(ops.bias), what << ": bias must be given and 16-byte aligned (it is at "
                                                    << ops.bias << "); dpt's own buffers are 64-byte aligned");
  if (epilogue == Epilogue::BiasGradient)
    DPT_CHECK(ops.bias_grad && aligned16(ops.bias_grad),
              what << ": bias_grad must be given and 16-byte aligned (it is at " << ops.bias_grad << ")");
  if (uses_mask)
    DPT_CHECK(ops.relu_mask && aligned16(ops.relu_mask),
              what << ": relu_mask must be given and 16-byte aligned (it is at " << ops.relu_mask << ")");
  DPT_CUDA_CHECK(cudaSetDevice(device));

  // ---- the operation: fp32 sums and scale, the epilogue and its vectors
  const cudaDataType_t t16 = half_type(format), c_type = ops.c16 ? t16 : CUDA_R_32F;
  DPT_LT_CHECK(cublasLtCreate(&p.handle));
  DPT_LT_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  auto set = [&](cublasLtMatmulDescAttributes_t attribute, const void* value, std::size_t bytes, const char* name) {
    const cublasStatus_t status = cublasLtMatmulDescSetAttribute(p.desc, attribute, value, bytes);
    if (status != CUBLAS_STATUS_SUCCESS) refused(what + " (setting " + name + ")", "cublasLtMatmulDescSetAttribute", status);
  };
  const int32_t op_a = transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt's A is dpt's b
  const int32_t op_b = transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  set(CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a, "TRANSA");
  set(CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b, "TRANSB");
  const uint32_t lt_epi = lt_epilogue(epilogue);
  set(CUBLASLT_MATMUL_DESC_EPILOGUE, &lt_epi, sizeof lt_epi, "EPILOGUE");
  if (uses_bias || epilogue == Epilogue::BiasGradient) {
    // The bias (read) or its gradient (written), in c's type: the documented
    // default (D's type; the gradient C's), stated here so a reader sees it.
    const void* vector = uses_bias ? ops.bias : ops.bias_grad;
    const int32_t vector_type = c_type;
    set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, &vector, sizeof vector, "BIAS_POINTER");
    set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &vector_type, sizeof vector_type, "BIAS_DATA_TYPE");
  }
  if (uses_mask) {
    const int64_t mask_ld = relu_mask_row_bits(n);  // bits per column of D (row of c)
    set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &ops.relu_mask, sizeof ops.relu_mask, "EPILOGUE_AUX_POINTER");
    set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &mask_ld, sizeof mask_ld, "EPILOGUE_AUX_LD");
  }

  // ---- the layouts (column-major; see the file's comment)
  const auto rows_a = uint64_t(transpose_b ? k : n), cols_a = uint64_t(transpose_b ? n : k);  // dpt's b, stored
  const auto rows_b = uint64_t(transpose_a ? m : k), cols_b = uint64_t(transpose_a ? k : m);  // dpt's a, stored
  DPT_LT_CHECK(cublasLtMatrixLayoutCreate(&p.a, t16, rows_a, cols_a, int64_t(rows_a)));
  DPT_LT_CHECK(cublasLtMatrixLayoutCreate(&p.b, t16, rows_b, cols_b, int64_t(rows_b)));
  DPT_LT_CHECK(cublasLtMatrixLayoutCreate(&p.d, c_type, uint64_t(n), uint64_t(m), n));
  p.a_ptr = ops.b, p.b_ptr = ops.a;
  p.d_ptr = ops.c16 ? static_cast<void*>(ops.c16) : static_cast<void*>(ops.c32);

  // ---- the algorithm: the heuristic's first choice for these pointers
  DPT_LT_CHECK(cublasLtMatmulPreferenceCreate(&p.preference));
  auto prefer = [&](cublasLtMatmulPreferenceAttributes_t attribute, const void* value, std::size_t bytes,
                    const char* name) {
    const cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(p.preference, attribute, value, bytes);
    if (status != CUBLAS_STATUS_SUCCESS)
      refused(what + " (setting " + name + ")", "cublasLtMatmulPreferenceSetAttribute", status);
  };
  const uint64_t max_workspace = kMaxWorkspace;
  prefer(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_workspace, sizeof max_workspace, "MAX_WORKSPACE_BYTES");
  // Split-K partial sums in fp32 only: INPLACE and OUTPUT_TYPE would sum
  // them in c's type (16 bits), as CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION
  // forbids gemm_half's. NONE (no split) is always allowed.
  const uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  prefer(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes, sizeof schemes, "REDUCTION_SCHEME_MASK");
  const uint32_t align_a = alignment_of(p.a_ptr), align_b = alignment_of(p.b_ptr), align_d = alignment_of(p.d_ptr);
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof align_a, "MIN_ALIGNMENT_A_BYTES");
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof align_b, "MIN_ALIGNMENT_B_BYTES");
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d, sizeof align_d, "MIN_ALIGNMENT_C_BYTES");
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d, sizeof align_d, "MIN_ALIGNMENT_D_BYTES");
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  DPT_LT_CHECK(cublasLtMatmulAlgoGetHeuristic(p.handle, p.desc, p.a, p.b, p.d, p.d, p.preference, 1, &result, &found));
  if (found == 0) refused(what + " (no algorithm found)", "cublasLtMatmulAlgoGetHeuristic", CUBLAS_STATUS_NOT_SUPPORTED);
  if (result.state != CUBLAS_STATUS_SUCCESS) refused(what, "cublasLtMatmulAlgoGetHeuristic", result.state);
  p.algo = result.algo;
  p.workspace_bytes = result.workspaceSize;
  if (p.workspace_bytes > 0) DPT_CUDA_CHECK(cudaMalloc(&p.workspace, p.workspace_bytes));
}

LtGemm::~LtGemm() = default;

void LtGemm::run() const {
  const Plan& p = *plan_;
  const std::string& what = p.what;
  DPT_CUDA_CHECK(cudaSetDevice(p.device));
  auto stream = static_cast<cudaStream_t>(current_stream(p.device).handle());
  const float alpha = 1.0f, beta = 0.0f;
  DPT_LT_CHECK(cublasLtMatmul(p.handle, p.desc, &alpha, p.a_ptr, p.a, p.b_ptr, p.b, &beta, p.d_ptr, p.d, p.d_ptr,
                              p.d, &p.algo, p.workspace, p.workspace_bytes, stream));
}

}  // namespace dpt::gpu
