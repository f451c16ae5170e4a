//! The reader: runs bindgen over a target's headers, binding every declaration of the API's
//! headers less the deny-list, records the header's alias macros, reads what bindgen does not
//! pass on through libclang itself (`reader/scan.rs`: deprecations, the fields of every record, the
//! macros), repairs and checks bindgen's output against it (`reader/fixup.rs`), and turns the result
//! (parsed with syn) into the [`model`](crate::model).
//!
//! The driver header is read together with `cudaTypedefs.h`, whose `PFN_<base>_v<version>`
//! typedefs give each declaration's ABI version. The runtime header is read with
//! `CUDA_API_PER_THREAD_DEFAULT_STREAM` defined, so that its per-thread macros are live and every
//! declaration shows its per-thread symbol (`cudaLaunchHostFunc_ptsz`); the legacy symbol is the
//! same name without the suffix.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use quote::ToTokens;

use crate::Ctk;
use crate::allowlist::DenyList;
use crate::inputs::{Histories, InputError};
use crate::model::{
    Api, ApiModel, CType, Declared, Function, Param, PerThreadVariant, TypeDef, TypeText,
};

mod fixup;
mod scan;
mod types;

pub use types::{doc, type_def};

/// What bindgen needs to find the headers.
#[derive(Clone, Debug)]
pub struct HeaderSet {
    /// The target the headers belong to.
    pub ctk: Ctk,
    /// `-I` folders: the one holding `cuda.h` first.
    pub include_dirs: Vec<PathBuf>,
    /// Further clang arguments (e.g. `-isystem` for the C library's own headers).
    pub clang_args: Vec<String>,
}

/// Why the headers could not be read into a model.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The histories could not be read ([`crate::inputs::Inputs::histories`]).
    #[error(transparent)]
    Input(#[from] InputError),
    /// libclang rejected the headers.
    #[error(
        "bindgen could not parse the {api} headers of CTK {ctk}: {message}; check the header packages (or --cuda-home) and libclang"
    )]
    Parse {
        /// Which API's headers.
        api: &'static str,
        /// The target.
        ctk: Ctk,
        /// libclang's diagnostic, first line.
        message: String,
    },
    /// bindgen produced something syn cannot read (a bindgen/syn mismatch).
    #[error("bindgen's output for the {api} API does not parse as Rust: {0}", api = .1)]
    Syntax(syn::Error, &'static str),
    /// No `PFN_` typedef in cudaTypedefs.h matches a declaration, so its ABI version is unknown.
    #[error(
        "{function}: no PFN_{base}_v<version> typedef in cudaTypedefs.h matches its signature, so its ABI version is unknown; the headers are inconsistent (or, if cudaTypedefs.h does not cover it, add `{function}: <reason>` to generator/allowlist/driver.txt)"
    )]
    NoAbiVersion {
        /// The declaration.
        function: String,
        /// The base name searched.
        base: String,
    },
    /// bindgen's output lacks what the header declares (a field, a member), or a name the
    /// generator gives an anonymous type is taken.
    #[error(
        "bindgen mistranslates the {api} headers of CTK {ctk}: {problems}; teach generator/src/reader/fixup.rs the construct (nothing was written)"
    )]
    Mistranslated {
        /// Which API's headers.
        api: &'static str,
        /// The target.
        ctk: Ctk,
        /// Every problem, joined with `; `.
        problems: String,
    },
    /// A runtime function that no `cuda_runtime_api.h` of the target's major declares, so the
    /// runtime version it needs is unknown (the history scan and bindgen disagree).
    #[error(
        "{function}: bindgen reads it from the CTK {ctk} runtime headers, but no CUDARTAPI declaration of it is in cuda_runtime_api.h of {ctk} or an older pinned target of its major, so the runtime version it needs is unknown; teach generator/src/history.rs the declaration's form (nothing was written)"
    )]
    NoHistory {
        /// The function.
        function: String,
        /// The target.
        ctk: Ctk,
    },
    /// A function that does not return the API's status type, which the templates expect.
    #[error(
        "{function} returns {ret}, not {status}; the wrapper templates only cover functions that return {status}: add `{function}: <reason>` to the deny-list generator/allowlist/{api}.txt"
    )]
    UnsupportedReturn {
        /// `driver` or `runtime`.
        api: &'static str,
        /// The declaration.
        function: String,
        /// What it returns.
        ret: String,
        /// The status type.
        status: &'static str,
    },
}

/// Runs bindgen once, as the reader does, and returns its output text. Used to measure the
/// floor of generation time (one bare parse) next to a full regen.
pub fn bare_parse(headers: &HeaderSet, api: Api, list: &DenyList) -> Result<String, ReadError> {
    let (builder, _) = builder(headers, api, list);
    run_bindgen(builder, headers.ctk, api)
}

/// The object-like macros the header defines, by name, as token spellings after the name.
type Macros = Arc<Mutex<HashMap<String, Vec<String>>>>;

#[derive(Debug)]
struct Callbacks {
    macros: Macros,
}

impl bindgen::callbacks::ParseCallbacks for Callbacks {
    fn modify_macro(&self, name: &str, tokens: &mut Vec<bindgen::callbacks::Token>) {
        let spelled: Vec<String> = tokens
            .iter()
            .skip(1) // the macro's own name
            .map(|t| String::from_utf8_lossy(&t.raw).into_owned())
            .collect();
        if let Ok(mut macros) = self.macros.lock() {
            macros.insert(name.to_owned(), spelled);
        }
    }
}

/// The headers whose declarations an API binds: every function, type and constant declared in
/// them (and every type those reach, from whatever header declares it).
fn bound_files(api: Api) -> &'static [&'static str] {
    match api {
        // cudaTypedefs.h's `PFN_` typedefs give each declaration its ABI version.
        Api::Driver => &["cuda.h", "cudaTypedefs.h"],
        // driver_types.h holds the runtime's types and flag macros (`cudaStreamNonBlocking`).
        Api::Runtime => &["cuda_runtime_api.h", "driver_types.h"],
    }
}

/// The header that declares an API's functions.
pub(crate) fn function_header(api: Api) -> &'static str {
    bound_files(api)[0]
}

/// The wrapper header bindgen (and the declaration scan) parses, and the extra clang arguments.
fn contents(api: Api) -> (&'static str, &'static [&'static str]) {
    match api {
        Api::Driver => ("#include <cuda.h>\n#include <cudaTypedefs.h>\n", &[]),
        Api::Runtime => (
            "#include <cuda_runtime_api.h>\n",
            &["-DCUDA_API_PER_THREAD_DEFAULT_STREAM"],
        ),
    }
}

/// Every clang argument of a parse of `api`'s headers.
fn clang_args(headers: &HeaderSet, api: Api) -> Vec<String> {
    let (_, extra) = contents(api);
    headers
        .include_dirs
        .iter()
        .map(|d| format!("-I{}", d.display()))
        .chain(headers.clang_args.iter().cloned())
        .chain(extra.iter().map(|s| s.to_string()))
        .collect()
}

/// The enumerations whose values are flags (`CUgraphInstantiate_flags_enum`,
/// `cudaGraphInstantiateFlags`): bindgen gives them `|`, `|=`, `&` and `&=`.
const FLAG_ENUMS: &str = ".*[Ff]lags?(_enum)?$";

fn builder(headers: &HeaderSet, api: Api, deny: &DenyList) -> (bindgen::Builder, Macros) {
    let macros = Macros::default();
    let (contents, _) = contents(api);
    let mut b = bindgen::Builder::default()
        .header_contents(&format!("hostcb_{}.h", api.as_str()), contents)
        .clang_args(clang_args(headers, api))
        .default_enum_style(bindgen::EnumVariation::NewType {
            is_bitfield: false,
            is_global: false,
        })
        // Flag enumerations combine with `|` (and `&`), as C combines their values.
        .bitfield_enum(FLAG_ENUMS)
        .generate_comments(true)
        .layout_tests(true)
        .derive_default(true)
        .derive_debug(true)
        .derive_copy(true)
        .use_core()
        .ctypes_prefix("::core::ffi")
        .formatter(bindgen::Formatter::None)
        // Not the include folders of whatever `clang` the machine's PATH (or `llvm-config`)
        // names: bindgen would run it on every parse and add its folders after the generator's
        // own, so that the output could depend on what the machine has installed. The generator's
        // folders are all the headers need (`Libclang::clang_args`).
        .detect_include_paths(false)
        .parse_callbacks(Box::new(Callbacks {
            macros: macros.clone(),
        }));
    for file in bound_files(api) {
        b = b.allowlist_file(format!(".*/{}", regex::escape(file)));
    }
    for d in &deny.functions {
        b = b.blocklist_function(regex::escape(&d.name));
    }
    (b, macros)
}

fn run_bindgen(builder: bindgen::Builder, ctk: Ctk, api: Api) -> Result<String, ReadError> {
    let bindings = builder.generate().map_err(|e| ReadError::Parse {
        api: api.as_str(),
        ctk,
        message: e.to_string().lines().next().unwrap_or("").to_owned(),
    })?;
    Ok(bindings.to_string())
}

/// Reads one API of one target into its part of the model: each runtime function's version is
/// the first target of the runtime history that declares it, and each driver function's minimum
/// driver the first of the driver history that declares its ABI, where newer than that ABI's
/// number (`history` gives the histories once bindgen is done).
pub fn read_api<'h>(
    headers: &HeaderSet,
    api: Api,
    list: &DenyList,
    history: impl FnOnce() -> Result<&'h Histories, InputError>,
) -> Result<ApiModel, ReadError> {
    let (builder, macros) = builder(headers, api, list);
    let text = run_bindgen(builder, headers.ctk, api)?;
    let file = syn::parse_file(&text).map_err(|e| ReadError::Syntax(e, api.as_str()))?;
    let macros = macros.lock().map(|m| m.clone()).unwrap_or_default();
    let scanned = scan::scan(
        &format!("hostcb_{}.h", api.as_str()),
        contents(api).0,
        &clang_args(headers, api),
        function_header(api),
        bound_files(api),
    )
    .map_err(|e| ReadError::Parse {
        api: api.as_str(),
        ctk: headers.ctk,
        message: e.0,
    })?;

    let mistranslated = |problems: Vec<String>| ReadError::Mistranslated {
        api: api.as_str(),
        ctk: headers.ctk,
        problems: problems.join("; "),
    };
    let mut items = file.items;
    fixup::name_anonymous(&mut items).map_err(|p| mistranslated(vec![p]))?;
    let problems = fixup::field_mismatches(&items, &scanned.fields);
    if !problems.is_empty() {
        return Err(mistranslated(problems));
    }
    let constants = fixup::macro_constants(&items, &macros, &scanned.macros);
    items.extend(constants);

    let mut decls = Vec::new();
    let mut pfns: BTreeMap<String, Vec<CType>> = BTreeMap::new();
    let mut aliases: HashMap<String, CType> = HashMap::new();
    let mut types: BTreeMap<String, Vec<syn::Item>> = BTreeMap::new();
    for item in items {
        match item {
            syn::Item::ForeignMod(m) => decls.extend(m.items.into_iter().filter_map(|i| match i {
                syn::ForeignItem::Fn(f) => Some(f),
                _ => None,
            })),
            syn::Item::Type(t) if t.ident.to_string().starts_with("PFN_") => {
                if let Some(f) = bare_fn_of(&t.ty) {
                    let params = f.inputs.iter().map(|a| CType::of(&a.ty)).collect();
                    pfns.insert(t.ident.to_string(), params);
                }
            }
            item => {
                if let syn::Item::Type(t) = &item {
                    aliases.insert(t.ident.to_string(), CType::of(&t.ty));
                }
                let key = group_of(&item);
                types.entry(key).or_default().push(item);
            }
        }
    }

    let declared: BTreeSet<String> = decls.iter().map(|d| d.sig.ident.to_string()).collect();
    let mut renames: HashMap<&str, Vec<&str>> = HashMap::new();
    for (name, tokens) in &macros {
        let target = match tokens.as_slice() {
            [t] => t,
            [_, open, t, close] if open == "(" && close == ")" => t,
            _ => continue,
        };
        renames.entry(target).or_default().push(name);
    }
    let lookup = Lookup {
        pfns: &pfns,
        aliases: &aliases,
        renames: &renames,
        declared: &declared,
    };
    let history = history()?;
    let mut functions = Vec::new();
    for decl in decls {
        let mut f = function(headers.ctk, api, decl, &lookup, history)?;
        let declared_name = f
            .per_thread
            .as_ref()
            .filter(|_| api == Api::Runtime)
            .map_or(&f.name, |p| &p.symbol);
        if scanned.functions.get(declared_name.as_str()) == Some(&true) {
            f.deprecated = Some(crate::doc::deprecation_note(&f.doc, function_header(api)));
        }
        functions.push(f);
    }
    functions.sort_by(|a, b| a.name.cmp(&b.name));
    let declared: Vec<String> = functions.iter().map(|f| f.name.clone()).collect();
    for f in &mut functions {
        f.aliases.retain(|a| !declared.contains(a));
    }
    let files = bound_files(api);
    let declared = Declared {
        header: function_header(api).to_owned(),
        type_headers: files
            .iter()
            .filter(|f| **f != "cudaTypedefs.h")
            .map(|f| f.to_string())
            .collect(),
        denied: scanned
            .functions
            .keys()
            .filter(|f| list.denies(f))
            .cloned()
            .collect(),
        functions: scanned.functions.into_keys().collect(),
        types: scanned
            .types
            .into_iter()
            .filter(|t| !t.starts_with("PFN_"))
            .collect(),
    };
    let (types, texts) = type_defs(api, types).map_err(mistranslated)?;
    Ok(ApiModel::new(api, functions, types, texts, declared))
}

/// The model's data of bindgen's items, grouped by name ([`group_of`]), with the writer's text of
/// each. The writer's items for the data must be bindgen's, token for token: an error names each
/// name whose items the data does not give back (a form of bindgen's output the model does not
/// hold), so that nothing bindgen emits is dropped or changed on the way.
fn type_defs(
    api: Api,
    types: BTreeMap<String, Vec<syn::Item>>,
) -> Result<(Vec<TypeDef>, Vec<TypeText>), Vec<String>> {
    let (mut defs, mut texts, mut problems) = (Vec::new(), Vec::new(), Vec::new());
    for (name, items) in &types {
        let Some(def) = types::type_def(api, name, items) else {
            problems.push(format!(
                "`{name}`: bindgen's items define no type or constant of a form the model holds"
            ));
            continue;
        };
        let mut bindgen = proc_macro2::TokenStream::new();
        for item in items {
            item.to_tokens(&mut bindgen);
        }
        // The doc strings are the data's as they are: the comparison stands each in for one
        // (escaping them all again took a twentieth of the reading's time).
        if !same_tokens(crate::writer::type_shape(&def), bindgen.clone()) {
            problems.push(format!(
                "`{name}`: the model's data does not give bindgen's items back (bindgen: {bindgen})"
            ));
            continue;
        }
        // bindgen's tokens are the writer's now, and the writer's conversions follow them.
        bindgen.extend(crate::writer::type_conversions(&def));
        let text = bindgen.to_string();
        let tokens = crate::shared::without_docs(bindgen);
        let mut uses = BTreeSet::new();
        def.words(&mut |word| {
            if let Some((used, _)) = types.get_key_value(word)
                && used != name
            {
                uses.insert(used.clone());
            }
        });
        texts.push(TypeText {
            api,
            name: name.clone(),
            text,
            key: crate::inputs::sha256_hex(tokens.to_string().as_bytes()),
            uses: uses.into_iter().collect(),
        });
        defs.push(def);
    }
    if problems.is_empty() {
        Ok((defs, texts))
    } else {
        Err(problems)
    }
}

/// Whether `a` and `b` are the same tokens (as their printed text would tell, without printing
/// them: the reader compares every type's tokens so), where the identifier
/// [`crate::writer::DOC_STRING`] in `a` stands for any literal in `b`.
fn same_tokens(a: proc_macro2::TokenStream, b: proc_macro2::TokenStream) -> bool {
    use proc_macro2::TokenTree as T;
    let (mut a, mut b) = (a.into_iter(), b.into_iter());
    loop {
        let same = match (a.next(), b.next()) {
            (None, None) => return true,
            (Some(T::Group(x)), Some(T::Group(y))) => {
                x.delimiter() == y.delimiter() && same_tokens(x.stream(), y.stream())
            }
            (Some(T::Ident(x)), Some(T::Ident(y))) => x == y,
            (Some(T::Punct(x)), Some(T::Punct(y))) => {
                x.as_char() == y.as_char() && x.spacing() == y.spacing()
            }
            (Some(T::Literal(x)), Some(T::Literal(y))) => x.to_string() == y.to_string(),
            (Some(T::Ident(x)), Some(T::Literal(_))) => x == crate::writer::DOC_STRING,
            _ => false,
        };
        if !same {
            return false;
        }
    }
}

/// What the reader knows of one API's headers besides a declaration itself.
struct Lookup<'a> {
    /// The parameter types of `cudaTypedefs.h`'s `PFN_` typedefs, by name.
    pfns: &'a BTreeMap<String, Vec<CType>>,
    /// Type aliases, to compare signatures through them.
    aliases: &'a HashMap<String, CType>,
    /// The header's object-like macros that name one identifier (`#define cuX cuX_v2`,
    /// `#define cuX __CUDA_API_PTSZ(cuX_v2)`), by that identifier.
    renames: &'a HashMap<&'a str, Vec<&'a str>>,
    /// Every declared function's name.
    declared: &'a BTreeSet<String>,
}

fn function(
    ctk: Ctk,
    api: Api,
    decl: syn::ForeignItemFn,
    lookup: &Lookup<'_>,
    history: &Histories,
) -> Result<Function, ReadError> {
    let declared = decl.sig.ident.to_string();
    let params: Vec<Param> = decl
        .sig
        .inputs
        .iter()
        .filter_map(|a| match a {
            syn::FnArg::Typed(p) => Some(Param {
                name: p.pat.to_token_stream().to_string(),
                ty: CType::of(&p.ty),
            }),
            syn::FnArg::Receiver(_) => None,
        })
        .collect();
    let ret = match &decl.sig.output {
        syn::ReturnType::Type(_, t) => CType::of(t),
        syn::ReturnType::Default => CType::Other("()".to_owned()),
    };
    let status = match api {
        Api::Driver => "CUresult",
        Api::Runtime => "cudaError_t",
    };
    if ret != CType::Named(status.to_owned()) {
        return Err(ReadError::UnsupportedReturn {
            api: api.as_str(),
            function: declared,
            ret: ret.to_string(),
            status,
        });
    }
    let doc = types::doc(&decl.attrs)
        .iter()
        .flat_map(|s| s.lines().map(str::to_owned))
        .collect();

    let (name, per_thread_symbol) = match api {
        Api::Runtime => match declared
            .strip_suffix("_ptsz")
            .or_else(|| declared.strip_suffix("_ptds"))
        {
            Some(legacy) => (legacy.to_owned(), Some(declared.clone())),
            None => (declared.clone(), None),
        },
        Api::Driver => (declared.clone(), None),
    };

    // Alias macros: `#define cuX cuX_v2`, `#define cuX __CUDA_API_PTSZ(cuX_v2)`, and the runtime's
    // `#define cudaX __CUDART_API_PTSZ(cudaX)`.
    let targets = match api {
        Api::Driver => vec![name.as_str()],
        // With the per-thread define live, `__CUDART_API_PTSZ(cudaX)` names `cudaX` here.
        Api::Runtime => vec![name.as_str(), declared.as_str()],
    };
    let mut fn_aliases: Vec<String> = (targets.iter())
        .filter_map(|t| lookup.renames.get(t))
        .flatten()
        .filter(|m| **m != name)
        .map(|m| m.to_string())
        .collect();
    fn_aliases.sort();
    fn_aliases.dedup();

    let (base, version, needs, per_thread) = match api {
        Api::Driver => {
            // A declaration without a `_vN` suffix whose suffixed twin is declared too (12.9's
            // `cuEventElapsedTime` beside `cuEventElapsedTime_v2`) is the oldest ABI of its base:
            // a C program calling it links the export of that name, whose semantics are the
            // first version's, even where a newer typedef has the same signature.
            let oldest = (lookup.declared.range::<str, _>(from(&declared)))
                .take_while(|d| d.starts_with(declared.as_str()))
                .any(|d| {
                    d.strip_prefix(declared.as_str())
                        .is_some_and(is_version_suffix)
                });
            let (base, version) = abi_version(&declared, &params, lookup, oldest)?;
            let per_thread = per_thread_version(&declared, &base, &params, lookup);
            // The oldest driver that can be shown to have these ABIs: the first header of the
            // major that declares their typedefs, where newer than the ABI's number. The history
            // holds this major's headers only, so an ABI of an older major keeps its number.
            let first = |typedef: String, abi: u32| {
                history
                    .driver
                    .first(&typedef)
                    .filter(|first| {
                        first.major() == ctk.major() && abi / 1000 == ctk.major() && *first <= ctk
                    })
                    .map(|first| first.cuda_version())
                    .filter(|first| *first > abi)
            };
            let mut needs = first(format!("PFN_{base}_v{version}"), version).unwrap_or(version);
            if let Some(v) = &per_thread {
                let twin = v.symbol.rsplit('_').next().unwrap_or_default();
                let later = first(format!("PFN_{base}_v{}_{twin}", v.version), v.version);
                needs = needs.max(later.unwrap_or(version));
            }
            (base, version, needs, per_thread)
        }
        Api::Runtime => {
            // The runtime exports carry no ABI version: what a function needs is the first
            // runtime of the major that declares it (see crate::history).
            let needs = history
                .runtime
                .first(&name)
                .filter(|first| first.major() == ctk.major() && *first <= ctk)
                .ok_or_else(|| ReadError::NoHistory {
                    function: name.clone(),
                    ctk,
                })?
                .cuda_version();
            let per_thread = per_thread_symbol.map(|symbol| PerThreadVariant {
                symbol,
                version: needs,
            });
            (name.clone(), needs, needs, per_thread)
        }
    };

    Ok(Function {
        name,
        aliases: fn_aliases,
        base,
        version,
        needs,
        per_thread,
        params,
        ret,
        doc,
        deprecated: None,
    })
}

/// Whether `s` is a `_vN` suffix.
fn is_version_suffix(s: &str) -> bool {
    s.strip_prefix("_v")
        .is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
}

/// The bases a declaration's typedefs may be named after: the declared name, and the declared
/// name without its `_vN` suffix (`cuMemcpyHtoD_v2` → `cuMemcpyHtoD`).
fn bases(declared: &str) -> Vec<String> {
    let mut bases = vec![declared.to_owned()];
    if let Some(at) = declared.rfind("_v")
        && is_version_suffix(&declared[at..])
    {
        bases.push(declared[..at].to_owned());
    }
    bases
}

/// Which ABI of `base` the declaration `declared` names: 1 for the bare name, `N` for `_vN`.
fn abi_ordinal(declared: &str, base: &str) -> Option<usize> {
    if declared == base {
        return Some(1);
    }
    let n = declared.strip_prefix(base)?.strip_prefix("_v")?;
    n.bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| n.parse().ok())
        .flatten()
        .filter(|&n| n >= 1)
}

/// The versions of every legacy `PFN_<base>_v<version>` typedef, whatever their signature.
fn typedef_versions(base: &str, lookup: &Lookup<'_>) -> Vec<u32> {
    let prefix = format!("PFN_{base}_v");
    starting_with(lookup.pfns, &prefix)
        .filter_map(|(name, _)| name.strip_prefix(&prefix)?.parse().ok())
        .collect()
}

/// The entries of `map` whose key starts with `prefix`: a range of the sorted keys, not a walk
/// of all (a driver header has about a thousand `PFN_` typedefs, each function looks a few times).
fn starting_with<'m, V>(
    map: &'m BTreeMap<String, V>,
    prefix: &str,
) -> impl Iterator<Item = (&'m String, &'m V)> {
    map.range::<str, _>(from(prefix))
        .take_while(move |(key, _)| key.starts_with(prefix))
}

/// The sorted strings from `first` on.
fn from(first: &str) -> (std::ops::Bound<&str>, std::ops::Bound<&str>) {
    (std::ops::Bound::Included(first), std::ops::Bound::Unbounded)
}

/// The versions `v` of the typedefs `PFN_<base>_v<v><suffix>` whose parameters match `params`.
fn matching_versions(base: &str, suffix: &str, params: &[Param], lookup: &Lookup<'_>) -> Vec<u32> {
    let want: Vec<String> = params
        .iter()
        .map(|p| canonical(&p.ty, lookup.aliases, 0))
        .collect();
    let prefix = format!("PFN_{base}_v");
    starting_with(lookup.pfns, &prefix)
        .filter_map(|(name, f)| {
            let version: u32 = name
                .strip_prefix(&prefix)?
                .strip_suffix(suffix)?
                .parse()
                .ok()?;
            let got: Vec<String> = f
                .iter()
                .map(|ty| canonical(ty, lookup.aliases, 0))
                .collect();
            (got == want).then_some(version)
        })
        .collect()
}

/// Finds the `PFN_<base>_v<version>` typedef whose parameters match the declaration; the base is
/// the declared name, or the declared name without its `_vN` suffix. Among several matches, the
/// highest version wins (a renamed declaration is the newest ABI of its base), or the lowest
/// when `oldest` (an unsuffixed declaration whose suffixed twin is declared too).
fn abi_version(
    declared: &str,
    params: &[Param],
    lookup: &Lookup<'_>,
    oldest: bool,
) -> Result<(String, u32), ReadError> {
    let bases = bases(declared);
    for base in &bases {
        let matching = matching_versions(base, "", params, lookup);
        // The `_vN` suffix counts the ABIs of its base: `cuGraphAddNode_v2` is the second
        // `PFN_cuGraphAddNode_v*` and `_v3` the third (13.5: 12020, 12030, 13040), although
        // `_v2` and `_v3` have one signature. Where that version has the declaration's
        // signature it is the one; otherwise (typedef lists that start late) the rule below.
        if let Some(ordinal) = abi_ordinal(declared, base) {
            let mut all = typedef_versions(base, lookup);
            all.sort_unstable();
            all.dedup();
            if let Some(&version) = all.get(ordinal - 1)
                && matching.contains(&version)
            {
                return Ok((base.clone(), version));
            }
        }
        let versions = matching.into_iter();
        let chosen = if oldest {
            versions.min()
        } else {
            versions.max()
        };
        if let Some(version) = chosen {
            return Ok((base.clone(), version));
        }
    }
    Err(ReadError::NoAbiVersion {
        function: declared.to_owned(),
        base: bases.last().cloned().unwrap_or_default(),
    })
}

/// The per-thread-default-stream variant of a driver declaration: the newest
/// `PFN_<base>_v<version>_ptsz` (or `_ptds`) typedef whose parameters match it. Its export is the
/// declared name with the same suffix (`cuda.h`: `#define cuMemcpyHtoD
/// __CUDA_API_PTDS(cuMemcpyHtoD_v2)`, so `cuMemcpyHtoD_v2_ptds`). Its version is its own and may
/// be newer than the legacy one (`cuStreamAddCallback`: 5000, per-thread 7000); asking the
/// driver for the per-thread variant at the legacy version fails.
fn per_thread_version(
    declared: &str,
    base: &str,
    params: &[Param],
    lookup: &Lookup<'_>,
) -> Option<PerThreadVariant> {
    ["_ptsz", "_ptds"]
        .into_iter()
        .filter_map(|suffix| {
            let version = matching_versions(base, suffix, params, lookup)
                .into_iter()
                .max()?;
            Some(PerThreadVariant {
                symbol: format!("{declared}{suffix}"),
                version,
            })
        })
        .max_by_key(|v| v.version)
}

/// A type's spelling with every alias resolved, so `CUDA_HOST_NODE_PARAMS` and
/// `CUDA_HOST_NODE_PARAMS_v1` compare equal.
fn canonical(ty: &CType, aliases: &HashMap<String, CType>, depth: u32) -> String {
    match ty {
        CType::Pointer { mutable, to } => format!(
            "*{} {}",
            if *mutable { "mut" } else { "const" },
            canonical(to, aliases, depth)
        ),
        CType::Named(name) if depth < 16 && !name.contains("::") => match aliases.get(name) {
            Some(target) => canonical(target, aliases, depth + 1),
            None => name.clone(),
        },
        other => other.to_string(),
    }
}

fn bare_fn_of(ty: &syn::Type) -> Option<syn::TypeFnPtr> {
    // bindgen: `Option<unsafe extern "C" fn(..) -> CUresult>`
    let syn::Type::Path(p) = ty else { return None };
    let last = p.path.segments.last()?;
    let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    match args.args.first()? {
        syn::GenericArgument::Type(syn::Type::FnPtr(f)) => Some(f.clone()),
        _ => None,
    }
}

/// The name an item of bindgen's output is grouped under in the model
/// ([`crate::model::TypeDef::name`]): what it defines, or the type an impl or a layout check is
/// for.
pub fn group_of(item: &syn::Item) -> String {
    match item {
        syn::Item::Struct(s) => s.ident.to_string(),
        syn::Item::Union(u) => u.ident.to_string(),
        syn::Item::Enum(e) => e.ident.to_string(),
        syn::Item::Type(t) => t.ident.to_string(),
        syn::Item::Const(c) if c.ident != "_" => c.ident.to_string(),
        syn::Item::Static(s) => s.ident.to_string(),
        // `impl From<X> for u32`, the writer's conversions (in a generated file), goes with `X`.
        syn::Item::Impl(i) if from_type(i).is_some() => from_type(i).unwrap_or_default(),
        syn::Item::Impl(i) => i.self_ty.to_token_stream().to_string(),
        // bindgen's `pub use self::X_enum as X;` for a typedef of an enumeration.
        syn::Item::Use(syn::ItemUse {
            tree: syn::UseTree::Path(p),
            ..
        }) if matches!(&*p.tree, syn::UseTree::Rename(_)) => match &*p.tree {
            syn::UseTree::Rename(r) => r.rename.to_string(),
            _ => unreachable!("matched above"),
        },
        other => first_generic_type(other).unwrap_or_default(),
    }
}

/// The `X` of `impl From<X> for ..`.
fn from_type(i: &syn::ItemImpl) -> Option<String> {
    let path = &i.trait_.as_ref()?.0;
    let last = path.segments.last().filter(|s| s.ident == "From")?;
    match &last.arguments {
        syn::PathArguments::AngleBracketed(a) => Some(a.args.to_token_stream().to_string()),
        _ => None,
    }
}

/// For bindgen's layout-check blocks: the `T` of the first `size_of::<T>()`.
fn first_generic_type(item: &syn::Item) -> Option<String> {
    struct First(Option<String>);
    impl<'ast> syn::visit::Visit<'ast> for First {
        fn visit_path_segment(&mut self, segment: &'ast syn::PathSegment) {
            if self.0.is_none()
                && segment.ident == "size_of"
                && let syn::PathArguments::AngleBracketed(a) = &segment.arguments
                && let Some(syn::GenericArgument::Type(t)) = a.args.first()
            {
                self.0 = Some(t.to_token_stream().to_string());
            }
            syn::visit::visit_path_segment(self, segment);
        }
    }
    let mut first = First(None);
    syn::visit::Visit::visit_item(&mut first, item);
    first.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// bindgen's items for `name`, grouped as the reader groups them.
    fn grouped(items: Vec<syn::Item>) -> BTreeMap<String, Vec<syn::Item>> {
        let mut types: BTreeMap<String, Vec<syn::Item>> = BTreeMap::new();
        for item in items {
            types.entry(group_of(&item)).or_default().push(item);
        }
        types
    }

    #[test]
    fn the_data_of_a_type_gives_bindgens_items_back() {
        let types = grouped(vec![
            syn::parse_quote! {
                #[doc = " A pair"]
                #[repr(C)]
                #[repr(align(16))]
                #[derive(Debug, Copy, Clone)]
                pub struct pair_st { #[doc = " first"] pub a: *mut pair_st, pub b: [::core::ffi::c_int; 2usize], }
            },
            syn::parse_quote! {
                #[allow(clippy::unnecessary_operation, clippy::identity_op)]
                const _: () = {
                    ["Size of pair_st"][::core::mem::size_of::<pair_st>() - 16usize];
                    ["Alignment of pair_st"][::core::mem::align_of::<pair_st>() - 16usize];
                    ["Offset of field: pair_st::a"][::core::mem::offset_of!(pair_st, a) - 0usize];
                    ["Offset of field: pair_st::b"][::core::mem::offset_of!(pair_st, b) - 8usize];
                };
            },
            syn::parse_quote! {
                impl Default for pair_st {
                    fn default() -> Self {
                        let mut s = ::core::mem::MaybeUninit::<Self>::uninit();
                        unsafe {
                            ::core::ptr::write_bytes(s.as_mut_ptr(), 0, 1);
                            s.assume_init()
                        }
                    }
                }
            },
            syn::parse_quote! { #[doc = " A pair"] pub type pair = pair_st; },
            syn::parse_quote! { pub const PAIR_ONE: u32 = 1; },
            syn::parse_quote! {
                impl side_enum {
                    #[doc = " Left"]
                    pub const SIDE_LEFT: side_enum = side_enum(0);
                    pub const SIDE_RIGHT: side_enum = side_enum(-1);
                }
            },
            syn::parse_quote! {
                #[repr(transparent)]
                #[derive(Debug, Copy, Clone, Hash, PartialEq, Eq)]
                pub struct side_enum(pub ::core::ffi::c_int);
            },
            syn::parse_quote! { pub use self::side_enum as side; },
        ]);
        let (defs, texts) = type_defs(Api::Driver, types).unwrap();
        let names: Vec<&str> = defs.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["PAIR_ONE", "pair", "pair_st", "side", "side_enum"]);
        let crate::model::Definition::Record(r) = &defs[2].definition else {
            panic!("{:?}", defs[2]);
        };
        assert_eq!(
            (r.align, r.zeroed_default, r.fields.len()),
            (Some(16), true, 2)
        );
        assert_eq!(
            r.layout.as_ref().map(|l| l.offsets.clone()),
            Some(vec![("a".to_owned(), 0), ("b".to_owned(), 8)])
        );
        // The enumeration's text holds the writer's conversions into `i32` and `i64`.
        assert!(
            texts[4].text.contains("From < side_enum > for i64"),
            "{}",
            texts[4].text
        );
        assert_eq!(texts[1].uses, ["pair_st"]);
    }

    #[test]
    fn a_type_whose_data_does_not_give_bindgens_items_back_is_named() {
        let types = grouped(vec![
            // `packed` is not in the model's data: the writer would drop it.
            syn::parse_quote! { #[repr(C, packed)] pub struct tight { pub a: u8, } },
            syn::parse_quote! { pub struct fine { pub a: u8, } },
            syn::parse_quote! { #[repr(C)] pub struct fine2 { pub a: u8, } },
            // A doc comment where the data holds none (the enumeration's impl): it would be lost.
            syn::parse_quote! { #[doc = " lost"] impl side { pub const LEFT: side = side(0); } },
            syn::parse_quote! {
                #[repr(transparent)]
                #[derive(Debug)]
                pub struct side(pub ::core::ffi::c_uchar);
            },
        ]);
        let problems = type_defs(Api::Driver, types).unwrap_err();
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(
            problems[0].starts_with("`fine`: the model's data does not give bindgen's items back"),
            "{problems:?}"
        );
        assert!(problems[1].starts_with("`side`: "), "{problems:?}");
        assert!(problems[2].starts_with("`tight`: "), "{problems:?}");
    }

    #[test]
    fn canonical_resolves_aliases() {
        let mut aliases = HashMap::new();
        let of = |ty: syn::Type| CType::of(&ty);
        aliases.insert("A".to_owned(), of(syn::parse_quote!(B)));
        aliases.insert("B".to_owned(), of(syn::parse_quote!(C_st)));
        let ty = of(syn::parse_quote!(*const A));
        assert_eq!(canonical(&ty, &aliases, 0), "*const C_st");
        // Paths and the types a signature does not hold today are spelled, not resolved.
        let ty = of(syn::parse_quote!(*mut ::core::ffi::c_void));
        assert_eq!(
            ty,
            CType::Pointer {
                mutable: true,
                to: Box::new(CType::Named("::core::ffi::c_void".to_owned())),
            }
        );
        assert_eq!(canonical(&ty, &aliases, 0), "*mut ::core::ffi::c_void");
        let ty = of(syn::parse_quote!([A; 4]));
        assert_eq!(canonical(&ty, &aliases, 0), "[A; 4]");
    }
}
