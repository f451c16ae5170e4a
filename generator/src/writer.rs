//! The writer: turns the model of one API of one target into a Rust file, and writes the module
//! files (a target's `mod.rs` and `layout.rs`, `src/bindings/mod.rs`), by filling the templates
//! in `templates/`: Rust files that syn parses, whose placeholders, spelled `__LIKE_THIS__`
//! ([`PLACEHOLDER`]), one token-level filler fills (see [`Value`]).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use proc_macro2::{Delimiter, Group, Literal, Punct, Spacing, TokenStream, TokenTree};
use quote::{ToTokens, quote};
use syn::visit_mut::{self, VisitMut};

use crate::Ctk;
use crate::doc::{self, Links};
use crate::model::{Api, ApiModel, Function, Summary};
use crate::shared::Shared;

mod types;

pub use types::{
    DOC_STRING, conversions as type_conversions, shape as type_shape, tokens as type_tokens,
    translation as type_translation,
};

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
    driver_function: Template,
    runtime_function: Template,
    file: Template,
    host_function_lifetime: Vec<String>,
    target_mod: Template,
    bindings_mod: Template,
    layout: Template,
}

/// A template: a Rust file whose placeholders [`Template::fill`] fills at the token level, so
/// that they may stand anywhere, in macro bodies and attributes too.
#[derive(Clone, Debug)]
struct Template {
    path: PathBuf,
    tokens: TokenStream,
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

/// A written file: its syntax tree, and its doc comments held beside it, each block of lines a
/// marker attribute in the tree that [`Written::text`] replaces.
pub struct Written {
    /// The items, each block of doc lines a marker attribute.
    pub file: syn::File,
    docs: Docs,
}

impl Written {
    /// The file's text: prettyplease's, with the doc comments in place.
    pub fn text(&self) -> String {
        self.docs.expand(prettyplease::unparse(&self.file))
    }
}

/// Doc comments held beside a syntax tree instead of in it. Docs are half the lines the writer
/// emits, and as one `#[doc = "line"]` each, every line was escaped into a string literal for
/// prettyplease to unescape again (`regen --ctk all` took 2.46 s of CPU that way against 2.35 s
/// this way, on 2 cores, medians of eight interleaved runs). A block of lines is one
/// attribute instead, `#[doc = "\0N"]` (N: its index), which prettyplease prints as the line
/// `///\0N` and [`Docs::expand`] replaces with the block's lines, printed as prettyplease
/// prints a doc attribute of one line: `///` (`//!` inside), the line less its trailing
/// spaces. A doc attribute is always followed by a hard line break, so the length of what it
/// holds changes no other line.
#[derive(Default)]
struct Docs {
    blocks: Vec<Vec<String>>,
    /// One attribute per line, always: what the markers must print as.
    #[cfg(test)]
    per_line: bool,
}

impl Docs {
    /// The attributes of the doc `lines` (values of doc attributes, [`doc_lines`]): one marker,
    /// or one attribute per line where prettyplease would print one otherwise than as `///` and
    /// the line (one holding a line break, an outer one starting with `/`).
    fn attrs(&mut self, style: syn::AttrStyle, lines: Vec<String>) -> Vec<syn::Attribute> {
        let plain = |l: &String| {
            !l.contains('\n') && (matches!(style, syn::AttrStyle::Inner(_)) || !l.starts_with('/'))
        };
        if lines.is_empty() {
            return Vec::new();
        }
        #[cfg(test)]
        let plain = |l: &String| plain(l) && !self.per_line;
        if !lines.iter().all(plain) {
            return lines.iter().map(|l| doc_attr(style, l)).collect();
        }
        let marker = doc_attr(style, &format!("\0{}", self.blocks.len()));
        self.blocks.push(lines);
        vec![marker]
    }

    /// `text`, as prettyplease printed the tree, with each marker's line replaced by its lines.
    fn expand(&self, text: String) -> String {
        if self.blocks.is_empty() {
            return text;
        }
        let lines = self.blocks.iter().flatten();
        let mut out = String::with_capacity(text.len() + lines.map(|l| l.len() + 8).sum::<usize>());
        let mut expanded = vec![false; self.blocks.len()];
        let mut rest = text.as_str();
        while let Some(at) = rest.find('\0') {
            // The marker's line: its indentation, `///` or `//!`, the NUL, the index.
            let start = rest[..at].rfind('\n').map_or(0, |n| n + 1);
            let end = rest[at..].find('\n').map_or(rest.len(), |n| at + n);
            let before = &rest[start..at];
            let prefix = before.trim_start_matches(' ');
            let indent = &before[..before.len() - prefix.len()];
            let index = rest[at + 1..end].parse::<usize>().ok();
            // Any other NUL (of a header's comment that reached the output other than through a
            // block) is text: copied as it is.
            let (Some(n), "///" | "//!") = (index.filter(|&n| n < expanded.len()), prefix) else {
                out.push_str(&rest[..=at]);
                rest = &rest[at + 1..];
                continue;
            };
            // A line that reads as a marker used already: a doc line spelt like one. The
            // writer's doc lines outside blocks are its own or its templates' (which
            // Templates::load refuses with a NUL), so this is never a header's.
            assert!(!expanded[n], "a doc marker is printed once");
            expanded[n] = true;
            out.push_str(&rest[..start]);
            for (i, line) in self.blocks[n].iter().enumerate() {
                if i > 0 {
                    out.push('\n');
                }
                out.push_str(indent);
                out.push_str(prefix);
                out.push_str(line.trim_end_matches(' '));
            }
            rest = &rest[end..];
        }
        out.push_str(rest);
        assert!(expanded.iter().all(|&e| e), "every doc marker is printed");
        out
    }
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
            let text = std::fs::read_to_string(&path).map_err(|source| TemplateError::Read {
                path: path.clone(),
                source,
            })?;
            // A NUL printed outside a block of doc lines would read as a marker ([`Docs`]).
            if text.contains('\0') {
                let problem = "holds a NUL character: remove it".to_owned();
                return Err(TemplateError::Shape { path, problem });
            }
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
        // A template, and whether its items have the shape `fits` expects, else `problem`.
        let template = |name: &str, fits: fn(&mut syn::File) -> bool, problem: &str| {
            let (path, text) = read(name);
            let mut file = match syn::parse_file(text) {
                Ok(file) => file,
                Err(source) => return Err(TemplateError::Parse { path, source }),
            };
            if !fits(&mut file) {
                let problem = problem.to_owned();
                return Err(TemplateError::Shape { path, problem });
            }
            let tokens = file.into_token_stream();
            Ok(Template { path, tokens })
        };
        let function = |name: &str| {
            template(
                name,
                |f| matches!(f.items.as_slice(), [syn::Item::Static(_), syn::Item::Fn(_)]),
                "must hold exactly one static (the entry point) and then one function (the wrapper)",
            )
        };
        let module = |name: &str| template(name, |_| true, "");
        let (_, lifetime) = read("host_function_lifetime.md");
        Ok(ParsedTemplates {
            driver_function: function("driver_function.rs")?,
            runtime_function: function("runtime_function.rs")?,
            file: template(
                "file.rs",
                |f| entry_module(f).is_some(),
                "must hold a module `entry` with a static `ALL`",
            )?,
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
    ctk: Ctk,
    api: &ApiModel,
    templates: &ParsedTemplates,
    shared: &BTreeSet<String>,
) -> Result<Written, TemplateError> {
    // The file's values: the loader items this API uses, and `ALL`, every entry point.
    let (status, api_value, loader, result) = match api.api {
        Api::Driver => (
            "CUresult",
            "crate::error::Api::Driver".to_owned(),
            "DriverFn, Entry, NamedEntry, PerThreadVariant",
            "driver_result",
        ),
        Api::Runtime => (
            "cudaError_t",
            format!("crate::error::Api::Runtime {{ major: {} }}", ctk.major()),
            "Entry, NamedEntry, RuntimeFn",
            "runtime_result",
        ),
    };
    let all: Vec<String> = api
        .functions
        .iter()
        .map(|f| format!("&{}", f.name))
        .collect();
    let mut docs = Docs::default();
    let mut file = templates.file.fill(
        &vec![
            ("__DOC__", Value::Lines(module_doc(ctk, api.api))),
            text("__Ret__", status),
            text("__API__", api_value),
            text("__LOADER__", loader),
            text("__RESULT__", result),
            text("__ALL__", all.join(", ")),
        ],
        &mut docs,
    )?;
    // What the headers' comments may link to: every item this file emits.
    let mut links = Links::of_types(&api.types);
    for f in &api.functions {
        links.add_function(&f.name);
        for alias in &f.aliases {
            links.add_function(alias);
        }
    }
    let mut convert = ConvertDocs(&links, &mut docs);
    for ty in &api.types {
        if shared.contains(&ty.name) {
            let name = ident(&ty.name);
            file.items
                .push(syn::parse_quote!(pub use crate::common::#name;));
            continue;
        }
        let markdown = &mut |text: &[String]| {
            let attrs = convert.markdown(text);
            attrs.iter().map(ToTokens::to_token_stream).collect()
        };
        let items: syn::File =
            syn::parse2(types::tokens_with(ty, markdown)).expect("the Rust of a type parses");
        file.items.extend(items.items);
    }
    let carriers = api.host_function_types();
    let template = match api.api {
        Api::Driver => &templates.driver_function,
        Api::Runtime => &templates.runtime_function,
    };
    let mut entries = Vec::new();
    for f in &api.functions {
        let mut values = function_values(ctk, api.api, f);
        values.extend([
            (
                "__ENTRY_DOC__",
                Value::Lines(doc_lines(&entry_doc(api.api, f))),
            ),
            (
                "__DOC__",
                Value::Lines(doc_lines(&function_doc(
                    api.api, f, templates, &carriers, &links,
                ))),
            ),
        ]);
        let mut items = template.fill(&values, &mut docs)?.items.into_iter();
        let (Some(syn::Item::Static(entry)), Some(syn::Item::Fn(mut wrapper)), None) =
            (items.next(), items.next(), items.next())
        else {
            unreachable!("Templates::load checked the items, which values of text cannot add")
        };
        entries.push(syn::Item::Static(entry));
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
    items.splice(at..at, entries);
    Ok(Written { file, docs })
}

/// The values of the placeholders of a function template (`templates/driver_function.rs`,
/// `runtime_function.rs`) for `f`, less its docs.
fn function_values(ctk: Ctk, api: Api, f: &Function) -> Values {
    let per_thread = match (api, &f.per_thread) {
        (_, None) => "None".to_owned(),
        (Api::Driver, Some(pt)) => format!(
            "Some(PerThreadVariant {{ version: {}, symbol: {} }})",
            pt.version,
            c_literal(&pt.symbol)
        ),
        (Api::Runtime, Some(pt)) => format!("Some({})", c_literal(&pt.symbol)),
    };
    let join = |part: fn(&crate::model::Param) -> String| {
        f.params.iter().map(part).collect::<Vec<_>>().join(", ")
    };
    let params = f
        .params
        .iter()
        .map(|p| vec![text("__params__", &p.name), text("__Params__", &p.ty)]);
    vec![
        text("__name__", &f.name),
        text("__base__", &f.base),
        ("__params__", Value::Each(params.collect())),
        text("__args__", join(|p| p.name.clone())),
        text("__ParamTypes__", join(|p| p.ty.to_string())),
        text("__Ret__", &f.ret),
        text("__VERSION__", f.version),
        text("__NEEDS__", f.needs),
        text("__MAJOR__", ctk.major()),
        text("__PER_THREAD__", per_thread),
    ]
}

/// Writes the crate's `common` module: every shared type's definition ([`crate::shared`]), with
/// the lint settings of the file template, as a syntax tree (not yet formatted).
pub fn write_common(shared: &Shared, templates: &ParsedTemplates) -> Written {
    let mut items = Vec::new();
    for text in shared.definitions.values() {
        let file: syn::File = syn::parse_str(text).expect("a summary's types are bindgen's items");
        items.extend(file.items);
    }
    let links = Links::of_items(&items);
    let mut docs = Docs::default();
    let mut convert = ConvertDocs(&links, &mut docs);
    for item in &mut items {
        convert.visit_item_mut(item);
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
    let mut file: syn::File =
        syn::parse2(templates.file.tokens.clone()).expect("Templates::load parsed it");
    attrs.extend(file.attrs.drain(..).filter(|a| !a.path().is_ident("doc")));
    file.attrs = attrs;
    file.items = items;
    Written { file, docs }
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

fn module_doc(ctk: Ctk, api: Api) -> Vec<String> {
    let (what, lib) = match api {
        Api::Driver => ("driver", "`libcuda.so.1`".to_owned()),
        Api::Runtime => ("runtime", format!("`{}`", ctk.runtime_soname())),
    };
    vec![
        format!(
            " CUDA {what} API bindings for CTK {}: every function the header declares (less the deny-list's few), and every type and constant they reach.",
            ctk
        ),
        String::new(),
        format!(
            " Generated from the CTK {} headers (see `provenance.toml` beside this file). Every function is",
            ctk
        ),
        format!(" resolved from {lib} on its first call; one the installed library lacks returns"),
        " [`Error::Unavailable`] instead of failing to load.".to_owned(),
    ]
}

/// The C string literal of `s`, as Rust spells it.
fn c_literal(s: &str) -> String {
    Literal::c_string(&std::ffi::CString::new(s).expect("C identifiers have no NUL")).to_string()
}

fn ident(name: &str) -> syn::Ident {
    syn::Ident::new(name, proc_macro2::Span::call_site())
}

/// Markdown lines as doc attributes hold them: each non-empty one after a space (as `///`
/// writes it).
fn doc_lines(lines: &[String]) -> Vec<String> {
    let spaced = |l: &String| match l.is_empty() {
        true => String::new(),
        false => format!(" {l}"),
    };
    lines.iter().map(spaced).collect()
}

/// `#[doc = "line"]` (or `#![doc = "line"]`), built rather than parsed: the docs are most of
/// what the writer emits, and with them left out, filling the function templates of three targets
/// took 0.58-0.69 s instead of 0.87-1.37 s (thread time, 3 interleaved runs each).
fn doc_attr(style: syn::AttrStyle, line: &str) -> syn::Attribute {
    let span = proc_macro2::Span::call_site();
    syn::Attribute {
        pound_token: Default::default(),
        style,
        bracket_token: Default::default(),
        meta: syn::Meta::NameValue(syn::MetaNameValue {
            path: ident("doc").into(),
            eq_token: Default::default(),
            value: syn::Expr::Lit(syn::ExprLit {
                attrs: Vec::new(),
                lit: syn::Lit::Str(syn::LitStr::new(line, span)),
            }),
        }),
    }
}

/// Converts the headers' Doxygen on bindgen's items (types, fields, constants) to Markdown, one
/// `#[doc]` per line, in place of bindgen's one `#[doc]` per comment.
struct ConvertDocs<'a>(&'a Links, &'a mut Docs);

impl ConvertDocs<'_> {
    fn convert(&mut self, attrs: &mut Vec<syn::Attribute>) {
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
            kept.splice(at..at, self.markdown(&text));
        }
        *attrs = kept;
    }

    /// The doc attributes of the Doxygen comment `text` (its lines), made Markdown.
    fn markdown(&mut self, text: &[String]) -> Vec<syn::Attribute> {
        if text.is_empty() {
            return Vec::new();
        }
        let lines = doc::to_markdown(&text.join("\n"), self.0);
        self.1.attrs(syn::AttrStyle::Outer, doc_lines(&lines))
    }
}

impl VisitMut for ConvertDocs<'_> {
    fn visit_item_mut(&mut self, item: &mut syn::Item) {
        if let Some(attrs) = item_attrs(item) {
            self.convert(attrs);
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

/// The value of a template's placeholder `__X__`, and where it goes.
#[derive(Clone, Debug)]
pub enum Value {
    /// Text: in place of the identifier `__X__`, the Rust tokens it spells; in place of the word
    /// `__X__` of a string or C string literal (a doc comment's too), the text itself.
    Text(String),
    /// Doc lines: the attribute `#[doc = "__X__"]` (or `#![doc = "__X__"]`) becomes one such
    /// attribute per line, holding the line.
    Lines(Vec<String>),
    /// Rows, each filled with its values (then with the enclosing ones): `__X__! { .. }` becomes
    /// what its braces hold, once per row; in a list, the element `__X__ ..` (up to the next
    /// comma) becomes one element per row, each row giving `__X__` its own value.
    Each(Vec<Values>),
}

/// The values of a template's placeholders, by name.
pub type Values = Vec<(&'static str, Value)>;

/// The placeholder `name`'s value `text` ([`Value::Text`]).
pub fn text(name: &'static str, text: impl ToString) -> (&'static str, Value) {
    (name, Value::Text(text.to_string()))
}

/// What spells a placeholder of a template, `__LIKE_THIS__`: an identifier it matches whole, or
/// a word of a string literal. The filler fills each it finds and refuses the template where one
/// has no value, so a misspelt placeholder never reaches the output.
pub static PLACEHOLDER: std::sync::LazyLock<regex::Regex> =
    std::sync::LazyLock::new(|| regex::Regex::new(r"\b__\w+__\b").expect("a valid regex"));

impl Template {
    /// The file of the template filled with `values`.
    fn written(&self, values: &Values) -> Result<Written, TemplateError> {
        let mut docs = Docs::default();
        let file = self.fill(values, &mut docs)?;
        Ok(Written { file, docs })
    }

    /// The template filled with `values` (see [`Value`]); every placeholder it names must have one.
    /// Its doc lines go to `docs`.
    fn fill(&self, values: &Values, docs: &mut Docs) -> Result<syn::File, TemplateError> {
        let mut unfilled = BTreeSet::new();
        let mut lines = Vec::new();
        let tokens = fill_tokens(self.tokens.clone(), &[values], &mut unfilled, &mut lines);
        let problem = match syn::parse2::<syn::File>(tokens) {
            _ if !unfilled.is_empty() => format!(
                "names the placeholder(s) {}, which the writer has no value for: fix their spelling (its header lists those it fills)",
                unfilled.into_iter().collect::<Vec<_>>().join(", ")
            ),
            Ok(mut file) => {
                let mut place = PlaceLines {
                    lines: &lines,
                    docs,
                    placed: vec![false; lines.len()],
                    stray: false,
                };
                place.attrs(&mut file.attrs);
                place.items(&mut file.items);
                if !place.stray && place.placed.iter().all(|&p| p) {
                    return Ok(file);
                }
                format!(
                    "puts a placeholder of doc lines ({}) elsewhere than in a doc attribute of the file, a module or an item",
                    lines
                        .iter()
                        .map(|(name, _)| *name)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
            Err(e) => format!("does not parse as Rust once filled: {e}"),
        };
        Err(TemplateError::Shape {
            path: self.path.clone(),
            problem,
        })
    }
}

/// The attribute [`fill_tokens`] leaves where a placeholder of lines was, `#[__hostcb_lines(N)]`
/// (N: the index of its lines), for [`PlaceLines`] to replace with one doc attribute per line.
const LINES_MARKER: &str = "__hostcb_lines";

/// The attributes of an item of any kind that has them.
fn item_attrs(item: &mut syn::Item) -> Option<&mut Vec<syn::Attribute>> {
    use syn::Item as I;
    Some(match item {
        I::Const(i) => &mut i.attrs,
        I::Enum(i) => &mut i.attrs,
        I::ExternCrate(i) => &mut i.attrs,
        I::Fn(i) => &mut i.attrs,
        I::ForeignMod(i) => &mut i.attrs,
        I::Impl(i) => &mut i.attrs,
        I::Macro(i) => &mut i.attrs,
        I::Mod(i) => &mut i.attrs,
        I::Static(i) => &mut i.attrs,
        I::Struct(i) => &mut i.attrs,
        I::Trait(i) => &mut i.attrs,
        I::TraitAlias(i) => &mut i.attrs,
        I::Type(i) => &mut i.attrs,
        I::Union(i) => &mut i.attrs,
        I::Use(i) => &mut i.attrs,
        _ => return None,
    })
}

/// Replaces each [`LINES_MARKER`] attribute of a filled file with its doc lines.
struct PlaceLines<'a> {
    lines: &'a [(&'a str, &'a [String])],
    /// Where the lines go.
    docs: &'a mut Docs,
    /// Which lines were placed.
    placed: Vec<bool>,
    /// A marker the filler did not leave, or one left twice: a template that spells one.
    stray: bool,
}

impl PlaceLines<'_> {
    fn attrs(&mut self, attrs: &mut Vec<syn::Attribute>) {
        let marker = |a: &syn::Attribute| match &a.meta {
            syn::Meta::List(list) if list.path.is_ident(LINES_MARKER) => Some(
                list.parse_args::<syn::LitInt>()
                    .ok()?
                    .base10_parse::<usize>()
                    .ok(),
            ),
            _ => None,
        };
        if !attrs.iter().any(|a| marker(a).is_some()) {
            return;
        }
        let mut placed = Vec::with_capacity(attrs.len());
        for a in attrs.drain(..) {
            match marker(&a) {
                Some(Some(n)) if n < self.lines.len() && !self.placed[n] => {
                    self.placed[n] = true;
                    placed.extend(self.docs.attrs(a.style, self.lines[n].1.to_vec()));
                }
                Some(_) => self.stray = true,
                None => placed.push(a),
            }
        }
        *attrs = placed;
    }

    /// The items' attributes, and those of the items of their modules.
    fn items(&mut self, items: &mut [syn::Item]) {
        for item in items {
            let Some(attrs) = item_attrs(item) else {
                continue;
            };
            self.attrs(attrs);
            if let syn::Item::Mod(syn::ItemMod {
                content: Some((_, inner)),
                ..
            }) = item
            {
                self.items(inner);
            }
        }
    }
}

/// Fills the placeholders of `tokens` with their values in `scopes` (the innermost last), and
/// adds each that has none (or one of the wrong kind) to `unfilled`. A placeholder of lines
/// (`#[doc = "__X__"]`) becomes a [`LINES_MARKER`] attribute, its lines pushed to `lines`.
fn fill_tokens<'v>(
    tokens: TokenStream,
    scopes: &[&'v Values],
    unfilled: &mut BTreeSet<String>,
    lines: &mut Vec<(&'static str, &'v [String])>,
) -> TokenStream {
    let value = |name: &str| {
        scopes
            .iter()
            .rev()
            .find_map(|s| s.iter().find(|(n, _)| *n == name).map(|(_, v)| v))
    };
    // An identifier is a placeholder where the pattern matches all of it.
    let whole = |s: &str| PLACEHOLDER.find(s).is_some_and(|m| m.len() == s.len());
    let in_row = |row| {
        scopes
            .iter()
            .copied()
            .chain([row])
            .collect::<Vec<&Values>>()
    };
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    let mut out = TokenStream::new();
    let mut i = 0;
    while i < trees.len() {
        let tree = &trees[i];
        i += 1;
        match tree {
            TokenTree::Ident(id) if whole(&id.to_string()) => {
                let name = id.to_string();
                match (value(&name), trees.get(i), trees.get(i + 1)) {
                    (
                        Some(Value::Each(rows)),
                        Some(TokenTree::Punct(bang)),
                        Some(TokenTree::Group(body)),
                    ) if bang.as_char() == '!' && body.delimiter() == Delimiter::Brace => {
                        for row in rows {
                            out.extend(fill_tokens(body.stream(), &in_row(row), unfilled, lines));
                        }
                        i += 2;
                    }
                    // A list element, up to the next comma; its rows give `name` its values.
                    (Some(Value::Each(rows)), ..)
                        if rows.iter().all(|r| r.iter().any(|(n, _)| *n == name)) =>
                    {
                        let end = trees[i..]
                            .iter()
                            .position(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == ','))
                            .map_or(trees.len(), |n| i + n);
                        let element: TokenStream = trees[i - 1..end].iter().cloned().collect();
                        for (n, row) in rows.iter().enumerate() {
                            if n > 0 {
                                out.extend([TokenTree::Punct(Punct::new(',', Spacing::Alone))]);
                            }
                            out.extend(fill_tokens(element.clone(), &in_row(row), unfilled, lines));
                        }
                        i = end;
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
            TokenTree::Punct(hash) if hash.as_char() == '#' => {
                // `#[doc = "__X__"]` or `#![doc = "__X__"]`, `__X__` a value of lines.
                let at = i + usize::from(
                    matches!(&trees.get(i), Some(TokenTree::Punct(p)) if p.as_char() == '!'),
                );
                let doc = match trees.get(at) {
                    Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Bracket => {
                        match syn::parse2::<syn::MetaNameValue>(g.stream()) {
                            Ok(syn::MetaNameValue {
                                path,
                                value:
                                    syn::Expr::Lit(syn::ExprLit {
                                        lit: syn::Lit::Str(s),
                                        ..
                                    }),
                                ..
                            }) if path.is_ident("doc") => {
                                let name = s.value();
                                scopes
                                    .iter()
                                    .rev()
                                    .copied()
                                    .find_map(|s: &'v Values| s.iter().find(|(n, _)| *n == name))
                                    .and_then(|(n, v)| match v {
                                        Value::Lines(doc) => Some((*n, doc.as_slice())),
                                        _ => None,
                                    })
                            }
                            _ => None,
                        }
                    }
                    _ => None,
                };
                let Some(doc) = doc else {
                    out.extend([tree.clone()]);
                    continue;
                };
                // The marker, which PlaceLines replaces with a doc attribute per line once the
                // file is parsed.
                let (marker, index) = (ident(LINES_MARKER), Literal::usize_unsuffixed(lines.len()));
                lines.push(doc);
                out.extend(trees[i - 1..at].iter().cloned());
                out.extend([TokenTree::Group(Group::new(
                    Delimiter::Bracket,
                    quote!(#marker(#index)),
                ))]);
                i = at + 1;
            }
            TokenTree::Group(g) => {
                let mut group = Group::new(
                    g.delimiter(),
                    fill_tokens(g.stream(), scopes, unfilled, lines),
                );
                group.set_span(g.span());
                out.extend([TokenTree::Group(group)]);
            }
            TokenTree::Literal(lit) => {
                // The words of a string or C string literal spelled like placeholders.
                let mut words = |text: &str| {
                    PLACEHOLDER.is_match(text).then(|| {
                        let filled = PLACEHOLDER.replace_all(text, |w: &regex::Captures| {
                            if let Some(Value::Text(text)) = value(&w[0]) {
                                return text.clone();
                            }
                            unfilled.insert(w[0].to_owned());
                            w[0].to_owned()
                        });
                        filled.into_owned()
                    })
                };
                let filled = match syn::Lit::new(lit.clone()) {
                    syn::Lit::Str(s) => words(&s.value()).map(|t| Literal::string(&t)),
                    syn::Lit::CStr(s) => match s.value().to_str() {
                        Ok(text) => words(text).map(|t| {
                            Literal::c_string(
                                &std::ffi::CString::new(t).expect("a filled C string has no NUL"),
                            )
                        }),
                        Err(_) => None,
                    },
                    // Byte strings and the rest are not filled: a placeholder there is refused,
                    // not left in the output.
                    _ => {
                        let text = lit.to_string();
                        unfilled
                            .extend(PLACEHOLDER.find_iter(&text).map(|m| m.as_str().to_owned()));
                        None
                    }
                };
                out.extend([TokenTree::Literal(filled.unwrap_or_else(|| lit.clone()))]);
            }
            _ => out.extend([tree.clone()]),
        }
    }
    out
}

/// What a target offers beyond the common API, named in its `for_each_target!` entry so that
/// code written once for every target can add what only some have.
pub fn capabilities(summary: &Summary) -> Vec<&'static str> {
    let has = |api: Api, name: &str| summary.api(api).iter().any(|(f, _)| f == name);
    let mut caps = Vec::new();
    if has(Api::Driver, "cuLaunchHostFunc_v2") && has(Api::Runtime, "cudaLaunchHostFunc_v2") {
        caps.push("host_func_v2");
    }
    if has(Api::Driver, "cuStreamGetCaptureInfo_v3") {
        caps.push("capture_info_v3");
    }
    if [
        "cudaLibraryLoadData",
        "cudaLibraryGetKernel",
        "cudaLibraryUnload",
    ]
    .iter()
    .all(|f| has(Api::Runtime, f))
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
    summary: &Summary,
    machine: &str,
    templates: &ParsedTemplates,
) -> Result<Written, TemplateError> {
    let ctk = summary.ctk;
    let mut values = target_values(ctk);
    values.extend([
        text("__MAJOR__", ctk.major()),
        text("__SONAME__", ctk.runtime_soname()),
        text("__CAPABILITIES__", capabilities(summary).join(" ")),
        text("__MACHINE__", machine),
    ]);
    templates.target_mod.written(&values)
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
) -> Result<Written, TemplateError> {
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
        ("__TABLE__", Value::Lines(compatibility_table(models))),
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
    templates.bindings_mod.written(&values)
}

/// A target's `layout.rs` (`templates/layout.rs`) from the layout oracle's `values`
/// ([`crate::layout::Oracle`]).
pub fn write_layout(
    values: &Values,
    templates: &ParsedTemplates,
) -> Result<Written, TemplateError> {
    templates.layout.written(values)
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

    /// The committed templates' folder, and a copy of its template files.
    fn templates_copy() -> (PathBuf, tempfile::TempDir) {
        let real = Path::new(env!("CARGO_MANIFEST_DIR")).join("../templates");
        let dir = tempfile::tempdir().unwrap();
        for name in TEMPLATE_FILES {
            std::fs::copy(real.join(name), dir.path().join(name)).unwrap();
        }
        (real, dir)
    }

    #[test]
    fn the_templates_hash_is_of_the_template_bytes_read() {
        let (real, dir) = templates_copy();
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

    #[test]
    fn a_template_with_a_nul_is_refused() {
        let (_, dir) = templates_copy();
        assert!(Templates::load(dir.path()).is_ok());
        let lifetime = dir.path().join("host_function_lifetime.md");
        let text = std::fs::read_to_string(&lifetime).unwrap();
        std::fs::write(&lifetime, format!("{text}a \0 in a line\n")).unwrap();
        let error = Templates::load(dir.path()).unwrap_err().to_string();
        assert!(
            error.contains("host_function_lifetime.md holds a NUL"),
            "{error}"
        );
    }

    #[test]
    fn a_placeholder_is_filled_or_refused_wherever_it_is_spelt() {
        let template = |text: &str| Template {
            path: PathBuf::from("t.rs"),
            tokens: text.parse().unwrap(),
        };
        let values: Values = vec![("__name__", Value::Text("cuInit".to_owned()))];
        let filled =
            template(r#"const __name__: &CStr = c"__name__"; const D: &str = "__name__";"#)
                .fill(&values, &mut Docs::default())
                .unwrap();
        assert_eq!(
            filled.to_token_stream().to_string(),
            r#"const cuInit : & CStr = c"cuInit" ; const D : & str = "cuInit" ;"#
        );
        for unfillable in [
            r#"const B: &[u8] = b"__name__";"#,
            r#"const N: &CStr = c"__nmae__";"#,
            "const __nmae__: u32 = 1;",
        ] {
            let error = template(unfillable)
                .fill(&values, &mut Docs::default())
                .unwrap_err()
                .to_string();
            assert!(
                error.contains("names the placeholder(s) __n"),
                "{unfillable}: {error}"
            );
        }
    }

    #[test]
    fn doc_markers_print_as_prettyplease_prints_a_doc_attribute_per_line() {
        let source = r#"
            /// Brief.
            ///
            /// Detail with `code` and trailing spaces   
            pub struct S {
                /// A field, see [`E`].
                pub x: u32,
            }
            /// An enum.
            pub enum E {
                /// A variant.
                A = 1,
            }
            impl S {
                /// A constant.
                pub const C: u32 = 1;
            }
            pub mod m {
                /// Nested.
                pub struct T;
            }
        "#;
        let text = |per_line| {
            let mut file = syn::parse_file(source).unwrap();
            let links = Links::of_items(&file.items);
            let mut docs = Docs {
                per_line,
                ..Docs::default()
            };
            let mut convert = ConvertDocs(&links, &mut docs);
            for item in &mut file.items {
                convert.visit_item_mut(item);
            }
            let inner = [" Module.  ", "", "/ slash"].map(str::to_owned).to_vec();
            file.attrs = docs.attrs(syn::AttrStyle::Inner(Default::default()), inner);
            let markers = docs.blocks.len();
            (Written { file, docs }.text(), markers)
        };
        let ((marked, markers), (per_line, none)) = (text(false), text(true));
        assert_eq!((markers, none), (7, 0));
        assert_eq!(marked, per_line);
        assert!(marked.contains("    /// Nested.\n") && marked.contains("//! Module.\n//!\n"));
    }

    #[test]
    fn a_nul_that_is_no_marker_is_text_and_a_marker_prints_once() {
        let mut docs = Docs::default();
        let lines = vec![" a  ".to_owned(), String::new()];
        docs.attrs(syn::AttrStyle::Outer, lines);
        let text = "/// x\0y\n    ///\u{0}0\n///\u{0}7\nfn f() {}\n".to_owned();
        assert_eq!(
            docs.expand(text),
            "/// x\0y\n    /// a\n    ///\n///\u{0}7\nfn f() {}\n"
        );
        let twice = "///\u{0}0\n///\u{0}0\n".to_owned();
        let panicked = std::panic::catch_unwind(|| docs.expand(twice)).unwrap_err();
        assert_eq!(
            panicked.downcast_ref::<&str>(),
            Some(&"a doc marker is printed once")
        );
    }

    #[test]
    fn doc_lines_go_where_the_template_puts_them_and_nowhere_else() {
        let template = |text: &str| Template {
            path: PathBuf::from("t.rs"),
            tokens: text.parse().unwrap(),
        };
        let lines = |l: &[&str]| Value::Lines(l.iter().map(|l| l.to_string()).collect());
        let values: Values = vec![
            ("__DOC__", lines(&[" a", "", " b \"c\""])),
            ("__NONE__", lines(&[])),
        ];
        let filled = template(
            r#"#![doc = "__DOC__"] #[doc = "__NONE__"] #[inline] fn f() {} mod m { #![doc = "__DOC__"] }"#,
        )
        .written(&values)
        .unwrap();
        assert_eq!(
            filled.text(),
            "//! a\n//!\n//! b \"c\"\n#[inline]\nfn f() {}\nmod m {\n    //! a\n    //!\n    //! b \"c\"\n}\n"
        );
        for misplaced in [
            r#"struct S { #[doc = "__DOC__"] x: u8 }"#,
            r#"fn f() { #[doc = "__DOC__"] let x = 1; }"#,
            r#"#[__hostcb_lines(0)] fn f() {}"#,
            r#"#[__hostcb_lines(0)] #[doc = "__DOC__"] fn f() {}"#,
        ] {
            let error = template(misplaced)
                .written(&values)
                .err()
                .unwrap()
                .to_string();
            assert!(
                error.contains("puts a placeholder of doc lines"),
                "{misplaced}: {error}"
            );
        }
    }
}
