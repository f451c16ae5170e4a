//! The model: what the headers declare for one CTK target, as plain data the writer turns into
//! code. Functions are fully described (C names, ABI symbol and version, per-thread variant,
//! parameters); types keep bindgen's definition for this target, because their layout is
//! bindgen's to get right and the writer emits them unchanged.

use crate::Ctk;

/// Which CUDA API a part of the model belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Api {
    /// The driver API (`cuda.h`, `libcuda.so.1`).
    Driver,
    /// The runtime API (`cuda_runtime_api.h`, `libcudart.so.<major>`).
    Runtime,
}

impl Api {
    /// `"driver"` or `"runtime"`: the generated file's stem.
    pub fn as_str(self) -> &'static str {
        match self {
            Api::Driver => "driver",
            Api::Runtime => "runtime",
        }
    }
}

/// Everything generated for one target.
#[derive(Clone, Debug)]
pub struct Model {
    /// The target.
    pub ctk: Ctk,
    /// The driver API part.
    pub driver: ApiModel,
    /// The runtime API part.
    pub runtime: ApiModel,
}

/// One API of one target.
#[derive(Clone, Debug)]
pub struct ApiModel {
    /// Which API.
    pub api: Api,
    /// The functions, sorted by name.
    pub functions: Vec<Function>,
    /// The types, constants and their associated items, sorted by name.
    pub types: Vec<TypeDef>,
}

/// One declared function.
#[derive(Clone, Debug)]
pub struct Function {
    /// The declared name, which is the library's ABI symbol (`cuStreamBeginCapture_v2`).
    pub name: String,
    /// Other C names that the header's macros map onto this declaration
    /// (`cuStreamBeginCapture`); each becomes an alias of the wrapper.
    pub aliases: Vec<String>,
    /// The name `cuGetProcAddress` takes (`cuStreamBeginCapture`); for the runtime, the symbol.
    pub base: String,
    /// Driver: the ABI version from `cudaTypedefs.h` (`PFN_<base>_v<version>`) that matches the
    /// declaration's signature. Runtime: the CUDA version the function first appeared in, as
    /// far as the headers tell (its driver counterpart's version, else the target's).
    pub version: u32,
    /// The per-thread-default-stream variant: driver, whether one exists (`_ptsz`/`_ptds`);
    /// runtime, the symbol to resolve instead (`cudaLaunchHostFunc_ptsz`).
    pub per_thread: PerThread,
    /// The parameters, in order.
    pub params: Vec<Param>,
    /// The return type (`CUresult` or `cudaError_t`).
    pub ret: syn::Type,
    /// The header's doc comment, one entry per line, already escaped for rustdoc.
    pub doc: Vec<String>,
}

/// How a function behaves under per-thread default stream semantics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PerThread {
    /// No separate variant: the same entry point in both modes.
    None,
    /// A variant exists; the driver selects it through `cuGetProcAddress`'s flags.
    Driver,
    /// A variant exists under this runtime symbol.
    Runtime(String),
}

/// One parameter of a function.
#[derive(Clone, Debug)]
pub struct Param {
    /// The Rust name (bindgen's, e.g. `fn_` for C's `fn`).
    pub name: String,
    /// The Rust type, as bindgen spelled it.
    pub ty: syn::Type,
}

impl Function {
    /// Whether any parameter carries a host function (directly or through a params struct);
    /// such wrappers document the lifetime rule and must forward their arguments unchanged.
    pub fn takes_host_function(&self) -> bool {
        self.params.iter().any(|p| {
            let ty = quote::ToTokens::to_token_stream(&p.ty).to_string();
            HOST_FUNCTION_TYPES.iter().any(|t| {
                ty.split(|c: char| !c.is_alphanumeric() && c != '_')
                    .any(|w| w == *t)
            })
        })
    }
}

/// Types through which a caller's host function reaches CUDA.
pub const HOST_FUNCTION_TYPES: &[&str] = &[
    "CUhostFn",
    "CUstreamCallback",
    "CUDA_HOST_NODE_PARAMS",
    "CUDA_HOST_NODE_PARAMS_v1",
    "CUDA_HOST_NODE_PARAMS_v2",
    "cudaHostFn_t",
    "cudaStreamCallback_t",
    "cudaHostNodeParams",
    "cudaHostNodeParamsV2",
];

/// One type or constant, with the items bindgen attached to it (impls, layout checks).
#[derive(Clone, Debug)]
pub struct TypeDef {
    /// The name the items are sorted by.
    pub name: String,
    /// bindgen's items for this name, in bindgen's order.
    pub items: Vec<syn::Item>,
}
