/// @file library_check.h
/// @brief `DPT_MPI_CHECK`, `DPT_CUDA_CHECK`, `DPT_CUBLAS_CHECK`,
/// `DPT_NCCL_CHECK`: a library call's return code turned into the core's
/// `dpt::Error` (dpt/check.h), with the call's text and the library's own
/// sentence for the code:
///
///     DPT_CUDA_CHECK(cudaMalloc(&ptr, bytes));
///     // [rank 0] cudaMalloc(&ptr, bytes) failed: out of memory
///
/// Only the backends call MPI, CUDA, cuBLAS and NCCL, so only they include
/// this. It includes none of the libraries' headers: a file that uses a
/// macro includes its library (<mpi.h>, <cuda_runtime.h>, <cublas_v2.h>,
/// <nccl.h>) itself.
#pragma once

#include <string>

#include "dpt/check.h"

/// Checks an MPI return code (use in files that include <mpi.h>).
#define DPT_MPI_CHECK(call)                                                \
  do {                                                                     \
    int dpt_mpi_rc_ = (call);                                              \
    if (dpt_mpi_rc_ != MPI_SUCCESS) {                                      \
      char dpt_mpi_msg_[MPI_MAX_ERROR_STRING];                             \
      int dpt_mpi_len_ = 0;                                                \
      MPI_Error_string(dpt_mpi_rc_, dpt_mpi_msg_, &dpt_mpi_len_);          \
      DPT_FAIL(#call << " failed: " << std::string(dpt_mpi_msg_, dpt_mpi_len_)); \
    }                                                                      \
  } while (0)

/// Checks a CUDA runtime return code (use in files that include <cuda_runtime.h>).
#define DPT_CUDA_CHECK(call)                                               \
  do {                                                                     \
    cudaError_t dpt_cuda_rc_ = (call);                                     \
    DPT_CHECK(dpt_cuda_rc_ == cudaSuccess,                                 \
              #call << " failed: " << cudaGetErrorString(dpt_cuda_rc_));   \
  } while (0)

/// Checks a cuBLAS status (use in files that include <cublas_v2.h>).
#define DPT_CUBLAS_CHECK(call)                                             \
  do {                                                                     \
    cublasStatus_t dpt_cublas_rc_ = (call);                                \
    DPT_CHECK(dpt_cublas_rc_ == CUBLAS_STATUS_SUCCESS,                     \
              #call << " failed: " << cublasGetStatusString(dpt_cublas_rc_)); \
  } while (0)

/// Checks an NCCL return code (use in files that include <nccl.h>).
#define DPT_NCCL_CHECK(call)                                               \
  do {                                                                     \
    ncclResult_t dpt_nccl_rc_ = (call);                                    \
    DPT_CHECK(dpt_nccl_rc_ == ncclSuccess,                                 \
              #call << " failed: " << ncclGetErrorString(dpt_nccl_rc_));   \
  } while (0)
