// A stub CUDA runtime (libcudart.so.12 or libcudart.so.13, by STUB_RUNTIME_VERSION) for
// measuring the CPU cost of calls into CUDA, built by the bench's build script
// (bench/cpu/build.rs) into target/. Like the stub driver (cuda_stub.c) it is honest about what
// it does: cudaLaunchHostFunc calls the host function at once, on the calling thread, and counts
// the call; every entry point counts its calls (hostcb_stub_rt_count), and the bench checks them.
// cudaStreamQuery returns cudaErrorNotReady on a stream marked busy with
// hostcb_stub_rt_set_pending (the stub's own control, not a CUDA function).
#include <stdlib.h>

#define EXPORT __attribute__((visibility("default")))

#ifndef STUB_RUNTIME_VERSION
#error "define STUB_RUNTIME_VERSION (e.g. 13000)"
#endif

typedef int cudaError_t;
typedef void (*cudaHostFn_t)(void *);

enum {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
};

enum {
  COUNT_HOST_CALLS,       // host functions called
  COUNT_LAUNCH_HOST_FUNC, // cudaLaunchHostFunc calls that succeeded
  COUNT_STREAM_QUERIES,   // cudaStreamQuery calls
  COUNT_FAILED,           // calls that returned an error
  COUNT_LEN
};
static unsigned long long counts[COUNT_LEN];

EXPORT unsigned long long hostcb_stub_rt_count(int what) {
  return what >= 0 && what < COUNT_LEN ? counts[what] : ~0ull;
}

struct stream { int pending; };
static struct stream legacy_stream;
static struct stream *stream_of(void *s) { return s ? (struct stream *)s : &legacy_stream; }

static cudaError_t fail(cudaError_t code) {
  counts[COUNT_FAILED]++;
  return code;
}

EXPORT cudaError_t cudaRuntimeGetVersion(int *version) {
  if (!version) return fail(cudaErrorInvalidValue);
  *version = STUB_RUNTIME_VERSION;
  return cudaSuccess;
}

EXPORT cudaError_t cudaDriverGetVersion(int *version) {
  if (!version) return fail(cudaErrorInvalidValue);
  *version = 13000;
  return cudaSuccess;
}

EXPORT cudaError_t cudaStreamCreate(void **stream) {
  if (!stream) return fail(cudaErrorInvalidValue);
  *stream = calloc(1, sizeof(struct stream));
  return *stream ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

EXPORT cudaError_t cudaStreamDestroy(void *stream) {
  if (!stream) return fail(cudaErrorInvalidResourceHandle);
  free(stream);
  return cudaSuccess;
}

EXPORT cudaError_t cudaStreamSynchronize(void *stream) {
  (void)stream;
  return cudaSuccess;
}

EXPORT cudaError_t cudaStreamQuery(void *stream) {
  counts[COUNT_STREAM_QUERIES]++;
  return stream_of(stream)->pending ? fail(cudaErrorNotReady) : cudaSuccess;
}

EXPORT void hostcb_stub_rt_set_pending(void *stream, int pending) {
  stream_of(stream)->pending = pending;
}

EXPORT cudaError_t cudaLaunchHostFunc(void *stream, cudaHostFn_t fn, void *data) {
  (void)stream;
  if (!fn) return fail(cudaErrorInvalidValue);
  counts[COUNT_HOST_CALLS]++;
  fn(data);
  counts[COUNT_LAUNCH_HOST_FUNC]++;
  return cudaSuccess;
}

EXPORT const char *cudaGetErrorName(cudaError_t code) {
  switch (code) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    default: return "cudaErrorUnknown";
  }
}

EXPORT const char *cudaGetErrorString(cudaError_t code) {
  switch (code) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    default: return "unknown error";
  }
}
