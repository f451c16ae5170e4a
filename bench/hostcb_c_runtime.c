// Peer baseline: host callbacks through the CUDA runtime API called directly from C. It mirrors
// hostcb_c.c (the driver-API reference) step for step: the same warm-ups, counts, clock and
// output, with the runtime's calls in place of the driver's and the prefix "crt".
// Build: nvcc -O2 --cudart shared -o hostcb_c_runtime hostcb_c_runtime.c -lcudart
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#define CK(x) do { cudaError_t r = (x); if (r != cudaSuccess) { fprintf(stderr, "%s:%d %s -> %s\n", __FILE__, __LINE__, #x, cudaGetErrorName(r)); exit(1);} } while (0)
static volatile long counter = 0;
static void CUDART_CB cb(void* p) { (void)p; counter++; }
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 100000;
  CK(cudaSetDevice(0));
  int rt; CK(cudaRuntimeGetVersion(&rt));
  cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  // B1: stream launches
  for (int i = 0; i < 1000; i++) CK(cudaLaunchHostFunc(s, cb, NULL));
  CK(cudaStreamSynchronize(s)); counter = 0;
  double t0 = now();
  for (int i = 0; i < n; i++) CK(cudaLaunchHostFunc(s, cb, NULL));
  CK(cudaStreamSynchronize(s));
  double t1 = now();
  if (counter != n) { fprintf(stderr, "B1 count %ld != %d\n", counter, n); return 1; }
  printf("crt runtime=%d B1_stream_launch_us=%.3f\n", rt, (t1 - t0) / n * 1e6);
  // B2: captured graph with one host node, replayed
  cudaGraph_t g; cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  CK(cudaLaunchHostFunc(s, cb, NULL));
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  int m = n / 10;
  for (int i = 0; i < 100; i++) CK(cudaGraphLaunch(ge, s));
  CK(cudaStreamSynchronize(s)); counter = 0;
  t0 = now();
  for (int i = 0; i < m; i++) CK(cudaGraphLaunch(ge, s));
  CK(cudaStreamSynchronize(s));
  t1 = now();
  if (counter != m) { fprintf(stderr, "B2 count %ld != %d\n", counter, m); return 1; }
  printf("crt B2_graph_replay_us=%.3f\n", (t1 - t0) / m * 1e6);
  // B3: graph of 64 chained host nodes, replayed
  cudaGraph_t g3; CK(cudaGraphCreate(&g3, 0)); cudaGraphNode_t prev = NULL;
  struct cudaHostNodeParams hp = { cb, NULL };
  for (int i = 0; i < 64; i++) { cudaGraphNode_t nd; CK(cudaGraphAddHostNode(&nd, g3, prev ? &prev : NULL, prev ? 1 : 0, &hp)); prev = nd; }
  cudaGraphExec_t ge3; CK(cudaGraphInstantiate(&ge3, g3, 0));
  int m3 = m / 64 + 1;
  CK(cudaGraphLaunch(ge3, s)); CK(cudaStreamSynchronize(s)); counter = 0;
  t0 = now();
  for (int i = 0; i < m3; i++) CK(cudaGraphLaunch(ge3, s));
  CK(cudaStreamSynchronize(s));
  t1 = now();
  if (counter != (long)m3 * 64) { fprintf(stderr, "B3 count %ld\n", counter); return 1; }
  printf("crt B3_chain64_node_us=%.3f\n", (t1 - t0) / (m3 * 64.0) * 1e6);
  return 0;
}
