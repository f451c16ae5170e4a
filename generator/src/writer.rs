//! The writer: turns the model of one API of one target into a Rust file, by filling the
//! wrapper templates in `templates/` (Rust files that syn parses; placeholders are identifiers
//! and literals spelled `__LIKE_THIS__`, filled by a [`VisitMut`]).

use std::path::{Path, PathBuf};

use proc_macro2::Span;
use quote::ToTokens;
use syn::punctuated::Punctuated;
use syn::visit_mut::{self, VisitMut};

use crate::model::{Api, ApiModel, Function, Model, PerThread};

/// The template files, parsed.
#[derive(Clone, Debug)]
pub struct Templates {
    driver_function: syn::ItemFn,
    runtime_function: syn::ItemFn,
    file: syn::File,
    host_function_lifetime: Vec<String>,
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

impl Templates {
    /// Reads the templates from `dir` (the workspace's `templates/`).
    pub fn load(dir: &Path) -> Result<Self, TemplateError> {
        let read = |name: &str| -> Result<(PathBuf, String), TemplateError> {
            let path = dir.join(name);
            std::fs::read_to_string(&path)
                .map(|text| (path.clone(), text))
                .map_err(|source| TemplateError::Read { path, source })
        };
        let parse = |name: &str| -> Result<(PathBuf, syn::File), TemplateError> {
            let (path, text) = read(name)?;
            syn::parse_file(&text)
                .map(|f| (path.clone(), f))
                .map_err(|source| TemplateError::Parse { path, source })
        };
        let function = |name: &str| -> Result<syn::ItemFn, TemplateError> {
            let (path, file) = parse(name)?;
            match file.items.as_slice() {
                [syn::Item::Fn(f)] => Ok(f.clone()),
                _ => Err(TemplateError::Shape {
                    path,
                    problem: "must hold exactly one function".to_owned(),
                }),
            }
        };
        let (_, lifetime) = read("host_function_lifetime.md")?;
        Ok(Templates {
            driver_function: function("driver_function.rs")?,
            runtime_function: function("runtime_function.rs")?,
            file: parse("file.rs")?.1,
            host_function_lifetime: lifetime.lines().map(str::to_owned).collect(),
        })
    }
}

/// Writes one API of one target as a syntax tree (not yet formatted).
pub fn write_api(model: &Model, api: &ApiModel, templates: &Templates) -> syn::File {
    let mut file = templates.file.clone();
    let doc = module_doc(model, api.api);
    Filler::for_module(doc).visit_file_mut(&mut file);
    // Keep only the loader items this API uses.
    let drop = match api.api {
        Api::Driver => ["RuntimeFn", "runtime_result"],
        Api::Runtime => ["DriverFn", "driver_result"],
    };
    for item in &mut file.items {
        if let syn::Item::Use(u) = item {
            RemoveUse(&drop).visit_item_use_mut(u);
        }
    }
    for ty in &api.types {
        file.items.extend(ty.items.iter().cloned());
    }
    for f in &api.functions {
        let template = match api.api {
            Api::Driver => &templates.driver_function,
            Api::Runtime => &templates.runtime_function,
        };
        let mut item = template.clone();
        Filler::for_function(model, api.api, f, templates).visit_item_fn_mut(&mut item);
        file.items.push(syn::Item::Fn(item));
        for alias in &f.aliases {
            let target = ident(&f.name);
            let alias_ident = ident(alias);
            let doc = format!(
                " `{alias}`: the C name that `cuda.h`/`cuda_runtime_api.h` maps onto [`{}`].",
                f.name
            );
            file.items.push(syn::parse_quote! {
                #[doc = #doc]
                pub use self::#target as #alias_ident;
            });
        }
    }
    file
}

fn module_doc(model: &Model, api: Api) -> Vec<String> {
    let (what, lib) = match api {
        Api::Driver => ("driver", "`libcuda.so.1`".to_owned()),
        Api::Runtime => ("runtime", format!("`{}`", model.ctk.runtime_soname())),
    };
    vec![
        format!(
            " CUDA {what} API bindings for CTK {}: the host-callback API and what launching graphs needs.",
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

fn ident(name: &str) -> syn::Ident {
    syn::Ident::new(name, Span::call_site())
}

fn doc_attrs(lines: &[String]) -> Vec<syn::Attribute> {
    lines
        .iter()
        .map(|l| {
            let l = if l.is_empty() || l.starts_with(' ') {
                l.clone()
            } else {
                format!(" {l}")
            };
            syn::parse_quote!(#[doc = #l])
        })
        .collect()
}

fn function_doc(api: Api, f: &Function, templates: &Templates) -> Vec<String> {
    let mut doc: Vec<String> = f.doc.clone();
    while doc.last().is_some_and(|l| l.trim().is_empty()) {
        doc.pop();
    }
    if !doc.is_empty() {
        doc.push(String::new());
    }
    doc.push("# Binding".to_owned());
    doc.push(String::new());
    match api {
        Api::Driver => doc.push(format!(
            "Resolved with `cuGetProcAddress(\"{}\", {})`{}.",
            f.base,
            f.version,
            if f.per_thread == PerThread::Driver {
                "; per-thread default stream variant available"
            } else {
                ""
            }
        )),
        Api::Runtime => doc.push(match &f.per_thread {
            PerThread::Runtime(sym) => format!(
                "Resolved as `{}` (`{sym}` under per-thread default stream semantics).",
                f.name
            ),
            _ => format!("Resolved as `{}`.", f.name),
        }),
    }
    doc.push(String::new());
    doc.push(
        "# Safety\n\nThe caller upholds the contract of the C function: valid handles and pointers.".to_owned(),
    );
    if f.takes_host_function() {
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
    major: u32,
    per_thread: Option<syn::Expr>,
}

impl Filler {
    fn for_module(doc: Vec<String>) -> Self {
        Filler {
            doc: doc
                .iter()
                .map(|l| syn::parse_quote!(#![doc = #l]))
                .collect(),
            name: None,
            base: String::new(),
            params: Vec::new(),
            ret: None,
            version: 0,
            major: 0,
            per_thread: None,
        }
    }

    fn for_function(model: &Model, api: Api, f: &Function, templates: &Templates) -> Self {
        let per_thread: syn::Expr = match &f.per_thread {
            PerThread::None if api == Api::Driver => syn::parse_quote!(false),
            PerThread::Driver => syn::parse_quote!(true),
            PerThread::None => syn::parse_quote!(None),
            PerThread::Runtime(sym) => {
                let lit = syn::LitCStr::new(
                    &std::ffi::CString::new(sym.as_str()).expect("C identifiers have no NUL"),
                    Span::call_site(),
                );
                syn::parse_quote!(Some(#lit))
            }
        };
        Filler {
            doc: doc_attrs(&function_doc(api, f, templates)),
            name: Some(f.name.clone()),
            base: f.base.clone(),
            params: f
                .params
                .iter()
                .map(|p| (ident(&p.name), p.ty.clone()))
                .collect(),
            ret: Some(f.ret.clone()),
            version: f.version,
            major: model.ctk.major(),
            per_thread: Some(per_thread),
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
            } else if Self::is_placeholder(&p.path, "__MAJOR__") {
                let v = syn::LitInt::new(&self.major.to_string(), Span::call_site());
                Some(syn::parse_quote!(#v))
            } else if Self::is_placeholder(&p.path, "__PER_THREAD__") {
                self.per_thread.clone()
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

/// Placeholder spellings that must not survive into output.
pub const PLACEHOLDERS: &[&str] = &[
    "__DOC__",
    "__name__",
    "__params__",
    "__Params__",
    "__args__",
    "__ParamTypes__",
    "__Ret__",
    "__base__",
    "__VERSION__",
    "__MAJOR__",
    "__PER_THREAD__",
];
