// A stub CUDA driver (libcuda.so.1) for measuring the CPU cost of calls into CUDA, built by the
// bench's build script (bench/cpu/build.rs) into target/; never a test double for behaviour.
//
// It is honest about what it does: cuLaunchHostFunc on a stream that is not capturing calls the
// host function at once, on the calling thread, and counts the call (cuStreamAddCallback calls
// its callback the same way, with CUDA_SUCCESS, and is refused on a capturing stream, as CUDA
// refuses it); on a capturing stream it
// records the function as a node of the graph being captured; cuGraphLaunch calls every host node
// of the executable once, in order, and counts each call. User objects are reference counted and
// their destructors run (and are counted) when the last reference goes: when a graph or an
// executable that holds them is destroyed. Every entry point counts its calls
// (hostcb_stub_count), and the bench checks these counts against the work it asked for.
//
// cuGetProcAddress / cuGetProcAddress_v2 return the stub's own functions from one table of
// (name, ABI version, function); a version newer than the stub's driver version (13.0) is refused
// with CUDA_ERROR_INVALID_VALUE and an unknown name gives CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND,
// as the real 13.0 driver does. The same functions are exported under their ABI names, for
// loaders that resolve with dlsym.
//
// cuLaunchHostFunc_v2 (ABI 13010, a sync mode) is there for a driver version raised with
// hostcb_stub_set_driver_version(13010) (the stub's own control): it calls the function at once,
// as cuLaunchHostFunc does, except in a failed context, where it calls nothing (as the real
// driver skips host functions then); its callers' guards are stream callbacks.
//
// A simulated driver version: hostcb_stub_use_table(path) makes cuGetProcAddress answer from a
// table instead, the `PFN_<name>_v<version>[_ptsz|_ptds]` typedefs of one version's
// cudaTypedefs.h, and cuDriverGetVersion give that version (the file's format is above
// hostcb_stub_use_table). It answers as the real driver does: a version newer than the driver
// is refused with CUDA_ERROR_INVALID_VALUE, an unknown name gives SYMBOL_NOT_FOUND, a name whose
// every ABI is newer than the version asked for gives VERSION_NOT_SUFFICIENT, and otherwise the
// newest ABI at or below that version comes back (under CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_
// STREAM its _ptsz/_ptds twin where that ABI version has one). What comes back is the stub's own
// function where it implements that name and ABI version, else one generic function that counts
// its calls (COUNT_NOT_IMPLEMENTED) and returns STUB_NOT_IMPLEMENTED, a status no CUDA version
// defines. hostcb_stub_last_proc tells which row the last call answered with.
//
// A failed context: hostcb_stub_fail_context(code) makes the stub act as a context that hit a
// device error (a kernel that trapped) with stream callbacks still queued: cuStreamAddCallback
// calls its callback with that code instead of success (as the real driver does), and
// cuStreamSynchronize and cuCtxSynchronize return the code. hostcb_stub_fail_context(0) makes
// it healthy again. Nothing else changes (cuLaunchHostFunc and cuGraphLaunch still call their
// functions), so that the measured paths cost what they did.
//
// Streams with pending work: the real driver's cuStreamQuery returns CUDA_ERROR_NOT_READY while
// work is queued. The stub runs everything at once, so a bench marks a stream as busy with
// hostcb_stub_set_pending(stream, 1) to measure the failing polling call.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void (*CUhostFn)(void *);
typedef void (*CUstreamCallback)(void *stream, CUresult status, void *data);

enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_ILLEGAL_STATE = 401,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_LAUNCH_FAILED = 719,
  CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
  CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
  CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD = 908,
  CUDA_ERROR_NOT_SUPPORTED = 801,
  CUDA_ERROR_UNKNOWN = 999,
};

#define STUB_DRIVER_VERSION 13000

// What the stub counts; the indices are hostcb_stub_count's argument (the CPU bench's stub.rs,
// bench/cpu/benches/cpu/stub.rs, mirrors them).
enum {
  COUNT_HOST_CALLS,      // host functions called (stream launches and graph launches)
  COUNT_LAUNCH_HOST_FUNC, // cuLaunchHostFunc calls that succeeded
  COUNT_CAPTURED_NODES,  // host functions recorded into a capturing stream's graph
  COUNT_GRAPH_LAUNCHES,  // cuGraphLaunch calls that succeeded
  COUNT_STREAM_QUERIES,  // cuStreamQuery calls
  COUNT_IS_CAPTURING,    // cuStreamIsCapturing calls
  COUNT_CAPTURE_INFO,    // cuStreamGetCaptureInfo calls
  COUNT_USER_OBJECTS,    // user objects created
  COUNT_USER_OBJECT_DESTROYS, // user-object destructors run
  COUNT_PROC_ADDRESS,    // cuGetProcAddress(_v2) calls
  COUNT_FAILED,          // calls that returned an error
  COUNT_ADD_CALLBACK,    // cuStreamAddCallback calls that succeeded (their callbacks called)
  COUNT_NOT_IMPLEMENTED, // calls of the generic function (see hostcb_stub_use_table)
  COUNT_STREAM_SYNCS,    // cuStreamSynchronize calls
  COUNT_EVENT_RECORDS,   // cuEventRecord calls that succeeded
  COUNT_EVENT_QUERIES,   // cuEventQuery calls
  COUNT_STREAM_DESTROYS, // cuStreamDestroy calls
  // streams and events destroyed after the release of the primary context they were made in
  // (its last cuDevicePrimaryCtxRelease): the real driver may crash there
  COUNT_DESTROYED_AFTER_RELEASE,
  COUNT_LEN
};
static unsigned long long counts[COUNT_LEN];

EXPORT unsigned long long hostcb_stub_count(int what) {
  return what >= 0 && what < COUNT_LEN ? counts[what] : ~0ull;
}

static CUresult fail(CUresult code) {
  counts[COUNT_FAILED]++;
  return code;
}

// ---- objects --------------------------------------------------------------------------------

struct node { CUhostFn fn; void *data; };

struct user_object {
  void *ptr;
  CUhostFn destroy;
  unsigned refs;
  struct user_object *next_free;
};

struct owned { struct user_object *object; unsigned count; };

struct graph {
  struct node *nodes;
  size_t n_nodes, cap_nodes;
  struct owned *objects;
  size_t n_objects, cap_objects;
};

struct exec {
  struct node *nodes;
  size_t n_nodes;
  struct owned *objects;
  size_t n_objects;
};

struct stream {
  unsigned long long life;  // the primary context's life it was made in (see struct context)
  int capturing;  // 0 none, 1 active, 2 invalidated
  unsigned long long capture_id;
  struct graph *capture;
  int pending;
};

// `life` counts the primary context's lives: each release of its last retain ends one, and a
// stream or event made in one life and destroyed in another is counted
// (COUNT_DESTROYED_AFTER_RELEASE).
struct context { int device; unsigned retains; unsigned long long life; };

static int initialized;
static CUresult failed_context;  // 0, or the error the context hit (hostcb_stub_fail_context)
static struct context primary = {0, 0, 0};

// Counts the destruction of a stream or event made in the primary context's life `life`, made
// after that life ended.
static void check_life(unsigned long long life) {
  // (Atomic: the safe layer's reaper thread destroys handles beside the program's thread.)
  if (life != primary.life || primary.retains == 0)
    __atomic_fetch_add(&counts[COUNT_DESTROYED_AFTER_RELEASE], 1, __ATOMIC_SEQ_CST);
}
static struct stream legacy_stream;
static __thread struct context *ctx_stack[16];
static __thread int ctx_depth;  // ctx_stack[ctx_depth - 1] is current; 0 means none
static unsigned long long next_capture_id = 1;

static struct stream *stream_of(void *s) { return s ? (struct stream *)s : &legacy_stream; }

static int grow(void **items, size_t *cap, size_t need, size_t size) {
  if (need <= *cap) return 1;
  size_t cap2 = *cap ? *cap * 2 : 16;
  while (cap2 < need) cap2 *= 2;
  void *p = realloc(*items, cap2 * size);
  if (!p) return 0;
  *items = p;
  *cap = cap2;
  return 1;
}

// User objects come from a free list refilled in blocks, as a driver's own pools would; their
// cost is not what the bench measures.
static struct user_object *free_objects;

static struct user_object *object_alloc(void) {
  if (!free_objects) {
    struct user_object *block = calloc(1024, sizeof *block);
    if (!block) return NULL;
    for (int i = 0; i < 1024; i++) {
      block[i].next_free = free_objects;
      free_objects = &block[i];
    }
  }
  struct user_object *o = free_objects;
  free_objects = o->next_free;
  return o;
}

static void object_release(struct user_object *o, unsigned count) {
  if (count == 0) return;  // a holder that released its references already
  if (count >= o->refs) {
    o->refs = 0;
    if (o->destroy) o->destroy(o->ptr);
    counts[COUNT_USER_OBJECT_DESTROYS]++;
    o->next_free = free_objects;
    free_objects = o;
  } else {
    o->refs -= count;
  }
}

static void graph_free(struct graph *g) {
  for (size_t i = 0; i < g->n_objects; i++) object_release(g->objects[i].object, g->objects[i].count);
  free(g->objects);
  free(g->nodes);
  free(g);
}

static CUresult graph_add_node(struct graph *g, CUhostFn fn, void *data) {
  if (!grow((void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof *g->nodes))
    return fail(CUDA_ERROR_OUT_OF_MEMORY);
  g->nodes[g->n_nodes].fn = fn;
  g->nodes[g->n_nodes].data = data;
  g->n_nodes++;
  return CUDA_SUCCESS;
}

static CUresult graph_hold(struct graph *g, struct user_object *o, unsigned count) {
  if (!grow((void **)&g->objects, &g->cap_objects, g->n_objects + 1, sizeof *g->objects))
    return fail(CUDA_ERROR_OUT_OF_MEMORY);
  g->objects[g->n_objects].object = o;
  g->objects[g->n_objects].count = count;
  g->n_objects++;
  return CUDA_SUCCESS;
}

// ---- initialisation, devices, contexts ------------------------------------------------------

EXPORT CUresult cuInit(unsigned flags) {
  if (flags != 0) return fail(CUDA_ERROR_INVALID_VALUE);
  initialized = 1;
  return CUDA_SUCCESS;
}

static int driver_version = STUB_DRIVER_VERSION;

// The stub's own control, not a CUDA function: the version cuDriverGetVersion gives and
// cuGetProcAddress resolves up to (see cuLaunchHostFunc_v2).
EXPORT void hostcb_stub_set_driver_version(int version) { driver_version = version; }

EXPORT CUresult cuDriverGetVersion(int *version) {
  if (!version) return fail(CUDA_ERROR_INVALID_VALUE);
  *version = driver_version;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetCount(int *count) {
  if (!initialized) return fail(CUDA_ERROR_NOT_INITIALIZED);
  if (!count) return fail(CUDA_ERROR_INVALID_VALUE);
  *count = 1;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  if (!initialized) return fail(CUDA_ERROR_NOT_INITIALIZED);
  if (ordinal != 0) return fail(CUDA_ERROR_INVALID_DEVICE);
  *device = 0;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice device) {
  if (device != 0) return fail(CUDA_ERROR_INVALID_DEVICE);
  if (!name || len < 1) return fail(CUDA_ERROR_INVALID_VALUE);
  strncpy(name, "hostcb stub device", (size_t)len - 1);
  name[len - 1] = 0;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(void **ctx, CUdevice device) {
  if (!initialized) return fail(CUDA_ERROR_NOT_INITIALIZED);
  if (device != 0) return fail(CUDA_ERROR_INVALID_DEVICE);
  primary.retains++;
  *ctx = &primary;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  if (device != 0) return fail(CUDA_ERROR_INVALID_DEVICE);
  if (primary.retains == 0) return fail(CUDA_ERROR_INVALID_CONTEXT);
  if (--primary.retains == 0) primary.life++;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetCurrent(void *ctx) {
  if (ctx && ctx != &primary) return fail(CUDA_ERROR_INVALID_CONTEXT);
  if (!ctx) {
    ctx_depth = 0;
  } else if (ctx_depth == 0) {
    ctx_stack[ctx_depth++] = ctx;
  } else {
    ctx_stack[ctx_depth - 1] = ctx;
  }
  return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetCurrent(void **ctx) {
  *ctx = ctx_depth ? ctx_stack[ctx_depth - 1] : NULL;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPushCurrent_v2(void *ctx) {
  if (ctx != &primary) return fail(CUDA_ERROR_INVALID_CONTEXT);
  if (ctx_depth == 16) return fail(CUDA_ERROR_OUT_OF_MEMORY);
  ctx_stack[ctx_depth++] = ctx;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPopCurrent_v2(void **ctx) {
  if (ctx_depth == 0) return fail(CUDA_ERROR_INVALID_CONTEXT);
  ctx_depth--;
  if (ctx) *ctx = ctx_stack[ctx_depth];
  return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSynchronize(void) {
  if (failed_context) return fail(failed_context);
  return ctx_depth ? CUDA_SUCCESS : fail(CUDA_ERROR_INVALID_CONTEXT);
}

// The stub's own control, not a CUDA function: see "A failed context" above.
EXPORT void hostcb_stub_fail_context(int code) { failed_context = code; }

// ---- streams --------------------------------------------------------------------------------

EXPORT CUresult cuStreamCreate(void **stream, unsigned flags) {
  (void)flags;
  if (!ctx_depth) return fail(CUDA_ERROR_INVALID_CONTEXT);
  struct stream *s = calloc(1, sizeof *s);
  if (!s) return fail(CUDA_ERROR_OUT_OF_MEMORY);
  s->life = primary.life;
  *stream = s;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamDestroy_v2(void *stream) {
  if (!stream) return fail(CUDA_ERROR_INVALID_HANDLE);
  struct stream *s = stream;
  __atomic_fetch_add(&counts[COUNT_STREAM_DESTROYS], 1, __ATOMIC_SEQ_CST);
  check_life(s->life);
  if (s->capture) graph_free(s->capture);
  free(s);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamSynchronize(void *stream) {
  counts[COUNT_STREAM_SYNCS]++;
  struct stream *s = stream_of(stream);
  if (s->capturing) return fail(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  if (failed_context) return fail(failed_context);
  return CUDA_SUCCESS;
}

// Events, as the completion future uses them: the stub runs work at once, so a recorded event
// is done when it is recorded; in a failed context querying or waiting on one returns the
// context's error, as the real driver's sticky error does.
struct event {
  unsigned long long life;  // as a stream's
  int recorded;
};

EXPORT CUresult cuEventCreate(void **event, unsigned int flags) {
  (void)flags;
  struct event *e = calloc(1, sizeof *e);
  if (!e) return fail(CUDA_ERROR_OUT_OF_MEMORY);
  e->life = primary.life;
  *event = e;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuEventRecord(void *event, void *stream) {
  struct stream *s = stream_of(stream);
  if (s->capturing) return fail(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  ((struct event *)event)->recorded = 1;
  counts[COUNT_EVENT_RECORDS]++;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuEventQuery(void *event) {
  (void)event;
  counts[COUNT_EVENT_QUERIES]++;
  if (failed_context) return fail(failed_context);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuEventSynchronize(void *event) {
  return cuEventQuery(event);
}

EXPORT CUresult cuEventDestroy_v2(void *event) {
  check_life(((struct event *)event)->life);
  free(event);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamQuery(void *stream) {
  struct stream *s = stream_of(stream);
  counts[COUNT_STREAM_QUERIES]++;
  if (s->capturing) return fail(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  if (s->pending) return fail(CUDA_ERROR_NOT_READY);
  return CUDA_SUCCESS;
}

// Marks a stream as having (or not having) pending work, so that cuStreamQuery returns
// CUDA_ERROR_NOT_READY: the stub's own control, not a CUDA function.
EXPORT void hostcb_stub_set_pending(void *stream, int pending) { stream_of(stream)->pending = pending; }

EXPORT CUresult cuLaunchHostFunc(void *stream, CUhostFn fn, void *data) {
  if (!fn) return fail(CUDA_ERROR_INVALID_VALUE);
  struct stream *s = stream_of(stream);
  if (s->capturing == 1) {
    CUresult rc = graph_add_node(s->capture, fn, data);
    if (rc) return rc;
    counts[COUNT_CAPTURED_NODES]++;
  } else if (s->capturing) {
    return fail(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  } else {
    counts[COUNT_HOST_CALLS]++;
    fn(data);
  }
  counts[COUNT_LAUNCH_HOST_FUNC]++;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuLaunchHostFunc_v2(void *stream, CUhostFn fn, void *data, unsigned sync_mode) {
  if (!fn || sync_mode > 1) return fail(CUDA_ERROR_INVALID_VALUE);
  struct stream *s = stream_of(stream);
  if (s->capturing) return fail(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  if (!failed_context) {
    counts[COUNT_HOST_CALLS]++;
    fn(data);
  }
  return CUDA_SUCCESS;
}

// Stream callbacks cannot be captured (CUDA returns CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and
// invalidates the capture); flags are reserved and must be 0.
EXPORT CUresult cuStreamAddCallback(void *stream, CUstreamCallback callback, void *data,
                                    unsigned flags) {
  if (!callback || flags != 0) return fail(CUDA_ERROR_INVALID_VALUE);
  struct stream *s = stream_of(stream);
  if (s->capturing) {
    s->capturing = 2;
    return fail(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  }
  counts[COUNT_HOST_CALLS]++;  // made, with success or with the failed context's error
  callback(stream, failed_context, data);
  counts[COUNT_ADD_CALLBACK]++;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamBeginCapture_v2(void *stream, int mode) {
  if (!stream) return fail(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  if (mode < 0 || mode > 2) return fail(CUDA_ERROR_INVALID_VALUE);
  struct stream *s = stream;
  if (s->capturing) return fail(CUDA_ERROR_ILLEGAL_STATE);
  s->capture = calloc(1, sizeof *s->capture);
  if (!s->capture) return fail(CUDA_ERROR_OUT_OF_MEMORY);
  s->capturing = 1;
  s->capture_id = next_capture_id++;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamEndCapture(void *stream, void **graph) {
  if (!stream || !graph) return fail(CUDA_ERROR_INVALID_VALUE);
  struct stream *s = stream;
  if (!s->capturing) return fail(CUDA_ERROR_ILLEGAL_STATE);
  int invalidated = s->capturing != 1;
  s->capturing = 0;
  if (invalidated) {
    graph_free(s->capture);
    s->capture = NULL;
    *graph = NULL;
    return fail(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  }
  *graph = s->capture;
  s->capture = NULL;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamIsCapturing(void *stream, int *status) {
  counts[COUNT_IS_CAPTURING]++;
  if (!status) return fail(CUDA_ERROR_INVALID_VALUE);
  *status = stream_of(stream)->capturing;
  return CUDA_SUCCESS;
}

static CUresult capture_info(void *stream, int *status, unsigned long long *id, void **graph,
                             const void **deps, size_t *n_deps) {
  counts[COUNT_CAPTURE_INFO]++;
  if (!status) return fail(CUDA_ERROR_INVALID_VALUE);
  struct stream *s = stream_of(stream);
  *status = s->capturing;
  if (s->capturing) {
    if (id) *id = s->capture_id;
    if (graph) *graph = s->capture;
    if (deps) *deps = NULL;
    if (n_deps) *n_deps = 0;
  }
  return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamGetCaptureInfo_v2(void *stream, int *status, unsigned long long *id,
                                          void **graph, const void **deps, size_t *n_deps) {
  return capture_info(stream, status, id, graph, deps, n_deps);
}

EXPORT CUresult cuStreamGetCaptureInfo_v3(void *stream, int *status, unsigned long long *id,
                                          void **graph, const void **deps, const void **edges,
                                          size_t *n_deps) {
  if (edges) *edges = NULL;
  return capture_info(stream, status, id, graph, deps, n_deps);
}

EXPORT CUresult cuThreadExchangeStreamCaptureMode(int *mode) {
  if (!mode) return fail(CUDA_ERROR_INVALID_VALUE);
  return CUDA_SUCCESS;
}

// ---- graphs, executables, user objects ------------------------------------------------------

EXPORT CUresult cuGraphCreate(void **graph, unsigned flags) {
  if (flags != 0 || !graph) return fail(CUDA_ERROR_INVALID_VALUE);
  *graph = calloc(1, sizeof(struct graph));
  return *graph ? CUDA_SUCCESS : fail(CUDA_ERROR_OUT_OF_MEMORY);
}

EXPORT CUresult cuGraphDestroy(void *graph) {
  if (!graph) return fail(CUDA_ERROR_INVALID_VALUE);
  graph_free(graph);
  return CUDA_SUCCESS;
}

struct host_node_params { CUhostFn fn; void *data; };

// The last host node's parameters as the caller handed them: the entry point, and the bytes of
// its CUDA_HOST_NODE_PARAMS (16) or, inside a CUgraphNodeParams, of its CUDA_HOST_NODE_PARAMS_v2
// (32: the widest any header declares, {fn, userData, syncMode, ctx}). A test compares them with
// what the simulated driver's header declares (hostcb_stub_last_host_node).
#define HOST_V2_BYTES 32
static const char *last_host_entry = "";
static unsigned char last_host_bytes[HOST_V2_BYTES];
static int last_host_len;

static void record_host(const char *entry, const void *bytes, int len) {
  last_host_entry = entry;
  memset(last_host_bytes, 0, sizeof last_host_bytes);
  memcpy(last_host_bytes, bytes, (size_t)len);
  last_host_len = len;
}

// The stub's own control, not a CUDA function: the last host node's entry point and bytes.
EXPORT int hostcb_stub_last_host_node(const char **entry, const unsigned char **bytes) {
  *entry = last_host_entry;
  *bytes = last_host_bytes;
  return last_host_len;
}

// CUgraphNodeParams: the node type, 3 reserved ints, then the union (the host node's
// CUDA_HOST_NODE_PARAMS_v2 at its start).
#define CU_GRAPH_NODE_TYPE_HOST 3
struct graph_node_params { int type; int reserved0[3]; unsigned char params[232]; long long reserved2; };

EXPORT CUresult cuGraphAddHostNode(void **node, void *graph, const void *deps, size_t n_deps,
                                   const struct host_node_params *params) {
  (void)deps;
  (void)n_deps;
  if (!node || !graph || !params || !params->fn) return fail(CUDA_ERROR_INVALID_VALUE);
  record_host("cuGraphAddHostNode", params, (int)sizeof *params);
  struct graph *g = graph;
  CUresult rc = graph_add_node(g, params->fn, params->data);
  if (rc) return rc;
  *node = (void *)(uintptr_t)g->n_nodes;  // a non-NULL handle; dependencies are kept in order
  return CUDA_SUCCESS;
}

// cuGraphAddNode (ABI 12030): host nodes only, recorded.
EXPORT CUresult cuGraphAddNode_v2(void **node, void *graph, const void *deps, const void *edges,
                                  size_t n_deps, struct graph_node_params *params) {
  (void)deps;
  (void)edges;
  (void)n_deps;
  if (!node || !graph || !params || params->type != CU_GRAPH_NODE_TYPE_HOST)
    return fail(CUDA_ERROR_INVALID_VALUE);
  record_host("cuGraphAddNode", params->params, HOST_V2_BYTES);
  struct host_node_params host;
  memcpy(&host, params->params, sizeof host);
  if (!host.fn) return fail(CUDA_ERROR_INVALID_VALUE);
  struct graph *g = graph;
  CUresult rc = graph_add_node(g, host.fn, host.data);
  if (rc) return rc;
  *node = (void *)(uintptr_t)g->n_nodes;
  return CUDA_SUCCESS;
}

// An executable's host node `node` (a handle of cuGraphAddHostNode: its index plus one) calls
// `fn(data)` from now on.
static CUresult exec_set_host(void *exec, void *node, CUhostFn fn, void *data) {
  struct exec *e = exec;
  size_t i = (size_t)(uintptr_t)node;
  if (!e || i == 0 || i > e->n_nodes || !fn) return fail(CUDA_ERROR_INVALID_VALUE);
  e->nodes[i - 1].fn = fn;
  e->nodes[i - 1].data = data;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphExecHostNodeSetParams(void *exec, void *node,
                                             const struct host_node_params *params) {
  if (!params) return fail(CUDA_ERROR_INVALID_VALUE);
  record_host("cuGraphExecHostNodeSetParams", params, (int)sizeof *params);
  return exec_set_host(exec, node, params->fn, params->data);
}

// cuGraphExecNodeSetParams (ABI 12020): host nodes only, recorded.
EXPORT CUresult cuGraphExecNodeSetParams(void *exec, void *node, struct graph_node_params *params) {
  if (!params || params->type != CU_GRAPH_NODE_TYPE_HOST) return fail(CUDA_ERROR_INVALID_VALUE);
  record_host("cuGraphExecNodeSetParams", params->params, HOST_V2_BYTES);
  struct host_node_params host;
  memcpy(&host, params->params, sizeof host);
  return exec_set_host(exec, node, host.fn, host.data);
}

EXPORT CUresult cuGraphGetNodes(void *graph, void **nodes, size_t *count) {
  if (!graph || !count) return fail(CUDA_ERROR_INVALID_VALUE);
  struct graph *g = graph;
  if (nodes) {
    size_t n = *count < g->n_nodes ? *count : g->n_nodes;
    for (size_t i = 0; i < n; i++) nodes[i] = (void *)(uintptr_t)(i + 1);
  }
  *count = g->n_nodes;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphInstantiateWithFlags(void **exec, void *graph, unsigned long long flags) {
  (void)flags;
  if (!exec || !graph) return fail(CUDA_ERROR_INVALID_VALUE);
  struct graph *g = graph;
  struct exec *e = calloc(1, sizeof *e);
  if (!e) return fail(CUDA_ERROR_OUT_OF_MEMORY);
  e->nodes = malloc((g->n_nodes + 1) * sizeof *e->nodes);
  e->objects = malloc((g->n_objects + 1) * sizeof *e->objects);
  if (!e->nodes || !e->objects) {
    free(e->nodes);
    free(e->objects);
    free(e);
    return fail(CUDA_ERROR_OUT_OF_MEMORY);
  }
  memcpy(e->nodes, g->nodes, g->n_nodes * sizeof *e->nodes);
  e->n_nodes = g->n_nodes;
  for (size_t i = 0; i < g->n_objects; i++) {
    e->objects[i] = g->objects[i];
    g->objects[i].object->refs += g->objects[i].count;
  }
  e->n_objects = g->n_objects;
  *exec = e;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphExecDestroy(void *exec) {
  if (!exec) return fail(CUDA_ERROR_INVALID_VALUE);
  struct exec *e = exec;
  for (size_t i = 0; i < e->n_objects; i++) object_release(e->objects[i].object, e->objects[i].count);
  free(e->objects);
  free(e->nodes);
  free(e);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphLaunch(void *exec, void *stream) {
  if (!exec) return fail(CUDA_ERROR_INVALID_VALUE);
  struct stream *s = stream_of(stream);
  if (s->capturing) return fail(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  struct exec *e = exec;
  for (size_t i = 0; i < e->n_nodes; i++) e->nodes[i].fn(e->nodes[i].data);
  counts[COUNT_HOST_CALLS] += e->n_nodes;
  counts[COUNT_GRAPH_LAUNCHES]++;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuUserObjectCreate(void **object, void *ptr, CUhostFn destroy, unsigned refs,
                                   unsigned flags) {
  if (!object || !destroy || refs == 0 || flags > 1) return fail(CUDA_ERROR_INVALID_VALUE);
  struct user_object *o = object_alloc();
  if (!o) return fail(CUDA_ERROR_OUT_OF_MEMORY);
  o->ptr = ptr;
  o->destroy = destroy;
  o->refs = refs;
  counts[COUNT_USER_OBJECTS]++;
  *object = o;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuUserObjectRetain(void *object, unsigned count) {
  if (!object || count == 0) return fail(CUDA_ERROR_INVALID_VALUE);
  ((struct user_object *)object)->refs += count;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuUserObjectRelease(void *object, unsigned count) {
  if (!object || count == 0) return fail(CUDA_ERROR_INVALID_VALUE);
  object_release(object, count);
  return CUDA_SUCCESS;
}

#define CU_GRAPH_USER_OBJECT_MOVE 1

EXPORT CUresult cuGraphReleaseUserObject(void *graph, void *object, unsigned count) {
  struct graph *g = graph;
  if (!g || !object || count == 0) return fail(CUDA_ERROR_INVALID_VALUE);
  for (size_t i = 0; i < g->n_objects; i++) {
    if (g->objects[i].object == object && g->objects[i].count >= count) {
      g->objects[i].count -= count;
      object_release(object, count);
      return CUDA_SUCCESS;
    }
  }
  return fail(CUDA_ERROR_INVALID_VALUE);
}

EXPORT CUresult cuGraphRetainUserObject(void *graph, void *object, unsigned count, unsigned flags) {
  if (!graph || !object || count == 0 || flags > 1) return fail(CUDA_ERROR_INVALID_VALUE);
  struct user_object *o = object;
  CUresult rc = graph_hold(graph, o, count);
  if (rc) return rc;
  // With MOVE the graph takes over the caller's references; otherwise it adds its own.
  if (!(flags & CU_GRAPH_USER_OBJECT_MOVE)) o->refs += count;
  return CUDA_SUCCESS;
}

// ---- error names ----------------------------------------------------------------------------

struct code_text { CUresult code; const char *name, *text; };
static const struct code_text code_texts[] = {
  {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
  {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
  {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
  {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
  {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
  {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
  {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
  {CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state"},
  {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
  {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
  {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
  {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
  {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing"},
  {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "operation failed due to a previous error during capture"},
  {CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", "attempted to end a stream capture from another thread"},
  {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static const struct code_text *code_text(CUresult code) {
  for (size_t i = 0; i < sizeof code_texts / sizeof *code_texts; i++)
    if (code_texts[i].code == code) return &code_texts[i];
  return NULL;
}

EXPORT CUresult cuGetErrorName(CUresult code, const char **name) {
  const struct code_text *t = code_text(code);
  if (!name) return CUDA_ERROR_INVALID_VALUE;
  *name = t ? t->name : NULL;
  return t ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuGetErrorString(CUresult code, const char **text) {
  const struct code_text *t = code_text(code);
  if (!text) return CUDA_ERROR_INVALID_VALUE;
  *text = t ? t->text : NULL;
  return t ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// ---- cuGetProcAddress -----------------------------------------------------------------------

struct proc { const char *name; int version; void *fn; };
#define PROC(name, version, fn) {name, version, (void *)fn}
// cuGetProcAddress_v2 is declared below; the table needs its address.
EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                    unsigned long long flags, int *status);
EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version,
                                 unsigned long long flags);
static const struct proc procs[] = {
  PROC("cuInit", 2000, cuInit),
  PROC("cuDriverGetVersion", 2020, cuDriverGetVersion),
  PROC("cuDeviceGetCount", 2000, cuDeviceGetCount),
  PROC("cuDeviceGet", 2000, cuDeviceGet),
  PROC("cuDeviceGetName", 2000, cuDeviceGetName),
  PROC("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain),
  PROC("cuDevicePrimaryCtxRelease", 11000, cuDevicePrimaryCtxRelease_v2),
  PROC("cuCtxSetCurrent", 4000, cuCtxSetCurrent),
  PROC("cuCtxGetCurrent", 4000, cuCtxGetCurrent),
  PROC("cuCtxPushCurrent", 4000, cuCtxPushCurrent_v2),
  PROC("cuCtxPopCurrent", 4000, cuCtxPopCurrent_v2),
  PROC("cuCtxSynchronize", 2000, cuCtxSynchronize),
  PROC("cuStreamCreate", 2000, cuStreamCreate),
  PROC("cuStreamDestroy", 4000, cuStreamDestroy_v2),
  PROC("cuStreamSynchronize", 2000, cuStreamSynchronize),
  PROC("cuStreamQuery", 2000, cuStreamQuery),
  PROC("cuEventCreate", 2000, cuEventCreate),
  PROC("cuEventRecord", 2000, cuEventRecord),
  PROC("cuEventQuery", 2000, cuEventQuery),
  PROC("cuEventSynchronize", 2000, cuEventSynchronize),
  PROC("cuEventDestroy", 4000, cuEventDestroy_v2),
  PROC("cuLaunchHostFunc", 10000, cuLaunchHostFunc),
  PROC("cuLaunchHostFunc", 13010, cuLaunchHostFunc_v2),
  PROC("cuStreamAddCallback", 5000, cuStreamAddCallback),
  PROC("cuStreamBeginCapture", 10010, cuStreamBeginCapture_v2),
  PROC("cuStreamEndCapture", 10000, cuStreamEndCapture),
  PROC("cuStreamIsCapturing", 10000, cuStreamIsCapturing),
  PROC("cuStreamGetCaptureInfo", 11030, cuStreamGetCaptureInfo_v2),
  PROC("cuStreamGetCaptureInfo", 12030, cuStreamGetCaptureInfo_v3),
  PROC("cuThreadExchangeStreamCaptureMode", 10010, cuThreadExchangeStreamCaptureMode),
  PROC("cuGraphCreate", 10000, cuGraphCreate),
  PROC("cuGraphDestroy", 10000, cuGraphDestroy),
  PROC("cuGraphAddHostNode", 10000, cuGraphAddHostNode),
  PROC("cuGraphGetNodes", 10000, cuGraphGetNodes),
  PROC("cuGraphInstantiateWithFlags", 11040, cuGraphInstantiateWithFlags),
  PROC("cuGraphExecDestroy", 10000, cuGraphExecDestroy),
  PROC("cuGraphLaunch", 10000, cuGraphLaunch),
  PROC("cuUserObjectCreate", 11030, cuUserObjectCreate),
  PROC("cuUserObjectRetain", 11030, cuUserObjectRetain),
  PROC("cuUserObjectRelease", 11030, cuUserObjectRelease),
  PROC("cuGraphRetainUserObject", 11030, cuGraphRetainUserObject),
  PROC("cuGraphReleaseUserObject", 11030, cuGraphReleaseUserObject),
  PROC("cuGraphAddNode", 12030, cuGraphAddNode_v2),
  PROC("cuGraphExecHostNodeSetParams", 10020, cuGraphExecHostNodeSetParams),
  PROC("cuGraphExecNodeSetParams", 12020, cuGraphExecNodeSetParams),
  PROC("cuGetErrorName", 6000, cuGetErrorName),
  PROC("cuGetErrorString", 6000, cuGetErrorString),
  PROC("cuGetProcAddress", 12000, cuGetProcAddress_v2),
  PROC("cuGetProcAddress", 11030, cuGetProcAddress),
};

// ---- a simulated driver version (hostcb_stub_use_table) ------------------------------------

// The status of the generic function: no CUDA version defines it (CUresult values are below
// 10,000).
#define STUB_NOT_IMPLEMENTED 0x57AB

// What every name the stub does not implement resolves to in table mode.
static CUresult not_implemented(void) {
  counts[COUNT_NOT_IMPLEMENTED]++;
  return STUB_NOT_IMPLEMENTED;
}

// The generic function's address and status, for a caller that wants to recognise it.
EXPORT void *hostcb_stub_not_implemented(int *status) {
  if (status) *status = STUB_NOT_IMPLEMENTED;
  return (void *)not_implemented;
}

enum { KIND_PLAIN, KIND_PTSZ, KIND_PTDS };
struct row { char *name; int version; int kind; };
static struct row *table;  // NULL: the fixed procs table above answers
static size_t n_table;
static const struct row *last_row;  // the row the last table answer came from, or NULL
static void *last_pfn;              // and the function it handed back
static char last_symbol[256];       // the last query in table mode: symbol, version, flags
static int last_version;
static unsigned long long last_flags;
static int queried;

// Makes cuGetProcAddress answer from the table in the file at `path` and cuDriverGetVersion give
// its driver version: the stub's own control, not a CUDA function. Lines: `driver <version>`
// first, then one `<name> <version>` per `PFN_<name>_v<version>` typedef and
// `<name> <version> ptsz` (or `ptds`) per `PFN_<name>_v<version>_ptsz` (`_ptds`); `#` starts a
// comment line. Returns 0, or -1 (and the table in force is kept) if the file cannot be read or
// a line is malformed; `line` (if not NULL) gets the number of the line at fault, 0 if none.
EXPORT int hostcb_stub_use_table(const char *path, int *line) {
  if (line) *line = 0;
  FILE *f = path ? fopen(path, "r") : NULL;
  if (!f) return -1;
  struct row *rows = NULL;
  size_t n = 0, cap = 0;
  int driver = -1, at = 0, ok = 1;
  char buf[512];
  while (ok && fgets(buf, sizeof buf, f)) {
    at++;
    char name[256], kind[8];
    int version;
    if (buf[0] == '#' || buf[0] == '\n') continue;
    if (driver < 0) {
      ok = sscanf(buf, "driver %d", &driver) == 1 && driver > 0;
      continue;
    }
    int got = sscanf(buf, "%255s %d %7s", name, &version, kind);
    int k = got == 2                            ? KIND_PLAIN
            : got == 3 && !strcmp(kind, "ptsz") ? KIND_PTSZ
            : got == 3 && !strcmp(kind, "ptds") ? KIND_PTDS
                                                : -1;
    // Its own growth, not grow(): another caller of that would change how the compiler
    // inlines it into the measured paths (cuLaunchHostFunc, +6 instructions).
    if (n == cap) {
      size_t cap2 = cap ? cap * 2 : 1024;
      struct row *more = realloc(rows, cap2 * sizeof *rows);
      if (!more) k = -1;
      else rows = more, cap = cap2;
    }
    if (k < 0 || version <= 0) {
      ok = 0;
      break;
    }
    rows[n].name = strdup(name);
    rows[n].version = version;
    rows[n].kind = k;
    if (!rows[n].name) ok = 0;
    n++;
  }
  fclose(f);
  if (!ok || driver < 0) {
    for (size_t i = 0; i < n; i++) free(rows[i].name);
    free(rows);
    if (line) *line = at;
    return -1;
  }
  for (size_t i = 0; i < n_table; i++) free(table[i].name);
  free(table);
  table = rows;
  n_table = n;
  last_row = NULL;
  driver_version = driver;
  return 0;
}

// The row the last cuGetProcAddress answer in table mode came from: 1 and its name, version,
// kind (0 plain, 1 ptsz, 2 ptds) and the function handed back, or 0 if that call returned no
// function.
EXPORT int hostcb_stub_last_proc(const char **name, int *version, int *kind, void **pfn) {
  if (!last_row) return 0;
  *name = last_row->name;
  *version = last_row->version;
  *kind = last_row->kind;
  *pfn = last_pfn;
  return 1;
}

// The last cuGetProcAddress query in table mode: 1 and its symbol, version and flags, or 0 if
// none was made.
EXPORT int hostcb_stub_last_query(const char **symbol, int *version, unsigned long long *flags) {
  if (!queried) return 0;
  *symbol = last_symbol;
  *version = last_version;
  *flags = last_flags;
  return 1;
}

static void *implementation(const char *symbol, int version);

// As `resolve` below, from the table.
static CUresult table_resolve(const char *symbol, void **pfn, int version,
                              unsigned long long flags, int *status) {
  last_row = NULL;
  queried = 1;
  strncpy(last_symbol, symbol, sizeof last_symbol - 1);
  last_version = version;
  last_flags = flags;
  if (version > driver_version) return fail(CUDA_ERROR_INVALID_VALUE);
  int per_thread = (flags & 2) != 0;  // CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
  const struct row *best = NULL;
  int known = 0;
  for (size_t i = 0; i < n_table; i++) {
    const struct row *r = &table[i];
    if (strcmp(r->name, symbol) != 0) continue;
    known = 1;
    if (r->version > version || (!per_thread && r->kind != KIND_PLAIN)) continue;
    // The newest ABI; at one version, under the per-thread flag, its twin.
    if (!best || r->version > best->version ||
        (r->version == best->version && best->kind == KIND_PLAIN && r->kind != KIND_PLAIN))
      best = r;
  }
  if (!best) {
    if (status) *status = known ? 2 : 1;  // VERSION_NOT_SUFFICIENT : SYMBOL_NOT_FOUND
    return CUDA_SUCCESS;
  }
  // A per-thread twin runs as the plain ABI it is the twin of: the newest at or below its
  // version (cuMemcpyHtoD_v7000_ptds of cuMemcpyHtoD_v3020).
  int abi = best->version;
  if (best->kind != KIND_PLAIN) {
    abi = 0;
    for (size_t i = 0; i < n_table; i++) {
      const struct row *r = &table[i];
      if (r->kind == KIND_PLAIN && r->version <= best->version && r->version > abi &&
          strcmp(r->name, symbol) == 0)
        abi = r->version;
    }
  }
  void *fn = implementation(symbol, abi);
  *pfn = fn ? fn : (void *)not_implemented;
  last_row = best;
  last_pfn = *pfn;
  if (status) *status = 0;  // CU_GET_PROC_ADDRESS_SUCCESS
  return CUDA_SUCCESS;
}

// The newest ABI of `symbol` at or below `version`, as the driver resolves it.
static CUresult resolve(const char *symbol, void **pfn, int version, unsigned long long flags,
                        int *status) {
  counts[COUNT_PROC_ADDRESS]++;
  if (!symbol || !pfn) return fail(CUDA_ERROR_INVALID_VALUE);
  *pfn = NULL;
  if (table) return table_resolve(symbol, pfn, version, flags, status);
  if (version > driver_version) return fail(CUDA_ERROR_INVALID_VALUE);
  const struct proc *best = NULL;
  int known = 0;
  for (size_t i = 0; i < sizeof procs / sizeof *procs; i++) {
    if (strcmp(procs[i].name, symbol) != 0) continue;
    known = 1;
    if (procs[i].version <= version && (!best || procs[i].version > best->version)) best = &procs[i];
  }
  if (best) {
    *pfn = best->fn;
    if (status) *status = 0;  // CU_GET_PROC_ADDRESS_SUCCESS
  } else if (status) {
    *status = known ? 2 : 1;  // VERSION_NOT_SUFFICIENT : SYMBOL_NOT_FOUND
  }
  return CUDA_SUCCESS;
}

// The stub's function for exactly `symbol` at ABI `version`, or NULL. It serves the per-thread
// twins too: the stub's streams are all explicit.
static void *implementation(const char *symbol, int version) {
  for (size_t i = 0; i < sizeof procs / sizeof *procs; i++)
    if (procs[i].version == version && strcmp(procs[i].name, symbol) == 0) return procs[i].fn;
  return NULL;
}

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                    unsigned long long flags, int *status) {
  return resolve(symbol, pfn, version, flags, status);
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version,
                                 unsigned long long flags) {
  CUresult rc = resolve(symbol, pfn, version, flags, NULL);
  return rc == CUDA_SUCCESS && !*pfn ? CUDA_ERROR_NOT_FOUND : rc;
}
