// The NCCL entry points the probe interposes, declared with NCCL's C ABI so that the probe
// builds without CUDA headers (a CPU-only machine builds and tests it against a fake
// libnccl). Built with -DSF_PROBE_REAL_NCCL_H (the CUDA build, see BUILD.bazel) this header
// includes the real <nccl.h> instead, and the compiler checks that every definition in
// nccl_interpose.cc matches NCCL's own declaration.
//
//   ncclResult_t r = ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, comm, stream);
#ifndef STAGEFRONTIER_CLIENT_PROBE_NCCL_API_H_
#define STAGEFRONTIER_CLIENT_PROBE_NCCL_API_H_

#include <cstddef>

#ifdef SF_PROBE_REAL_NCCL_H
#include <nccl.h>
#else
extern "C" {
typedef struct ncclComm* ncclComm_t;
typedef struct CUstream_st* cudaStream_t;
// Enumerations are passed as int by the C ABI; only the values the probe reads are named.
// Each ends with a sentinel as large as NCCL's own (ncclMaxRedOp is 0x7fffffff), so that
// every value NCCL may pass (ncclMax, a user-defined reduction, a newer data type) is a
// valid value of the type here too.
typedef enum {
  ncclSuccess = 0,
  ncclInternalError = 3,
  ncclResultSentinel_ = 0x7fffffff
} ncclResult_t;
typedef enum {
  ncclInt8 = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclFloat32 = 7,
  ncclFloat64 = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclDataTypeSentinel_ = 0x7fffffff
} ncclDataType_t;
typedef enum { ncclSum = 0, ncclRedOpSentinel_ = 0x7fffffff } ncclRedOp_t;

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclGroupStart();
ncclResult_t ncclGroupEnd();
}
#endif

namespace stagefrontier::probe {

// Bytes per element of an NCCL data type; 0 for a type this build does not know (the
// interval is still recorded, with 0 bytes).
inline size_t NcclTypeBytes(int datatype) {
  switch (datatype) {
    case 0:
    case 1:
    case 10:
    case 11:
      return 1;  // int8, uint8, fp8 e4m3, fp8 e5m2
    case 6:
    case 9:
      return 2;  // float16, bfloat16
    case 2:
    case 3:
    case 7:
      return 4;  // int32, uint32, float32
    case 4:
    case 5:
    case 8:
      return 8;  // int64, uint64, float64
    default:
      return 0;
  }
}

}  // namespace stagefrontier::probe

#endif  // STAGEFRONTIER_CLIENT_PROBE_NCCL_API_H_
