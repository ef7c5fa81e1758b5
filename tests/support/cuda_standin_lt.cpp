// cuda_standin_lt.cpp — the cuBLASLt stand-in (cuda_standin/cublasLt.h): a
// column-major GEMM and its epilogues as cuBLASLt documents them, in host
// loops queued on the runtime stand-in's streams. Written from cuBLASLt's
// terms only (A, B, D, rows, columns, leading dimensions), never from dpt's
// row-major view, so a test through it checks cuda_half_lt.cpp's mapping.
#include <cublasLt.h>

#include <cstring>
#include <map>
#include <vector>

#include "support/cuda_standin/standin.h"

struct cublasLtContext {};
struct cublasLtMatmulDescOpaque {
  std::map<int, std::vector<unsigned char>> attributes;
  template <typename T>
  T get(int attribute, T fallback) const {
    auto it = attributes.find(attribute);
    if (it == attributes.end() || it->second.size() != sizeof(T)) return fallback;
    T value;
    std::memcpy(&value, it->second.data(), sizeof value);
    return value;
  }
};
struct cublasLtMatrixLayoutOpaque {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
};
struct cublasLtMatmulPreferenceOpaque {};

namespace {

float load(const void* p, cudaDataType_t type, int64_t i) {
  if (type == CUDA_R_32F) return static_cast<const float*>(p)[i];
  const uint32_t bits = uint32_t(static_cast<const uint16_t*>(p)[i]) << 16;  // bf16: float's top half
  float v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}
void store(void* p, cudaDataType_t type, int64_t i, float v) {
  if (type == CUDA_R_32F) {
    static_cast<float*>(p)[i] = v;
    return;
  }
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  static_cast<uint16_t*>(p)[i] = uint16_t(bits >> 16);  // truncates: the tests use values exact in bf16
}

// Element (r, c) of op(X), X stored column-major with leading dimension ld.
float op_at(const void* x, const cublasLtMatrixLayoutOpaque& layout, int op, uint64_t r, uint64_t c) {
  const uint64_t row = op == CUBLAS_OP_N ? r : c, col = op == CUBLAS_OP_N ? c : r;
  return load(x, layout.type, int64_t(row) + int64_t(col) * layout.ld);
}
uint64_t op_rows(const cublasLtMatrixLayoutOpaque& l, int op) { return op == CUBLAS_OP_N ? l.rows : l.cols; }
uint64_t op_cols(const cublasLtMatrixLayoutOpaque& l, int op) { return op == CUBLAS_OP_N ? l.cols : l.rows; }

// What cuBLASLt would refuse of this problem (shapes, the mask's ld, types).
cublasStatus_t problem_status(const cublasLtMatmulDescOpaque& desc, const cublasLtMatrixLayoutOpaque& a,
                              const cublasLtMatrixLayoutOpaque& b, const cublasLtMatrixLayoutOpaque& d) {
  const int ta = desc.get<int32_t>(CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_N);
  const int tb = desc.get<int32_t>(CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  if (op_rows(a, ta) != d.rows || op_cols(b, tb) != d.cols || op_cols(a, ta) != op_rows(b, tb))
    return CUBLAS_STATUS_INVALID_VALUE;
  for (const auto* l : {&a, &b, &d})
    if (l->ld < int64_t(l->rows)) return CUBLAS_STATUS_INVALID_VALUE;
  if (a.type != CUDA_R_16BF || b.type != CUDA_R_16BF) return CUBLAS_STATUS_NOT_SUPPORTED;
  const uint32_t epilogue = desc.get<uint32_t>(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_DEFAULT);
  if (epilogue & 128) {  // a ReLU bit mask: ld a multiple of 128, at least D's rows
    const int64_t ld = desc.get<int64_t>(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, 0);
    if (ld % 128 != 0 || ld < int64_t(d.rows) || !desc.get<void*>(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, nullptr))
      return CUBLAS_STATUS_INVALID_VALUE;
  }
  if ((epilogue & (4 | 512)) && !desc.get<void*>(CUBLASLT_MATMUL_DESC_BIAS_POINTER, nullptr))
    return CUBLAS_STATUS_INVALID_VALUE;
  if ((epilogue & (4 | 512)) && desc.get<int32_t>(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, d.type) != d.type)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

const char* cublasLtGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}
const char* cublasLtGetStatusString(cublasStatus_t status) {
  return status == CUBLAS_STATUS_SUCCESS ? "success" : "refused by the stand-in";
}
cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  *handle = new cublasLtContext;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale) {
  if (compute != CUBLAS_COMPUTE_32F || scale != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  *desc = new cublasLtMatmulDescOpaque;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute,
                                              const void* value, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(value);
  desc->attributes[attribute] = std::vector<unsigned char>(p, p + bytes);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType_t type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  *layout = new cublasLtMatrixLayoutOpaque{type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* preference) {
  *preference = new cublasLtMatmulPreferenceOpaque;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t preference) {
  delete preference;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t,
                                                    const void*, std::size_t) {
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t,
                                              cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int* returned) {
  *returned = 0;
  if (requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
  const cublasStatus_t status = problem_status(*desc, *a, *b, *d);
  if (status != CUBLAS_STATUS_SUCCESS) return status;
  results[0] = cublasLtMatmulHeuristicResult_t{};
  results[0].workspaceSize = 64;  // so the plan's workspace is exercised
  results[0].state = CUBLAS_STATUS_SUCCESS;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t desc, const void* alpha, const void* a_ptr,
                              cublasLtMatrixLayout_t a, const void* b_ptr, cublasLtMatrixLayout_t b, const void* beta,
                              const void*, cublasLtMatrixLayout_t, void* d_ptr, cublasLtMatrixLayout_t d,
                              const cublasLtMatmulAlgo_t*, void*, std::size_t, cudaStream_t stream) {
  const cublasStatus_t status = problem_status(*desc, *a, *b, *d);
  if (status != CUBLAS_STATUS_SUCCESS) return status;
  if (*static_cast<const float*>(alpha) != 1.0f || *static_cast<const float*>(beta) != 0.0f)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  const cublasLtMatmulDescOpaque dd = *desc;  // the values at the call, as cuBLASLt reads them
  const cublasLtMatrixLayoutOpaque al = *a, bl = *b, dl = *d;
  dpt_test::standin::enqueue(static_cast<void*>(stream), [=] {
    const int ta = dd.get<int32_t>(CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_N);
    const int tb = dd.get<int32_t>(CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
    const uint32_t epilogue = dd.get<uint32_t>(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_DEFAULT);
    void* vector = dd.get<void*>(CUBLASLT_MATMUL_DESC_BIAS_POINTER, nullptr);
    auto* mask = static_cast<unsigned char*>(dd.get<void*>(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, nullptr));
    const int64_t mask_ld = dd.get<int64_t>(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, 0);
    const uint64_t k = op_cols(al, ta);
    for (uint64_t c = 0; c < dl.cols; ++c)
      for (uint64_t r = 0; r < dl.rows; ++r) {
        float v = 0;
        for (uint64_t p = 0; p < k; ++p) v += op_at(a_ptr, al, ta, r, p) * op_at(b_ptr, bl, tb, p, c);
        if (epilogue & 4) v += load(vector, dl.type, int64_t(r));  // BIAS: one entry per row of D
        const int64_t bit = int64_t(r) + int64_t(c) * mask_ld;      // the mask: column-major bits
        if (epilogue == CUBLASLT_EPILOGUE_DRELU && !(mask[bit / 8] >> (bit % 8) & 1)) v = 0;
        if (epilogue & 2) {  // RELU, and its mask when AUX
          if (!(v > 0)) v = 0;
          if (epilogue & 128) mask[bit / 8] = (unsigned char)((mask[bit / 8] & ~(1 << (bit % 8))) | ((v > 0) << (bit % 8)));
        }
        store(d_ptr, dl.type, int64_t(r) + int64_t(c) * dl.ld, v);
      }
    if (epilogue == CUBLASLT_EPILOGUE_BGRADB)  // op(B) summed over k: one entry per column of D
      for (uint64_t c = 0; c < dl.cols; ++c) {
        float s = 0;
        for (uint64_t p = 0; p < k; ++p) s += op_at(b_ptr, bl, tb, p, c);
        store(vector, dl.type, int64_t(c), s);
      }
  });
  return CUBLAS_STATUS_SUCCESS;
}
