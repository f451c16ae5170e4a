//! The model: what the headers declare for one CTK target, as plain data the writer turns into
//! code; no syntax tree, so it compares by value and may cross threads. Functions are data (C
//! names, ABI symbol and version, per-thread variant, parameters and return type as [`CType`]).
//! Types and constants are data too ([`TypeDef`]: records with their fields and layout,
//! enumerations with their values, typedefs, constants), from which the writer makes bindgen's
//! items again (the reader checks, for each, that it gives them back token for token), indexed
//! by name in [`Definitions`] for the layout oracle, `diff` and the host-function analysis.

use std::collections::BTreeSet;

use crate::Ctk;

mod definitions;
mod types;

pub use definitions::{Definitions, Shape, spell};
pub use types::{Definition, Enum, Enumerator, Field, Layout, Record, TypeDef};

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

// The model is plain data: it may cross threads (a syntax tree cannot).
const _: () = {
    const fn send_and_sync<T: Send + Sync>() {}
    send_and_sync::<Model>();
};

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
    /// The types and constants, sorted by name.
    pub types: Vec<TypeDef>,
    /// The writer's text of each of `types`, in the same order.
    pub texts: Vec<TypeText>,
    /// What the types define, as data.
    pub definitions: Definitions,
    /// What the API's headers declare, read through libclang ([`Declared`]), to count against
    /// what the model holds.
    pub declared: Declared,
}

/// What one API's headers declare, independent of bindgen: every function of the function
/// header (`cuda.h`, `cuda_runtime_api.h`) outside its internal blocks, and every named type of
/// the bound headers (with `driver_types.h` for the runtime).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Declared {
    /// The header the functions come from.
    pub header: String,
    /// The headers the types come from.
    pub type_headers: Vec<String>,
    /// Every declared function (its declared name, after the header's renaming macros).
    pub functions: BTreeSet<String>,
    /// Every named type.
    pub types: BTreeSet<String>,
    /// The declared functions the deny-list leaves out.
    pub denied: BTreeSet<String>,
}

/// Functions and types an API of a target binds, against what its headers declare.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Coverage {
    /// Functions the header declares.
    pub functions_declared: usize,
    /// Of those, the ones with a wrapper.
    pub functions_bound: usize,
    /// Of those, the ones the deny-list leaves out.
    pub functions_denied: usize,
    /// Named types the headers declare.
    pub types_declared: usize,
    /// Of those, the ones the bindings define.
    pub types_bound: usize,
    /// Types the bindings define besides (reached from other headers, or named by the
    /// generator for anonymous members).
    pub types_reached: usize,
}

impl std::fmt::Display for Coverage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "functions {}/{} ({} denied), types {}/{} (+{} reached)",
            self.functions_bound,
            self.functions_declared,
            self.functions_denied,
            self.types_bound,
            self.types_declared,
            self.types_reached
        )
    }
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
    /// declaration's signature. Runtime: the CUDA version of the first pinned runtime header of
    /// the target's major that declares it ([`crate::history`]), the runtime the user needs.
    pub version: u32,
    /// The oldest CUDA version whose library can be shown to have the function. Runtime: its
    /// `version`. Driver: its ABI `version`, or where the first header of the major that
    /// declares that ABI is newer (`cuLaunchHostFunc_v2`, ABI 13010, first in 13.2's
    /// `cudaTypedefs.h`), that header's version ([`crate::history`]).
    pub needs: u32,
    /// The per-thread-default-stream variant, if the function has one.
    pub per_thread: Option<PerThreadVariant>,
    /// The parameters, in order.
    pub params: Vec<Param>,
    /// The return type (`CUresult` or `cudaError_t`).
    pub ret: CType,
    /// The header's doc comment (Doxygen, as bindgen hands it over), one entry per line; the
    /// writer turns it into Markdown ([`crate::doc`]).
    pub doc: Vec<String>,
    /// The note of `#[deprecated]`, where the header marks the declaration deprecated
    /// (`__CUDA_DEPRECATED`): the text of its `\deprecated` paragraph, or a plain sentence.
    pub deprecated: Option<String>,
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
    /// The type, as bindgen spelled it.
    pub ty: CType,
}

/// A type of a signature or a field, as data: what bindgen spelled, in C's terms, so that the
/// model holds no syntax and compares by value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CType {
    /// A named type, by bindgen's path without spaces: `CUstream`, `::core::ffi::c_uint`, `usize`.
    Named(String),
    /// A named type with type arguments: `__BindgenBitfieldUnit<[u8; 4usize]>`, and bindgen's
    /// nullable function pointers, `::core::option::Option<unsafe extern "C" fn(..)>`.
    Generic {
        /// The path, as [`CType::Named`] spells it.
        path: String,
        /// The type arguments.
        args: Vec<CType>,
    },
    /// A pointer.
    Pointer {
        /// `*mut` rather than `*const`.
        mutable: bool,
        /// The type pointed to.
        to: Box<CType>,
    },
    /// An array.
    Array {
        /// The element type.
        of: Box<CType>,
        /// The length, as bindgen spelled it (`16usize`).
        len: String,
    },
    /// A function pointer (`unsafe extern "C" fn(userData: *mut c_void)`; bindgen makes a
    /// nullable one `Option` of it).
    Function {
        /// The parameters, each with its name where the header gives one.
        params: Vec<(Option<String>, CType)>,
        /// The return type, if not `void`.
        ret: Option<Box<CType>>,
    },
    /// Any other type, by its Rust tokens (none in the bindings of any pinned target).
    Other(String),
}

impl CType {
    /// The type bindgen spelled as `ty`.
    pub fn of(ty: &syn::Type) -> CType {
        let tokens = || quote::ToTokens::to_token_stream(ty).to_string();
        match ty {
            syn::Type::Ptr(p) => CType::Pointer {
                mutable: matches!(p.mutability, syn::PointerMutability::Mut(_)),
                to: Box::new(CType::of(&p.elem)),
            },
            syn::Type::Array(a) => CType::Array {
                of: Box::new(CType::of(&a.elem)),
                len: quote::ToTokens::to_token_stream(&a.len).to_string(),
            },
            syn::Type::FnPtr(f)
                if f.unsafety.is_some()
                    && f.lifetimes.is_none()
                    && f.variadic.is_none()
                    && f.abi
                        .as_ref()
                        .and_then(|a| a.name.as_ref())
                        .map(|n| n.value())
                        == Some("C".to_owned()) =>
            {
                CType::Function {
                    params: (f.inputs.iter())
                        .map(|a| {
                            (
                                a.name.as_ref().map(|(n, _)| n.to_string()),
                                CType::of(&a.ty),
                            )
                        })
                        .collect(),
                    ret: match &f.output {
                        syn::ReturnType::Default => None,
                        syn::ReturnType::Type(_, ty) => Some(Box::new(CType::of(ty))),
                    },
                }
            }
            syn::Type::Path(p) if p.qself.is_none() => {
                let segments = &p.path.segments;
                let mut path = String::new();
                if p.path.leading_colon.is_some() {
                    path.push_str("::");
                }
                let idents: Vec<String> = segments.iter().map(|s| s.ident.to_string()).collect();
                path.push_str(&idents.join("::"));
                let plain = |s: &syn::PathSegment| matches!(s.arguments, syn::PathArguments::None);
                let (Some(last), init) = (segments.last(), segments.iter().rev().skip(1)) else {
                    return CType::Other(tokens());
                };
                if !init.into_iter().all(plain) {
                    return CType::Other(tokens());
                }
                match &last.arguments {
                    syn::PathArguments::None => CType::Named(path),
                    syn::PathArguments::AngleBracketed(a) => {
                        let args: Option<Vec<CType>> = a
                            .args
                            .iter()
                            .map(|a| match a {
                                syn::GenericArgument::Type(t) => Some(CType::of(t)),
                                _ => None,
                            })
                            .collect();
                        match args {
                            Some(args) => CType::Generic { path, args },
                            None => CType::Other(tokens()),
                        }
                    }
                    syn::PathArguments::Parenthesized(_) => CType::Other(tokens()),
                }
            }
            _ => CType::Other(tokens()),
        }
    }

    /// Whether the type is or holds a function pointer, or names a type in `carriers` (see
    /// [`Definitions::host_function_types`]). A type the model cannot see into
    /// ([`CType::Other`]) is taken to hold one.
    pub fn carries(&self, carriers: &BTreeSet<String>) -> bool {
        let named = |path: &str| path.split("::").any(|s| carriers.contains(s));
        match self {
            CType::Named(path) => named(path),
            CType::Generic { path, args } => {
                named(path) || args.iter().any(|a| a.carries(carriers))
            }
            CType::Pointer { to: of, .. } | CType::Array { of, .. } => of.carries(carriers),
            CType::Function { .. } | CType::Other(_) => true,
        }
    }

    /// The last identifier of a named type's path (`CUcontext`, `__IncompleteArrayField`).
    pub fn last_ident(&self) -> Option<&str> {
        match self {
            CType::Named(path) | CType::Generic { path, .. } => path.rsplit("::").next(),
            _ => None,
        }
    }
}

/// The Rust spelling: `*mut ::core::ffi::c_void`.
impl std::fmt::Display for CType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CType::Named(tokens) | CType::Other(tokens) => f.write_str(tokens),
            CType::Function { params, ret } => {
                let params: Vec<String> = (params.iter())
                    .map(|(name, ty)| match name {
                        Some(name) => format!("{name}: {ty}"),
                        None => ty.to_string(),
                    })
                    .collect();
                write!(f, "unsafe extern \"C\" fn({})", params.join(", "))?;
                match ret {
                    Some(ret) => write!(f, " -> {ret}"),
                    None => Ok(()),
                }
            }
            CType::Generic { path, args } => {
                let args: Vec<String> = args.iter().map(ToString::to_string).collect();
                write!(f, "{path}<{}>", args.join(", "))
            }
            CType::Pointer { mutable, to } => {
                write!(f, "*{} {to}", if *mutable { "mut" } else { "const" })
            }
            CType::Array { of, len } => write!(f, "[{of}; {len}]"),
        }
    }
}

impl Function {
    /// Whether any parameter carries a host function, given the names of the types that do
    /// ([`Definitions::host_function_types`]); such wrappers document the lifetime rule and must forward
    /// their arguments unchanged.
    pub fn takes_host_function(&self, carriers: &BTreeSet<String>) -> bool {
        self.params.iter().any(|p| p.ty.carries(carriers))
    }
}

impl Model {
    /// The ABI version the headers give `f` (a function of this model): a driver function's
    /// `cudaTypedefs.h` version, what `cuGetProcAddress` takes. `None` for a runtime function:
    /// `libcudart` exports carry no ABI version (its [`Function::version`] is the first runtime
    /// of the major that declares it, see [`crate::history`]).
    pub fn header_version(&self, api: Api, f: &Function) -> Option<u32> {
        match api {
            Api::Driver => Some(f.version),
            Api::Runtime => None,
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

/// What the files written for the whole target list need of one target's model: for each API,
/// every bound function (its ABI symbol, sorted) with its compatibility-table cell, and its
/// types' texts: what the all-target files are made from, and what the input cache keeps of
/// targets a regen does not write ([`Summary::to_text`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    /// The target.
    pub ctk: Ctk,
    /// `(function, cell)` of the driver API, sorted by function.
    pub driver: Vec<(String, String)>,
    /// `(function, cell)` of the runtime API, sorted by function.
    pub runtime: Vec<(String, String)>,
    /// The types of both APIs, the driver's first, each in the model's order: what
    /// [`crate::shared::decide`] compares across the targets.
    pub types: Vec<TypeText>,
}

/// One API's part of a [`Summary`]: what the thread that read that API alone can tell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SummaryPart {
    /// `(function, cell)`, sorted by function (see [`Summary::of`]).
    pub functions: Vec<(String, String)>,
    /// The API's types, in the model's order.
    pub types: Vec<TypeText>,
}

impl SummaryPart {
    /// The part of `api` (see [`Summary::of`] for the cells).
    pub fn of(api: &ApiModel) -> SummaryPart {
        let mut functions: Vec<(String, String)> = api
            .functions
            .iter()
            .map(|f| {
                let cell = match (api.api, &f.per_thread) {
                    (Api::Driver, Some(pt)) => format!("{} / {}", f.version, pt.version),
                    _ => f.version.to_string(),
                };
                (f.name.clone(), cell)
            })
            .collect();
        functions.sort();
        SummaryPart {
            functions,
            types: api.texts.clone(),
        }
    }
}

impl Summary {
    /// The summary of `model`. A cell is the ABI version the headers give the function: for the
    /// driver the `cuGetProcAddress` version, `legacy / per-thread` where the function has a
    /// per-thread-default-stream variant; for the runtime (resolved by symbol, no ABI version)
    /// the version of the first runtime of the major that declares it.
    pub fn of(model: &Model) -> Summary {
        Summary::join(
            model.ctk,
            SummaryPart::of(&model.driver),
            SummaryPart::of(&model.runtime),
        )
    }

    /// The summary of a target whose two APIs were summarised apart (each on the thread that read
    /// it).
    pub fn join(ctk: Ctk, driver: SummaryPart, runtime: SummaryPart) -> Summary {
        Summary {
            ctk,
            driver: driver.functions,
            runtime: runtime.functions,
            types: driver.types.into_iter().chain(runtime.types).collect(),
        }
    }

    /// The column of `api`.
    pub fn api(&self, api: Api) -> &[(String, String)] {
        match api {
            Api::Driver => &self.driver,
            Api::Runtime => &self.runtime,
        }
    }

    /// The summary as text: a first line `hostcb summary <ctk>`, then one line
    /// `<api>\t<function>\t<cell>` per function, then one line
    /// `type\t<api>\t<name>\t<key>\t<uses, space-separated>\t<tokens>` per type (see
    /// [`TypeText`]; printed tokens hold no tab or line break: those in literals are escaped).
    pub fn to_text(&self) -> String {
        let mut text = format!("hostcb summary {}\n", self.ctk);
        for api in [Api::Driver, Api::Runtime] {
            for (name, cell) in self.api(api) {
                text.push_str(&format!("{}\t{name}\t{cell}\n", api.as_str()));
            }
        }
        for t in &self.types {
            text.push_str(&format!(
                "type\t{}\t{}\t{}\t{}\t{}\n",
                t.api.as_str(),
                t.name,
                t.key,
                t.uses.join(" "),
                t.text
            ));
        }
        text
    }

    /// Reads what [`Summary::to_text`] wrote for `ctk`; `None` for anything else.
    pub fn from_text(ctk: Ctk, text: &str) -> Option<Summary> {
        let mut lines = text.strip_suffix('\n')?.split('\n');
        if lines.next()? != format!("hostcb summary {ctk}") {
            return None;
        }
        let mut summary = Summary {
            ctk,
            driver: Vec::new(),
            runtime: Vec::new(),
            types: Vec::new(),
        };
        let api_of = |name: &str| match name {
            "driver" => Some(Api::Driver),
            "runtime" => Some(Api::Runtime),
            _ => None,
        };
        for line in lines {
            if let Some(rest) = line.strip_prefix("type\t") {
                let mut fields = rest.splitn(5, '\t');
                let mut field = || fields.next();
                let (api, name, key, uses, text) =
                    (field()?, field()?, field()?, field()?, field()?);
                if name.is_empty() || text.contains('\t') {
                    return None;
                }
                summary.types.push(TypeText {
                    api: api_of(api)?,
                    name: name.to_owned(),
                    text: text.to_owned(),
                    key: key.to_owned(),
                    uses: uses.split_whitespace().map(str::to_owned).collect(),
                });
                continue;
            }
            let mut fields = line.split('\t');
            let (api, name, cell) = (fields.next()?, fields.next()?, fields.next()?);
            if fields.next().is_some() || name.is_empty() || cell.is_empty() {
                return None;
            }
            let column = match api {
                "driver" => &mut summary.driver,
                "runtime" => &mut summary.runtime,
                _ => return None,
            };
            column.push((name.to_owned(), cell.to_owned()));
        }
        summary.driver.sort();
        summary.runtime.sort();
        Some(summary)
    }
}

impl ApiModel {
    /// The part of `api` holding `functions`, and `types` with the writer's text of each
    /// (`texts`, in the same order).
    pub fn new(
        api: Api,
        functions: Vec<Function>,
        types: Vec<TypeDef>,
        texts: Vec<TypeText>,
        declared: Declared,
    ) -> ApiModel {
        let definitions = Definitions::of(&types);
        ApiModel {
            api,
            functions,
            types,
            texts,
            definitions,
            declared,
        }
    }

    /// Functions and types bound against what the headers declare.
    pub fn coverage(&self) -> Coverage {
        let bound: BTreeSet<&str> = self
            .functions
            .iter()
            .flat_map(|f| {
                // A runtime wrapper is named after the legacy symbol; the header declared the
                // per-thread one.
                std::iter::once(f.name.as_str())
                    .chain(f.per_thread.as_ref().map(|p| p.symbol.as_str()))
            })
            .collect();
        let defined = &self.definitions.shapes;
        let types_bound = defined
            .keys()
            .filter(|t| self.declared.types.contains(*t))
            .count();
        Coverage {
            functions_declared: self.declared.functions.len(),
            functions_bound: self
                .declared
                .functions
                .iter()
                .filter(|f| bound.contains(f.as_str()))
                .count(),
            functions_denied: self.declared.denied.len(),
            types_declared: self.declared.types.len(),
            types_bound,
            types_reached: defined.len() - types_bound,
        }
    }

    /// The names of this API's types that carry a host function
    /// ([`Definitions::host_function_types`]).
    pub fn host_function_types(&self) -> BTreeSet<String> {
        self.definitions.host_function_types()
    }
}

/// One type or constant as the writer writes it, what a [`Summary`] keeps of it: enough to decide
/// which types the targets share ([`crate::shared::decide`]) and to write the shared ones.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeText {
    /// The API whose headers define it.
    pub api: Api,
    /// Its name ([`TypeDef::name`]).
    pub name: String,
    /// The writer's items for it ([`crate::writer::type_tokens`]), printed as one line of Rust
    /// tokens (their doc comments still the headers' Doxygen).
    pub text: String,
    /// The SHA-256 of the items' tokens without their doc attributes: what
    /// [`crate::shared::decide`] compares across targets.
    pub key: String,
    /// The names of the API's other types that the items name, sorted.
    pub uses: Vec<String>,
}
