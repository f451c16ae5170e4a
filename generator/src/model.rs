//! The model: what the headers declare for one CTK target, as plain data the writer turns into
//! code. Functions are fully described (C names, ABI symbol and version, per-thread variant,
//! parameters); types keep bindgen's definition for this target, because their layout is
//! bindgen's to get right and the writer emits them unchanged.

use std::collections::BTreeSet;

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
    /// The per-thread-default-stream variant, if the function has one.
    pub per_thread: Option<PerThreadVariant>,
    /// The parameters, in order.
    pub params: Vec<Param>,
    /// The return type (`CUresult` or `cudaError_t`).
    pub ret: syn::Type,
    /// The header's doc comment (Doxygen, as bindgen hands it over), one entry per line; the
    /// writer turns it into Markdown ([`crate::doc`]).
    pub doc: Vec<String>,
}

/// A function's variant under per-thread default stream semantics (nvcc's
/// `--default-stream per-thread`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerThreadVariant {
    /// The library's export of the variant: `cuMemcpyHtoD_v2_ptds`, `cudaLaunchHostFunc_ptsz`.
    pub symbol: String,
    /// Driver: the ABI version of the variant, from its `PFN_<base>_v<version>_ptsz`/`_ptds`
    /// typedef, which may be newer than the legacy one (`cuStreamAddCallback`: 5000 legacy,
    /// 7000 per-thread). Runtime: the function's own version.
    pub version: u32,
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
    /// Whether any parameter carries a host function, given the names of the types that do
    /// ([`host_function_types`]); such wrappers document the lifetime rule and must forward
    /// their arguments unchanged.
    pub fn takes_host_function(&self, carriers: &BTreeSet<String>) -> bool {
        self.params.iter().any(|p| carries(&p.ty, carriers))
    }
}

/// The driver function a runtime function's version comes from: `cudaLaunchHostFunc` →
/// `cuLaunchHostFunc`.
pub fn driver_counterpart(runtime_name: &str) -> String {
    format!("cu{}", runtime_name.trim_start_matches("cuda"))
}

impl Model {
    /// The version the headers give `f` (a function of this model) through `cudaTypedefs.h`:
    /// a driver function's own, a runtime function's when it came from its
    /// [driver counterpart](driver_counterpart). `None` for a runtime function without one, whose
    /// version is only the target's.
    pub fn header_version(&self, api: Api, f: &Function) -> Option<u32> {
        match api {
            Api::Driver => Some(f.version),
            Api::Runtime => {
                let counterpart = driver_counterpart(&f.name);
                self.driver
                    .functions
                    .iter()
                    .any(|d| d.name == counterpart)
                    .then_some(f.version)
            }
        }
    }

    /// The part of the model of `api`.
    pub fn api(&self, api: Api) -> &ApiModel {
        match api {
            Api::Driver => &self.driver,
            Api::Runtime => &self.runtime,
        }
    }
}

impl ApiModel {
    /// The names of this API's types that carry a host function ([`host_function_types`]).
    pub fn host_function_types(&self) -> BTreeSet<String> {
        host_function_types(self.types.iter().flat_map(|t| &t.items))
    }
}

/// The names of the types among `items` through which a caller's function pointer reaches CUDA:
/// function-pointer aliases (`CUhostFn`, `cudaStreamCallback_t`), and every alias, struct or
/// union that holds one of them, directly or through pointers, arrays and other such types
/// (`CUDA_HOST_NODE_PARAMS_v2`, `cudaHostNodeParams`). Computed from the definitions, not from a
/// list of names, so a new params struct of a new CTK is covered without anyone listing it.
pub fn host_function_types<'a>(items: impl IntoIterator<Item = &'a syn::Item>) -> BTreeSet<String> {
    // Each named type's component types: an alias's target, a struct's or union's fields.
    let mut parts: Vec<(String, Vec<&syn::Type>)> = Vec::new();
    for item in items {
        match item {
            syn::Item::Type(t) => parts.push((t.ident.to_string(), vec![&*t.ty])),
            syn::Item::Struct(s) => parts.push((
                s.ident.to_string(),
                s.fields.iter().map(|f| &f.ty).collect(),
            )),
            syn::Item::Union(u) => parts.push((
                u.ident.to_string(),
                u.fields.named.iter().map(|f| &f.ty).collect(),
            )),
            _ => {}
        }
    }
    let mut carriers = BTreeSet::new();
    // A fixed point: each pass adds the types that hold a type found by the pass before.
    loop {
        let before = carriers.len();
        for (name, tys) in &parts {
            if !carriers.contains(name) && tys.iter().any(|t| carries(t, &carriers)) {
                carriers.insert(name.clone());
            }
        }
        if carriers.len() == before {
            return carriers;
        }
    }
}

/// Whether `ty` is or holds a function pointer, or names a type in `carriers`.
pub fn carries(ty: &syn::Type, carriers: &BTreeSet<String>) -> bool {
    match ty {
        syn::Type::FnPtr(_) => true,
        syn::Type::Ptr(p) => carries(&p.elem, carriers),
        syn::Type::Reference(r) => carries(&r.elem, carriers),
        syn::Type::Array(a) => carries(&a.elem, carriers),
        syn::Type::Paren(p) => carries(&p.elem, carriers),
        syn::Type::Group(g) => carries(&g.elem, carriers),
        syn::Type::Path(p) => p.path.segments.iter().any(|seg| {
            carriers.contains(&seg.ident.to_string())
                || match &seg.arguments {
                    syn::PathArguments::AngleBracketed(args) => args.args.iter().any(
                        |a| matches!(a, syn::GenericArgument::Type(t) if carries(t, carriers)),
                    ),
                    _ => false,
                }
        }),
        _ => false,
    }
}

/// One type or constant, with the items bindgen attached to it (impls, layout checks).
#[derive(Clone, Debug)]
pub struct TypeDef {
    /// The name the items are sorted by.
    pub name: String,
    /// bindgen's items for this name, in bindgen's order.
    pub items: Vec<syn::Item>,
}
