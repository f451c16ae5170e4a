// The C side of the CPU bench (bench/cpu/benches/cpu), linked into the bench executable: what a C
// program calling CUDA directly does, one call per function, for comparison with the Rust
// paths; and the callgrind client requests that delimit each measured path.
//
// Every measured path is one function named hostcb_one_<path>, called once per iteration by the
// bench. Under callgrind the bench collects only inside functions of that name
// (--collect-atstart=no --toggle-collect=hostcb_one_*), and cref_cg_dump(name) writes the
// instructions counted since the previous dump, so a dump holds exactly N calls of one path.
#include <dlfcn.h>
#include <stdlib.h>

#ifdef HOSTCB_HAVE_VALGRIND
#include <valgrind/callgrind.h>
#endif

typedef int (*launch_fn)(void *, void (*)(void *), void *);
typedef int (*stream_fn)(void *);
typedef int (*is_capturing_fn)(void *, int *);
typedef int (*graph_launch_fn)(void *, void *);
typedef int (*proc_address_fn)(const char *, void **, int, unsigned long long, int *);

// The pointers a C program keeps after resolving them once through cuGetProcAddress.
static launch_fn p_launch;
static is_capturing_fn p_is_capturing;
static graph_launch_fn p_graph_launch;
static stream_fn p_query;
static launch_fn p_rt_launch[2];  // [0]: CUDA 12 runtime, [1]: CUDA 13

// The handles the paths use, set by the bench.
static void *c_stream, *c_capture_stream, *c_query_stream, *c_exec;
void cref_set_handles(void *stream, void *capture_stream, void *query_stream, void *exec) {
  c_stream = stream;
  c_capture_stream = capture_stream;
  c_query_stream = query_stream;
  c_exec = exec;
}

// The host function every raw path passes: it counts its calls.
static unsigned long long calls;
void cref_cb(void *data) {
  (void)data;
  calls++;
}
unsigned long long cref_calls(void) { return calls; }

// The C twin of a boxed closure: a heap record the host function uses, then frees.
struct boxed { unsigned long long *counter; };
static unsigned long long boxed_calls;
static void boxed_cb(void *data) {
  struct boxed *b = data;
  (*b->counter)++;
  free(b);
}
unsigned long long cref_boxed_calls(void) { return boxed_calls; }

static int resolve(proc_address_fn get, const char *name, int version, void **out) {
  int status = -1;
  int rc = get(name, out, version, 1 /* CU_GET_PROC_ADDRESS_LEGACY_STREAM */, &status);
  return rc != 0 ? rc : status != 0 || !*out ? -1 : 0;
}

static int open_driver(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return -1;
  proc_address_fn get = (proc_address_fn)dlsym(lib, "cuGetProcAddress_v2");
  if (!get) return -2;
  int rc = resolve(get, "cuLaunchHostFunc", 10000, (void **)&p_launch);
  if (!rc) rc = resolve(get, "cuStreamIsCapturing", 10000, (void **)&p_is_capturing);
  if (!rc) rc = resolve(get, "cuGraphLaunch", 10000, (void **)&p_graph_launch);
  if (!rc) rc = resolve(get, "cuStreamQuery", 2000, (void **)&p_query);
  return rc;
}

// Opens the driver and both runtimes and resolves what the paths call; 0 on success.
int cref_open(void) {
  int rc = open_driver();
  if (rc) return rc;
  const char *names[2] = {"libcudart.so.12", "libcudart.so.13"};
  for (int i = 0; i < 2; i++) {
    void *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib) return -10 - i;
    p_rt_launch[i] = (launch_fn)dlsym(lib, "cudaLaunchHostFunc");
    if (!p_rt_launch[i]) return -20 - i;
  }
  return 0;
}

// ---- the measured paths ---------------------------------------------------------------------

// First call in a fresh process: open the driver, resolve, launch.
int hostcb_one_c_first(void) {
  int rc = open_driver();
  return rc ? rc : p_launch(c_stream, cref_cb, NULL);
}

// cuLaunchHostFunc through the pointer cuGetProcAddress returned.
int hostcb_one_c_launch(void) { return p_launch(c_stream, cref_cb, NULL); }

// cudaLaunchHostFunc of each runtime, through the pointer dlsym returned.
int hostcb_one_c_rt12_launch(void) { return p_rt_launch[0](NULL, cref_cb, NULL); }
int hostcb_one_c_rt13_launch(void) { return p_rt_launch[1](NULL, cref_cb, NULL); }

// The same calls with the status checked where they are made, as a caller that goes on only on
// success does: 0 on success, 1 on any failure.
int hostcb_one_c_launch_checked(void) {
  if (p_launch(c_stream, cref_cb, NULL) != 0) return 1;
  return 0;
}
int hostcb_one_c_rt13_launch_checked(void) {
  if (p_rt_launch[1](NULL, cref_cb, NULL) != 0) return 1;
  return 0;
}

// What the safe Stream::launch does, in C: refuse a capturing stream, box the state, launch a
// host function that uses the box and frees it (or free it here if the launch fails).
int hostcb_one_c_boxed_launch(void) {
  int status = 0;
  int rc = p_is_capturing(c_stream, &status);
  if (rc) return rc;
  if (status != 0) return -1;
  struct boxed *b = malloc(sizeof *b);
  if (!b) return -2;
  b->counter = &boxed_calls;
  rc = p_launch(c_stream, boxed_cb, b);
  if (rc) free(b);
  return rc;
}

// cuGraphLaunch of an executable graph.
int hostcb_one_c_graph_launch(void) { return p_graph_launch(c_exec, c_stream); }

// cuLaunchHostFunc into a capturing stream: the call is recorded, not run.
int hostcb_one_c_captured(void) { return p_launch(c_capture_stream, cref_cb, NULL); }

// cuStreamQuery: success on an idle stream, CUDA_ERROR_NOT_READY on a busy one.
int hostcb_one_c_query(void) { return p_query(c_query_stream); }

// ---- callgrind ------------------------------------------------------------------------------

// Whether the process runs under valgrind; -1 when this file was built without valgrind.h.
int cref_on_valgrind(void) {
#ifdef HOSTCB_HAVE_VALGRIND
  return (int)RUNNING_ON_VALGRIND;
#else
  return -1;
#endif
}

// Dumps (and zeroes) callgrind's counters, naming the dump `name`.
void cref_cg_dump(const char *name) {
#ifdef HOSTCB_HAVE_VALGRIND
  CALLGRIND_DUMP_STATS_AT(name);
#else
  (void)name;
#endif
}
