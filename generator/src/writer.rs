//! The writer: turns the model of one API of one target into a Rust file, by filling the
//! wrapper templates in `templates/` (Rust files that syn parses; placeholders are identifiers
//! and literals spelled `__LIKE_THIS__`, filled by a [`VisitMut`]), and writes the module files
//! (a target's `mod.rs` and `layout.rs`, `src/bindings/mod.rs`) from their templates, filled at
//! the token level (see [`Value`]).

use std::path::{Path, PathBuf};

use proc_macro2::{Delimiter, Group, Span, TokenStream, TokenTree};
use quote::ToTokens;
use syn::punctuated::Punctuated;
use syn::visit_mut::{self, VisitMut};

use std::collections::BTreeSet;

use crate::Ctk;
use crate::doc::{self, Links};
use crate::model::{Api, ApiModel, Function, Model, Summary};
use crate::shared::Shared;

/// The template files, read and checked: their text, which each generation parses again
/// ([`Templates::parse`]), so that the configuration holding them can be shared by the worker
/// threads of a regen (a syntax tree cannot cross threads).
#[derive(Clone, Debug)]
pub struct Templates {
    /// `(file name, text)` of each template file.
    sources: Vec<(&'static str, String)>,
    /// Where they were read from.
    dir: PathBuf,
    /// The SHA-256 of `sources` ([`Templates::sha256`]).
    sha256: String,
}

/// The template files, parsed.
#[derive(Clone, Debug)]
pub struct ParsedTemplates {
    driver_function: FunctionTemplate,
    runtime_function: FunctionTemplate,
    file: syn::File,
    host_function_lifetime: Vec<String>,
    target_mod: ModuleTemplate,
    bindings_mod: ModuleTemplate,
    layout: ModuleTemplate,
}

/// The template of one function: its entry point (a static, which goes into the file's `entry`
/// module) and its wrapper.
#[derive(Clone, Debug)]
struct FunctionTemplate {
    entry: syn::ItemStatic,
    wrapper: syn::ItemFn,
}

/// A template that is missing or does not have the expected shape.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    /// The file could not be read.
    #[error("cannot read the template {path}: {source}")]
    Read {
        /// The template.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not Rust syn can parse.
    #[error("the template {path} does not parse as Rust: {source}")]
    Parse {
        /// The template.
        path: PathBuf,
        /// syn's error.
        source: syn::Error,
    },
    /// The file does not hold what the generator expects.
    #[error("the template {path} {problem}")]
    Shape {
        /// The template.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
}

/// The template files a generation reads from `templates/`.
const TEMPLATE_FILES: [&str; 7] = [
    "driver_function.rs",
    "runtime_function.rs",
    "file.rs",
    "host_function_lifetime.md",
    "target_mod.rs",
    "bindings_mod.rs",
    "layout.rs",
];

impl Templates {
    /// Reads the templates from `dir` (the workspace's `templates/`) and checks that they parse
    /// and have the shape the writer expects.
    pub fn load(dir: &Path) -> Result<Self, TemplateError> {
        let (mut sources, mut hashed) = (Vec::new(), Vec::new());
        for name in TEMPLATE_FILES {
            let path = dir.join(name);
            let text = std::fs::read_to_string(&path)
                .map_err(|source| TemplateError::Read { path, source })?;
            for part in [name.as_bytes(), &[0], &(text.len() as u64).to_le_bytes()] {
                hashed.extend_from_slice(part);
            }
            hashed.extend_from_slice(text.as_bytes());
            sources.push((name, text));
        }
        let templates = Templates {
            sources,
            dir: dir.to_path_buf(),
            sha256: crate::inputs::sha256_hex(&hashed),
        };
        templates.try_parse()?;
        Ok(templates)
    }

    /// The SHA-256 (hex) of the template files' bytes as read, which every generation parses:
    /// of each file in turn, its name, a zero byte, its length (8 bytes, little-endian) and its
    /// bytes. Every generated file records it ([`crate::emit::render::RecordedGenerator`]), so
    /// that a template edit, even one that changes no output, makes `cargo xtask check` fail.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// The templates parsed, for one generation (about a millisecond).
    pub fn parse(&self) -> ParsedTemplates {
        self.try_parse()
            .expect("Templates::load parsed the same text and checked its shape")
    }

    fn try_parse(&self) -> Result<ParsedTemplates, TemplateError> {
        let read = |name: &str| -> (PathBuf, &str) {
            let text = self
                .sources
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, text)| text.as_str())
                .expect("every template file is read");
            (self.dir.join(name), text)
        };
        let parse = |name: &str| -> Result<(PathBuf, syn::File), TemplateError> {
            let (path, text) = read(name);
            syn::parse_file(text)
                .map(|f| (path.clone(), f))
                .map_err(|source| TemplateError::Parse { path, source })
        };
        let function = |name: &str| -> Result<FunctionTemplate, TemplateError> {
            let (path, file) = parse(name)?;
            match file.items.as_slice() {
                [syn::Item::Static(entry), syn::Item::Fn(wrapper)] => Ok(FunctionTemplate {
                    entry: entry.clone(),
                    wrapper: wrapper.clone(),
                }),
                _ => Err(TemplateError::Shape {
                    path,
                    problem: "must hold exactly one static (the entry point) and then one function (the wrapper)".to_owned(),
                }),
            }
        };
        let (path, file) = parse("file.rs")?;
        if entry_module(&mut file.clone()).is_none() {
            return Err(TemplateError::Shape {
                path,
                problem: "must hold a module `entry` with a static `ALL`".to_owned(),
            });
        }
        let (_, lifetime) = read("host_function_lifetime.md");
        let module = |name: &str| -> Result<ModuleTemplate, TemplateError> {
            let (path, file) = parse(name)?;
            Ok(ModuleTemplate { path, file })
        };
        Ok(ParsedTemplates {
            driver_function: function("driver_function.rs")?,
            runtime_function: function("runtime_function.rs")?,
            file,
            host_function_lifetime: lifetime.lines().map(str::to_owned).collect(),
            target_mod: module("target_mod.rs")?,
            bindings_mod: module("bindings_mod.rs")?,
            layout: module("layout.rs")?,
        })
    }
}

/// Writes one API of one target as a syntax tree (not yet formatted). The types `shared` names
/// are re-exported from the crate's `common` module ([`crate::shared`]), the others defined here.
pub fn write_api(
    model: &Model,
    api: &ApiModel,
    templates: &ParsedTemplates,
    shared: &BTreeSet<String>,
) -> syn::File {
    let mut file = templates.file.clone();
    let doc = module_doc(model, api.api);
    let status: syn::Type = match api.api {
        Api::Driver => syn::parse_quote!(CUresult),
        Api::Runtime => syn::parse_quote!(cudaError_t),
    };
    let api_value: syn::Expr = match api.api {
        Api::Driver => syn::parse_quote!(crate::error::Api::Driver),
        Api::Runtime => {
            let major = syn::LitInt::new(&model.ctk.major().to_string(), Span::call_site());
            syn::parse_quote!(crate::error::Api::Runtime { major: #major })
        }
    };
    Filler::for_module(doc, status, api_value).visit_file_mut(&mut file);
    // Keep only the loader items this API uses.
    let drop: &[&str] = match api.api {
        Api::Driver => &["RuntimeFn", "runtime_result"],
        Api::Runtime => &["DriverFn", "PerThreadVariant", "driver_result"],
    };
    RemoveUse(drop).visit_file_mut(&mut file);
    // What the headers' comments may link to: every item this file emits.
    let mut links = Links::of_items(api.types.iter().flat_map(|t| &t.items));
    for f in &api.functions {
        links.add_function(&f.name);
        for alias in &f.aliases {
            links.add_function(alias);
        }
    }
    let mut docs = ConvertDocs(&links);
    for ty in &api.types {
        if shared.contains(&ty.name) {
            for name in ty.items.iter().filter_map(item_name) {
                file.items
                    .push(syn::parse_quote!(pub use crate::common::#name;));
            }
            continue;
        }
        for item in &ty.items {
            let mut item = item.clone();
            docs.visit_item_mut(&mut item);
            file.items.push(item);
        }
    }
    let carriers = api.host_function_types();
    let template = match api.api {
        Api::Driver => &templates.driver_function,
        Api::Runtime => &templates.runtime_function,
    };
    let mut entries = Vec::new();
    for f in &api.functions {
        let mut filler = Filler::for_function(model, api.api, f);
        let mut entry = template.entry.clone();
        filler.doc = doc_attrs(&entry_doc(api.api, f));
        filler.visit_item_static_mut(&mut entry);
        entries.push(entry);
        let mut wrapper = template.wrapper.clone();
        filler.doc = doc_attrs(&function_doc(api.api, f, templates, &carriers, &links));
        filler.visit_item_fn_mut(&mut wrapper);
        if let Some(note) = &f.deprecated {
            wrapper.attrs.push(syn::parse_quote!(#[deprecated = #note]));
        }
        file.items.push(syn::Item::Fn(wrapper));
        for alias in &f.aliases {
            let target = ident(&f.name);
            let alias_ident = ident(alias);
            let doc = format!(
                " `{alias}`: the C name that `cuda.h`/`cuda_runtime_api.h` maps onto [`{}`].",
                f.name
            );
            // A use of the alias still warns: it resolves to the deprecated wrapper.
            let allow: Option<syn::Attribute> = f
                .deprecated
                .as_ref()
                .map(|_| syn::parse_quote!(#[allow(deprecated)]));
            file.items.push(syn::parse_quote! {
                #[doc = #doc]
                #allow
                pub use self::#target as #alias_ident;
            });
        }
    }
    let items = entry_module(&mut file).expect("Templates::load checked the entry module");
    let at = items
        .iter()
        .position(|i| matches!(i, syn::Item::Static(s) if s.ident == "ALL"))
        .expect("Templates::load checked `ALL`");
    let syn::Item::Static(mut all) = items.remove(at) else {
        unreachable!("found as a static above")
    };
    let names = api.functions.iter().map(|f| ident(&f.name));
    all.expr = Box::new(syn::parse_quote!(&[#(&#names),*]));
    items.extend(entries.into_iter().map(syn::Item::Static));
    items.push(syn::Item::Static(all));
    file
}

/// The name a type item defines (none for an impl or a layout check).
fn item_name(item: &syn::Item) -> Option<&syn::Ident> {
    match item {
        syn::Item::Struct(s) => Some(&s.ident),
        syn::Item::Union(u) => Some(&u.ident),
        syn::Item::Enum(e) => Some(&e.ident),
        syn::Item::Type(t) => Some(&t.ident),
        syn::Item::Const(c) if c.ident != "_" => Some(&c.ident),
        syn::Item::Static(s) => Some(&s.ident),
        syn::Item::Use(syn::ItemUse {
            tree: syn::UseTree::Path(p),
            ..
        }) => match &*p.tree {
            syn::UseTree::Rename(r) => Some(&r.rename),
            _ => None,
        },
        _ => None,
    }
}

/// Writes the crate's `common` module: every shared type's definition ([`crate::shared`]), with
/// the lint settings of the file template, as a syntax tree (not yet formatted).
pub fn write_common(shared: &Shared, templates: &ParsedTemplates) -> syn::File {
    let mut items = Vec::new();
    for text in shared.definitions.values() {
        let file: syn::File = syn::parse_str(text).expect("a summary's types are bindgen's items");
        items.extend(file.items);
    }
    let links = Links::of_items(&items);
    let mut docs = ConvertDocs(&links);
    for item in &mut items {
        docs.visit_item_mut(item);
    }
    let doc = [
        "The types whose C definition is the same in every target of `generator/targets.txt` and",
        "in both APIs, defined once: each target's `driver` and `runtime` module re-exports the",
        "ones its headers declare, under their C names, so `CUstream` of one target is",
        "`cudaStream_t` of every target, as in C. A type whose definition differs between targets",
        "(`cargo xtask diff` lists how) is defined in each target's modules instead.",
    ]
    .join("\n");
    let mut attrs: Vec<syn::Attribute> = vec![syn::parse_quote!(#![doc = #doc])];
    attrs.extend(
        templates
            .file
            .attrs
            .iter()
            .filter(|a| !a.path().is_ident("doc"))
            .cloned(),
    );
    let mut file = templates.file.clone();
    file.attrs = attrs;
    file.items = items;
    file
}

/// The items of the `entry` module of a file template, if it has one with a static `ALL`.
fn entry_module(file: &mut syn::File) -> Option<&mut Vec<syn::Item>> {
    let items = file.items.iter_mut().find_map(|i| match i {
        syn::Item::Mod(m) if m.ident == "entry" => m.content.as_mut().map(|(_, items)| items),
        _ => None,
    })?;
    items
        .iter()
        .any(|i| matches!(i, syn::Item::Static(s) if s.ident == "ALL"))
        .then_some(items)
}

fn module_doc(model: &Model, api: Api) -> Vec<String> {
    let (what, lib) = match api {
        Api::Driver => ("driver", "`libcuda.so.1`".to_owned()),
        Api::Runtime => ("runtime", format!("`{}`", model.ctk.runtime_soname())),
    };
    vec![
        format!(
            " CUDA {what} API bindings for CTK {}: every function the header declares (less the deny-list's few), and every type and constant they reach.",
            model.ctk
        ),
        String::new(),
        format!(
            " Generated from the CTK {} headers (see `provenance.toml` beside this file). Every function is",
            model.ctk
        ),
        format!(" resolved from {lib} on its first call; one the installed library lacks returns"),
        " [`Error::Unavailable`] instead of failing to load.".to_owned(),
    ]
}

fn c_literal(s: &str) -> syn::LitCStr {
    syn::LitCStr::new(
        &std::ffi::CString::new(s).expect("C identifiers have no NUL"),
        Span::call_site(),
    )
}

fn ident(name: &str) -> syn::Ident {
    syn::Ident::new(name, Span::call_site())
}

/// One `#[doc]` per Markdown line, each non-empty one after a space (as `///` writes it).
fn doc_attrs(lines: &[String]) -> Vec<syn::Attribute> {
    lines
        .iter()
        .map(|l| {
            let l = if l.is_empty() {
                String::new()
            } else {
                format!(" {l}")
            };
            syn::parse_quote!(#[doc = #l])
        })
        .collect()
}

/// Converts the headers' Doxygen on bindgen's items (types, fields, constants) to Markdown, one
/// `#[doc]` per line, in place of bindgen's one `#[doc]` per comment.
struct ConvertDocs<'a>(&'a Links);

impl ConvertDocs<'_> {
    fn convert(&self, attrs: &mut Vec<syn::Attribute>) {
        let mut text = Vec::new();
        let mut at = None;
        let mut kept = Vec::with_capacity(attrs.len());
        for a in attrs.drain(..) {
            let value = match (&a.style, &a.meta) {
                (syn::AttrStyle::Outer, syn::Meta::NameValue(nv)) if nv.path.is_ident("doc") => {
                    match &nv.value {
                        syn::Expr::Lit(syn::ExprLit {
                            lit: syn::Lit::Str(s),
                            ..
                        }) => Some(s.value()),
                        _ => None,
                    }
                }
                _ => None,
            };
            match value {
                Some(v) => {
                    at.get_or_insert(kept.len());
                    text.push(v);
                }
                None => kept.push(a),
            }
        }
        if let Some(at) = at {
            let lines = doc::to_markdown(&text.join("\n"), self.0);
            kept.splice(at..at, doc_attrs(&lines));
        }
        *attrs = kept;
    }
}

impl VisitMut for ConvertDocs<'_> {
    fn visit_item_mut(&mut self, item: &mut syn::Item) {
        match item {
            syn::Item::Const(i) => self.convert(&mut i.attrs),
            syn::Item::Enum(i) => self.convert(&mut i.attrs),
            syn::Item::Fn(i) => self.convert(&mut i.attrs),
            syn::Item::Static(i) => self.convert(&mut i.attrs),
            syn::Item::Struct(i) => self.convert(&mut i.attrs),
            syn::Item::Type(i) => self.convert(&mut i.attrs),
            syn::Item::Union(i) => self.convert(&mut i.attrs),
            syn::Item::Use(i) => self.convert(&mut i.attrs),
            _ => {}
        }
        visit_mut::visit_item_mut(self, item);
    }

    fn visit_field_mut(&mut self, field: &mut syn::Field) {
        self.convert(&mut field.attrs);
        visit_mut::visit_field_mut(self, field);
    }

    fn visit_variant_mut(&mut self, variant: &mut syn::Variant) {
        self.convert(&mut variant.attrs);
        visit_mut::visit_variant_mut(self, variant);
    }

    fn visit_impl_item_mut(&mut self, member: &mut syn::ImplItem) {
        match member {
            syn::ImplItem::Const(i) => self.convert(&mut i.attrs),
            syn::ImplItem::Fn(i) => self.convert(&mut i.attrs),
            syn::ImplItem::Type(i) => self.convert(&mut i.attrs),
            _ => {}
        }
        visit_mut::visit_impl_item_mut(self, member);
    }
}

/// Where a function is resolved from, for its docs.
fn resolution(api: Api, f: &Function) -> String {
    let from = resolved_from(api, f);
    match api {
        Api::Driver if f.needs > f.version => format!(
            "{from}, on a driver of CUDA {}.{} or newer (the first whose `cudaTypedefs.h` declares that ABI; an older one is refused, since it may answer with an older ABI of the name)",
            f.needs / 1000,
            f.needs % 1000 / 10
        ),
        _ => from,
    }
}

fn resolved_from(api: Api, f: &Function) -> String {
    match (api, &f.per_thread) {
        (Api::Driver, None) => format!("`cuGetProcAddress(\"{}\", {})`", f.base, f.version),
        (Api::Driver, Some(pt)) => format!(
            "`cuGetProcAddress(\"{}\", {})`, or under per-thread default stream semantics at version {} (the export `{}`)",
            f.base, f.version, pt.version, pt.symbol
        ),
        (Api::Runtime, None) => format!("the export `{}`", f.name),
        (Api::Runtime, Some(pt)) => format!(
            "the export `{}` (`{}` under per-thread default stream semantics)",
            f.name, pt.symbol
        ),
    }
}

/// The doc comment of a function's entry point.
fn entry_doc(api: Api, f: &Function) -> Vec<String> {
    vec![format!(
        "The entry point of [`{name}`](super::{name}), resolved on first use from {}.",
        resolution(api, f),
        name = f.name
    )]
}

fn function_doc(
    api: Api,
    f: &Function,
    templates: &ParsedTemplates,
    carriers: &BTreeSet<String>,
    links: &Links,
) -> Vec<String> {
    let mut doc = doc::to_markdown(&f.doc.join("\n"), links);
    while doc.last().is_some_and(|l| l.trim().is_empty()) {
        doc.pop();
    }
    if !doc.is_empty() {
        doc.push(String::new());
    }
    doc.push("# Binding".to_owned());
    doc.push(String::new());
    doc.push(format!("Resolved from {}.", resolution(api, f)));
    doc.push(String::new());
    doc.push(
        "# Safety\n\nThe caller upholds the contract of the C function: valid handles and pointers.".to_owned(),
    );
    if f.takes_host_function(carriers) {
        doc.push(String::new());
        doc.extend(templates.host_function_lifetime.iter().cloned());
    }
    doc.into_iter()
        .flat_map(|l| match l.is_empty() {
            true => vec![String::new()],
            false => l.lines().map(str::to_owned).collect(),
        })
        .collect()
}

/// Removes named items from a `use` tree.
struct RemoveUse<'a>(&'a [&'a str]);

impl VisitMut for RemoveUse<'_> {
    fn visit_use_group_mut(&mut self, group: &mut syn::UseGroup) {
        let kept: Punctuated<syn::UseTree, syn::Token![,]> = group
            .items
            .iter()
            .filter(|t| !matches!(t, syn::UseTree::Name(n) if self.0.iter().any(|d| n.ident == d)))
            .cloned()
            .collect();
        group.items = kept;
    }
}

/// Fills a template's placeholders.
struct Filler {
    doc: Vec<syn::Attribute>,
    name: Option<String>,
    base: String,
    params: Vec<(syn::Ident, syn::Type)>,
    ret: Option<syn::Type>,
    version: u32,
    needs: u32,
    major: u32,
    per_thread: Option<syn::Expr>,
    api: Option<syn::Expr>,
}

impl Filler {
    /// The filler of a file's template: its documentation, `__Ret__`, the API's status type, and
    /// `__API__`, the API as `crate::error::Api` names it.
    fn for_module(doc: Vec<String>, status: syn::Type, api: syn::Expr) -> Self {
        Filler {
            doc: doc
                .iter()
                .map(|l| syn::parse_quote!(#![doc = #l]))
                .collect(),
            name: None,
            base: String::new(),
            params: Vec::new(),
            ret: Some(status),
            version: 0,
            needs: 0,
            major: 0,
            per_thread: None,
            api: Some(api),
        }
    }

    fn for_function(model: &Model, api: Api, f: &Function) -> Self {
        let per_thread: syn::Expr = match (api, &f.per_thread) {
            (_, None) => syn::parse_quote!(None),
            (Api::Driver, Some(pt)) => {
                let version = syn::LitInt::new(&pt.version.to_string(), Span::call_site());
                let symbol = c_literal(&pt.symbol);
                syn::parse_quote!(Some(PerThreadVariant { version: #version, symbol: #symbol }))
            }
            (Api::Runtime, Some(pt)) => {
                let symbol = c_literal(&pt.symbol);
                syn::parse_quote!(Some(#symbol))
            }
        };
        Filler {
            doc: Vec::new(),
            name: Some(f.name.clone()),
            base: f.base.clone(),
            params: f
                .params
                .iter()
                .map(|p| (ident(&p.name), p.ty.clone()))
                .collect(),
            ret: Some(f.ret.clone()),
            version: f.version,
            needs: f.needs,
            major: model.ctk.major(),
            per_thread: Some(per_thread),
            api: None,
        }
    }

    fn is_placeholder(path: &syn::Path, name: &str) -> bool {
        path.is_ident(name)
    }

    fn replace_doc(&self, attrs: &mut Vec<syn::Attribute>) {
        let mut out = Vec::with_capacity(attrs.len() + self.doc.len());
        for a in attrs.drain(..) {
            let is_doc_placeholder = a.to_token_stream().to_string().contains("\"__DOC__\"");
            if is_doc_placeholder {
                out.extend(self.doc.iter().cloned());
            } else {
                out.push(a);
            }
        }
        *attrs = out;
    }
}

impl VisitMut for Filler {
    fn visit_file_mut(&mut self, file: &mut syn::File) {
        self.replace_doc(&mut file.attrs);
        visit_mut::visit_file_mut(self, file);
    }

    fn visit_item_fn_mut(&mut self, f: &mut syn::ItemFn) {
        self.replace_doc(&mut f.attrs);
        visit_mut::visit_item_fn_mut(self, f);
    }

    fn visit_item_static_mut(&mut self, s: &mut syn::ItemStatic) {
        self.replace_doc(&mut s.attrs);
        visit_mut::visit_item_static_mut(self, s);
    }

    fn visit_ident_mut(&mut self, i: &mut syn::Ident) {
        if let Some(name) = &self.name
            && i == "__name__"
        {
            *i = ident(name);
        }
    }

    fn visit_signature_mut(&mut self, sig: &mut syn::Signature) {
        let is_params = sig.inputs.iter().any(|a| {
            matches!(a, syn::FnArg::Typed(p) if p.pat.to_token_stream().to_string() == "__params__")
        });
        if is_params {
            sig.inputs = self
                .params
                .iter()
                .map(|(n, t)| -> syn::FnArg { syn::parse_quote!(#n: #t) })
                .collect();
        }
        visit_mut::visit_signature_mut(self, sig);
    }

    fn visit_type_fn_ptr_mut(&mut self, f: &mut syn::TypeFnPtr) {
        let is_types = f
            .inputs
            .iter()
            .any(|a| a.ty.to_token_stream().to_string() == "__ParamTypes__");
        if is_types {
            f.inputs = self
                .params
                .iter()
                .map(|(_, t)| -> syn::NamedArg { syn::parse_quote!(#t) })
                .collect();
        }
        visit_mut::visit_type_fn_ptr_mut(self, f);
    }

    fn visit_type_mut(&mut self, t: &mut syn::Type) {
        if let (syn::Type::Path(p), Some(ret)) = (&*t, &self.ret)
            && Self::is_placeholder(&p.path, "__Ret__")
        {
            *t = ret.clone();
            return;
        }
        visit_mut::visit_type_mut(self, t);
    }

    fn visit_expr_call_mut(&mut self, call: &mut syn::ExprCall) {
        let is_args = call
            .args
            .iter()
            .any(|a| matches!(a, syn::Expr::Path(p) if Self::is_placeholder(&p.path, "__args__")));
        if is_args {
            call.args = self
                .params
                .iter()
                .map(|(n, _)| -> syn::Expr { syn::parse_quote!(#n) })
                .collect();
        }
        visit_mut::visit_expr_call_mut(self, call);
    }

    fn visit_expr_mut(&mut self, e: &mut syn::Expr) {
        if let syn::Expr::Path(p) = &*e {
            let replacement: Option<syn::Expr> = if Self::is_placeholder(&p.path, "__VERSION__") {
                let v = syn::LitInt::new(&self.version.to_string(), Span::call_site());
                Some(syn::parse_quote!(#v))
            } else if Self::is_placeholder(&p.path, "__NEEDS__") {
                let v = syn::LitInt::new(&self.needs.to_string(), Span::call_site());
                Some(syn::parse_quote!(#v))
            } else if Self::is_placeholder(&p.path, "__MAJOR__") {
                let v = syn::LitInt::new(&self.major.to_string(), Span::call_site());
                Some(syn::parse_quote!(#v))
            } else if Self::is_placeholder(&p.path, "__PER_THREAD__") {
                self.per_thread.clone()
            } else if Self::is_placeholder(&p.path, "__API__") {
                self.api.clone()
            } else {
                None
            };
            if let Some(r) = replacement {
                *e = r;
                return;
            }
        }
        visit_mut::visit_expr_mut(self, e);
    }

    fn visit_lit_mut(&mut self, lit: &mut syn::Lit) {
        let Some(name) = &self.name else { return };
        match lit {
            syn::Lit::Str(s) if s.value() == "__name__" => {
                *s = syn::LitStr::new(name, s.span());
            }
            syn::Lit::CStr(s) => {
                let value = s.value();
                let replacement = match value.to_bytes() {
                    b"__name__" => name.as_str(),
                    b"__base__" => self.base.as_str(),
                    _ => return,
                };
                *s = syn::LitCStr::new(
                    &std::ffi::CString::new(replacement).expect("C identifiers have no NUL"),
                    s.span(),
                );
            }
            _ => {}
        }
    }
}

/// Whether `text` is spelled like a template placeholder, `__LIKE_THIS__`.
fn placeholder(text: &str) -> bool {
    text.len() > 4
        && text.starts_with("__")
        && text.ends_with("__")
        && text[2..text.len() - 2]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// A module template (`target_mod.rs`, `bindings_mod.rs`, `layout.rs`): a Rust file whose
/// placeholders [`ModuleTemplate::fill`] fills at the token level, so that they may stand in macro
/// bodies and attributes too.
#[derive(Clone, Debug)]
struct ModuleTemplate {
    path: PathBuf,
    file: syn::File,
}

/// The value of a placeholder `__X__` of a module template, and where it goes.
#[derive(Clone, Debug)]
pub enum Value {
    /// Text: in place of the word `__X__` in a string literal or doc comment and, as the Rust
    /// tokens it spells, of the identifier `__X__`.
    Text(String),
    /// Rows: `__X__! { .. }` becomes what its braces hold, once per row, filled with the row's
    /// values (then with the enclosing ones).
    Each(Vec<Values>),
}

/// The values of a module template's placeholders, by name.
pub type Values = Vec<(&'static str, Value)>;

/// The placeholder `name`'s value `text` ([`Value::Text`]).
pub fn text(name: &'static str, text: impl ToString) -> (&'static str, Value) {
    (name, Value::Text(text.to_string()))
}

/// The rows of doc lines, each line the value of `__LINE__`: for `__X__! { #![doc = "__LINE__"] }`.
pub fn doc_lines(lines: Vec<String>) -> Value {
    Value::Each(
        lines
            .into_iter()
            .map(|l| vec![text("__LINE__", l)])
            .collect(),
    )
}

impl ModuleTemplate {
    /// The template filled with `values` (see [`Value`]); every placeholder it names must have one.
    fn fill(&self, values: &Values) -> Result<syn::File, TemplateError> {
        let mut unfilled = BTreeSet::new();
        let tokens = fill_tokens(self.file.to_token_stream(), &[values], &mut unfilled);
        let problem = match syn::parse2(tokens) {
            _ if !unfilled.is_empty() => format!(
                "names the placeholder(s) {}, which the writer has no value for: fix their spelling (its header lists those it fills)",
                unfilled.into_iter().collect::<Vec<_>>().join(", ")
            ),
            Ok(file) => return Ok(file),
            Err(e) => format!("does not parse as Rust once filled: {e}"),
        };
        Err(TemplateError::Shape {
            path: self.path.clone(),
            problem,
        })
    }
}

/// Fills the placeholders of `tokens` with their values in `scopes` (the innermost last), and
/// adds each that has none (or one of the wrong kind) to `unfilled`.
fn fill_tokens(
    tokens: TokenStream,
    scopes: &[&Values],
    unfilled: &mut BTreeSet<String>,
) -> TokenStream {
    let value = |name: &str| {
        scopes
            .iter()
            .rev()
            .find_map(|s| s.iter().find(|(n, _)| *n == name).map(|(_, v)| v))
    };
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    let mut out = TokenStream::new();
    let mut i = 0;
    while i < trees.len() {
        let tree = &trees[i];
        i += 1;
        match tree {
            TokenTree::Ident(id) if placeholder(&id.to_string()) => {
                let name = id.to_string();
                match (value(&name), trees.get(i), trees.get(i + 1)) {
                    (
                        Some(Value::Each(rows)),
                        Some(TokenTree::Punct(bang)),
                        Some(TokenTree::Group(body)),
                    ) if bang.as_char() == '!' && body.delimiter() == Delimiter::Brace => {
                        for row in rows {
                            let inner: Vec<&Values> = scopes.iter().copied().chain([row]).collect();
                            out.extend(fill_tokens(body.stream(), &inner, unfilled));
                        }
                        i += 2;
                    }
                    (Some(Value::Text(text)), ..) => match text.parse::<TokenStream>() {
                        Ok(tokens) => out.extend(tokens),
                        Err(_) => drop(unfilled.insert(format!("{name} (no Rust tokens)"))),
                    },
                    _ => {
                        unfilled.insert(name);
                        out.extend([tree.clone()]);
                    }
                }
            }
            TokenTree::Group(g) => {
                let mut group =
                    Group::new(g.delimiter(), fill_tokens(g.stream(), scopes, unfilled));
                group.set_span(g.span());
                out.extend([TokenTree::Group(group)]);
            }
            TokenTree::Literal(lit) => match syn::Lit::new(lit.clone()) {
                // The words of a string literal spelled like placeholders.
                syn::Lit::Str(s) if PLACEHOLDER.is_match(&s.value()) => {
                    let text = s.value();
                    let filled = PLACEHOLDER.replace_all(&text, |w: &regex::Captures| {
                        if let Some(Value::Text(text)) = value(&w[0]) {
                            return text.clone();
                        }
                        unfilled.insert(w[0].to_owned());
                        w[0].to_owned()
                    });
                    out.extend([TokenTree::Literal(proc_macro2::Literal::string(&filled))]);
                }
                _ => out.extend([tree.clone()]),
            },
            _ => out.extend([tree.clone()]),
        }
    }
    out
}

/// A word of a string literal spelled like a placeholder.
static PLACEHOLDER: std::sync::LazyLock<regex::Regex> =
    std::sync::LazyLock::new(|| regex::Regex::new(r"\b__\w+__\b").expect("a valid regex"));

/// Fails on any identifier or literal of `file` (macro bodies and doc attributes included) that
/// is still spelled like a template placeholder, `__LIKE_THIS__`: a misspelt placeholder (`__bsae__`)
/// that the writer did not fill, which would otherwise compile into the output. Sorted, each once.
pub fn unfilled_placeholders(file: &syn::File) -> Vec<String> {
    fn walk(tokens: TokenStream, found: &mut Vec<String>) {
        for token in tokens {
            match token {
                TokenTree::Group(g) => walk(g.stream(), found),
                TokenTree::Ident(i) if placeholder(&i.to_string()) => found.push(i.to_string()),
                TokenTree::Literal(l) => {
                    // The text between the quotes of a string, byte string or C string.
                    let text = l.to_string();
                    if let (Some(a), Some(b)) = (text.find('"'), text.rfind('"'))
                        && a < b
                        && placeholder(&text[a + 1..b])
                    {
                        found.push(text);
                    }
                }
                _ => {}
            }
        }
    }
    let mut found = Vec::new();
    walk(quote::ToTokens::to_token_stream(file), &mut found);
    found.sort();
    found.dedup();
    found
}

/// What a target offers beyond the common API, named in its `for_each_target!` entry so that
/// code written once for every target can add what only some have.
pub fn capabilities(model: &Model) -> Vec<&'static str> {
    let has = |api: &ApiModel, name: &str| api.functions.iter().any(|f| f.name == name);
    let mut caps = Vec::new();
    if has(&model.driver, "cuLaunchHostFunc_v2") && has(&model.runtime, "cudaLaunchHostFunc_v2") {
        caps.push("host_func_v2");
    }
    if has(&model.driver, "cuStreamGetCaptureInfo_v3") {
        caps.push("capture_info_v3");
    }
    if [
        "cudaLibraryLoadData",
        "cudaLibraryGetKernel",
        "cudaLibraryUnload",
    ]
    .iter()
    .all(|f| has(&model.runtime, f))
    {
        caps.push("runtime_library");
    }
    caps
}

/// The values of one target's placeholders in the module templates: `__CTK__`, `__MODULE__`,
/// `__FEATURE__`, `__PART__` (its part of `for_each_target!`).
fn target_values(ctk: Ctk) -> Values {
    vec![
        text("__CTK__", ctk),
        text("__MODULE__", ctk.module()),
        text("__FEATURE__", ctk.feature()),
        text("__PART__", format!("__hostcb_target_{}", ctk.module())),
    ]
}

/// A target's own `mod.rs` (`templates/target_mod.rs`): its two API modules, its part of
/// `for_each_target!`, which hands `<module>, "<MAJOR.MINOR>", <runtime major>, [<capabilities>]`
/// to a callback macro, and its layout test module, under `machine`, the `#[cfg]` predicate of
/// the machines whose C layout the oracle computed.
pub fn write_target_mod(
    model: &Model,
    machine: &str,
    templates: &ParsedTemplates,
) -> Result<syn::File, TemplateError> {
    let mut values = target_values(model.ctk);
    values.extend([
        text("__MAJOR__", model.ctk.major()),
        text("__SONAME__", model.ctk.runtime_soname()),
        text("__CAPABILITIES__", capabilities(model).join(" ")),
        text("__MACHINE__", machine),
    ]);
    templates.target_mod.fill(&values)
}

/// `src/bindings/mod.rs` (`templates/bindings_mod.rs`): one module per target behind its
/// feature, an empty stand-in for the part of `for_each_target!` of each target whose feature is
/// off, `for_each_target!`, the documentation-only module `compatibility` with the
/// [`compatibility_table`] of the targets, and `newest_target!` and `newest_target_of_major!`,
/// which hand-written code that needs one target (or one per runtime library) uses so that it
/// names none. `models` holds one model per target of `generator/targets.txt`, oldest first.
pub fn write_bindings_mod(
    models: &[&Summary],
    templates: &ParsedTemplates,
) -> Result<syn::File, TemplateError> {
    let targets: Vec<Ctk> = models.iter().map(|m| m.ctk).collect();
    let newest = targets.last().copied();
    // The newest target of each major, or the newest target where none has it.
    let majors = [12u32, 13].into_iter().filter_map(|major| {
        let ctk = targets.iter().rev().find(|c| c.major() == major).copied();
        let mut row = target_values(ctk.or(newest)?);
        row.push(text("__MAJOR__", major));
        Some(row)
    });
    let values = vec![
        text("__TARGETS__", crate::target::spelled(&targets)),
        ("__TABLE__", doc_lines(compatibility_table(models))),
        (
            "__EACH_TARGET__",
            Value::Each(targets.iter().map(|&c| target_values(c)).collect()),
        ),
        (
            "__NEWEST_TARGET__",
            Value::Each(newest.map(target_values).into_iter().collect()),
        ),
        ("__EACH_MAJOR__", Value::Each(majors.collect())),
    ];
    templates.bindings_mod.fill(&values)
}

/// A target's `layout.rs` (`templates/layout.rs`) from the layout oracle's `values`
/// ([`crate::layout::Oracle`]).
pub fn write_layout(
    values: &Values,
    templates: &ParsedTemplates,
) -> Result<syn::File, TemplateError> {
    templates.layout.fill(values)
}

/// The compatibility table: for each API, one row per function that some target declares
/// (sorted by name) and one column per target (oldest first), each cell the ABI version that
/// target's headers give the function, `—` where they do not declare it. Driver cells are the
/// `cuGetProcAddress` version of `cudaTypedefs.h`, `legacy / per-thread` where the function has
/// a per-thread-default-stream variant; runtime cells are the version of the first runtime of
/// the target's major that declares the function. Markdown doc lines, each starting
/// with a space.
pub fn compatibility_table(models: &[&Summary]) -> Vec<String> {
    let mut lines = vec![
        " Which function each target's headers declare, and at which ABI version: one row per"
            .to_owned(),
        " function (its ABI symbol) that some target of `generator/targets.txt` declares, one"
            .to_owned(),
        " column per target, `—` where that target's headers do not declare it. Generated by"
            .to_owned(),
        " `cargo xtask regen` from the models of the targets; `cargo xtask diff A B` compares any"
            .to_owned(),
        " two pinned targets in full (types, fields, enum values).".to_owned(),
    ];
    for api in [Api::Driver, Api::Runtime] {
        lines.push(String::new());
        match api {
            Api::Driver => {
                lines.push(" # Driver API".to_owned());
                lines.push(String::new());
                lines.push(
                    " The version each wrapper passes to `cuGetProcAddress`, from the header's"
                        .to_owned(),
                );
                lines.push(
                    " `PFN_<name>_v<version>` typedefs; `a / b`: `a` legacy, `b` under per-thread"
                        .to_owned(),
                );
                lines.push(" default stream semantics (`_ptsz` / `_ptds`).".to_owned());
            }
            Api::Runtime => {
                lines.push(" # Runtime API".to_owned());
                lines.push(String::new());
                lines.push(
                    " Runtime functions are resolved by symbol (the exports carry no ABI version);"
                        .to_owned(),
                );
                lines.push(
                    " the version is the first runtime of the target's major whose pinned"
                        .to_owned(),
                );
                lines.push(
                    " `cuda_runtime_api.h` declares the function: the `libcudart` it needs."
                        .to_owned(),
                );
            }
        }
        lines.push(String::new());
        let header: Vec<String> = models.iter().map(|m| m.ctk.to_string()).collect();
        lines.push(format!(" | function | {} |", header.join(" | ")));
        lines.push(format!(" | --- |{}", " ---: |".repeat(models.len())));
        let names: BTreeSet<&str> = models
            .iter()
            .flat_map(|m| m.api(api).iter().map(|(name, _)| name.as_str()))
            .collect();
        for name in names {
            let cells: Vec<&str> = models
                .iter()
                .map(|m| {
                    let column = m.api(api);
                    match column.binary_search_by(|(n, _)| n.as_str().cmp(name)) {
                        Ok(i) => column[i].1.as_str(),
                        Err(_) => "—",
                    }
                })
                .collect();
            lines.push(format!(" | `{name}` | {} |", cells.join(" | ")));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_templates_hash_is_of_the_template_bytes_read() {
        let real = Path::new(env!("CARGO_MANIFEST_DIR")).join("../templates");
        let dir = tempfile::tempdir().unwrap();
        for name in TEMPLATE_FILES {
            std::fs::copy(real.join(name), dir.path().join(name)).unwrap();
        }
        let hash = Templates::load(dir.path()).unwrap().sha256().to_owned();
        assert_eq!(hash.len(), 64);
        assert_eq!(Templates::load(&real).unwrap().sha256(), hash);
        // A file beside them that is no template is not read, so not hashed.
        std::fs::write(dir.path().join("notes.md"), "notes").unwrap();
        assert_eq!(Templates::load(dir.path()).unwrap().sha256(), hash);
        // A comment changes no generated code, but it is a byte of a template the generator read.
        let layout = dir.path().join("layout.rs");
        let text = std::fs::read_to_string(&layout).unwrap();
        std::fs::write(&layout, format!("{text}// a comment\n")).unwrap();
        assert_ne!(Templates::load(dir.path()).unwrap().sha256(), hash);
    }
}
