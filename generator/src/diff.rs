//! What changes between two targets' models: functions added and removed, ABI versions and
//! signatures that changed, the C names the headers' macros map onto other declarations, and types
//! (kinds, sizes, fields), enum values and constants added, removed or changed. Plain data with a
//! [`Display`](fmt::Display) of one line per difference under section headings, sorted, so the
//! same two models always print the same text. What `cargo xtask diff A B` prints.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use quote::ToTokens;

use crate::Ctk;
use crate::model::{Api, CType, Function, Model, PerThreadVariant};

/// Every difference between the models of two targets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelDiff {
    /// The older side (`A` of `diff A B`).
    pub from: Ctk,
    /// The newer side (`B`).
    pub to: Ctk,
    /// The differences, sorted by API, section and line.
    pub differences: Vec<Difference>,
    /// What each side binds against what its headers declare, per API
    /// ([`crate::model::ApiModel::coverage`]); printed last.
    pub coverage: Vec<(Ctk, Api, crate::model::Coverage)>,
}

/// One difference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Difference {
    /// The API it belongs to.
    pub api: Api,
    /// The section it is listed under.
    pub section: Section,
    /// What it is about: a function, C name, type, `Enum::VALUE` or constant.
    pub name: String,
    /// What changed.
    pub change: Change,
}

/// The sections of a diff, in the order they are printed (per API).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Section {
    /// Functions only `to` declares.
    FunctionsAdded,
    /// Functions only `from` declares.
    FunctionsRemoved,
    /// Functions whose ABI version, per-thread variant or signature changed.
    FunctionsChanged,
    /// C names (alias macros) that map onto another declaration, or appear or go.
    CNames,
    /// Types only `to` defines.
    TypesAdded,
    /// Types only `from` defines.
    TypesRemoved,
    /// Types whose kind, size, alias target or fields changed.
    TypesChanged,
    /// Enum values only `to` has.
    EnumValuesAdded,
    /// Enum values only `from` has.
    EnumValuesRemoved,
    /// Enum values whose value changed.
    EnumValuesChanged,
    /// Constants only `to` defines.
    ConstantsAdded,
    /// Constants only `from` defines.
    ConstantsRemoved,
    /// Constants whose value changed.
    ConstantsChanged,
}

impl Section {
    /// The section's heading, after the API's name.
    fn heading(self) -> &'static str {
        match self {
            Section::FunctionsAdded => "functions added",
            Section::FunctionsRemoved => "functions removed",
            Section::FunctionsChanged => "functions changed",
            Section::CNames => "C names mapped onto other declarations",
            Section::TypesAdded => "types added",
            Section::TypesRemoved => "types removed",
            Section::TypesChanged => "types changed",
            Section::EnumValuesAdded => "enum values added",
            Section::EnumValuesRemoved => "enum values removed",
            Section::EnumValuesChanged => "enum values changed",
            Section::ConstantsAdded => "constants added",
            Section::ConstantsRemoved => "constants removed",
            Section::ConstantsChanged => "constants changed",
        }
    }

    fn mark(self) -> char {
        match self {
            Section::FunctionsAdded
            | Section::TypesAdded
            | Section::EnumValuesAdded
            | Section::ConstantsAdded => '+',
            Section::FunctionsRemoved
            | Section::TypesRemoved
            | Section::EnumValuesRemoved
            | Section::ConstantsRemoved => '-',
            _ => '~',
        }
    }
}

/// What a function is on one side.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionInfo {
    /// The ABI version the headers give it ([`Model::header_version`]).
    pub version: Option<u32>,
    /// Its per-thread-default-stream variant.
    pub per_thread: Option<PerThread>,
    /// Its parameters, `(name: Type, ...)`.
    pub signature: String,
}

/// A function's per-thread-default-stream variant on one side.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerThread {
    /// The library's export (`cuLaunchHostFunc_ptsz`, `cudaMemcpy_ptds`).
    pub symbol: String,
    /// Driver: its own ABI version ([`PerThreadVariant::version`]); runtime: the function's
    /// [`FunctionInfo::version`], so `None` where that is.
    pub version: Option<u32>,
}

/// What a type is on one side.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeInfo {
    /// `struct`, `union`, `enum`, or `alias of <target>`.
    pub kind: String,
    /// Its size in bytes (x86-64 Linux, bindgen's layout), where known.
    pub size: Option<u64>,
}

/// What changed about the item a [`Difference`] names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// A function appeared.
    FunctionAdded(FunctionInfo),
    /// A function went.
    FunctionRemoved(FunctionInfo),
    /// The ABI version (`cuGetProcAddress`'s) changed.
    Version {
        /// Before.
        from: u32,
        /// After.
        to: u32,
    },
    /// The per-thread-default-stream variant changed, appeared or went.
    PerThread {
        /// Before.
        from: Option<PerThread>,
        /// After.
        to: Option<PerThread>,
    },
    /// The parameters changed.
    Signature {
        /// Before.
        from: String,
        /// After.
        to: String,
    },
    /// A C name maps onto another declaration (`None`: the name is not an alias on that side).
    CName {
        /// Before.
        from: Option<String>,
        /// After.
        to: Option<String>,
    },
    /// A type appeared.
    TypeAdded(TypeInfo),
    /// A type went.
    TypeRemoved(TypeInfo),
    /// A type's kind (or alias target) changed.
    Kind {
        /// Before.
        from: String,
        /// After.
        to: String,
    },
    /// A type's size changed.
    Size {
        /// Before, in bytes.
        from: u64,
        /// After, in bytes.
        to: u64,
    },
    /// A field appeared.
    FieldAdded {
        /// The field.
        field: String,
        /// Its type.
        ty: String,
    },
    /// A field went.
    FieldRemoved {
        /// The field.
        field: String,
        /// Its type.
        ty: String,
    },
    /// A field's type changed.
    FieldType {
        /// The field.
        field: String,
        /// Before.
        from: String,
        /// After.
        to: String,
    },
    /// A field's offset changed.
    FieldOffset {
        /// The field.
        field: String,
        /// Before, in bytes.
        from: u64,
        /// After, in bytes.
        to: u64,
    },
    /// An enum value or constant appeared, with its value.
    ValueAdded(String),
    /// An enum value or constant went, with its value.
    ValueRemoved(String),
    /// An enum value or constant changed its value.
    Value {
        /// Before.
        from: String,
        /// After.
        to: String,
    },
}

/// Compares the model of `from` with that of `to`.
pub fn diff(from: &Model, to: &Model) -> ModelDiff {
    let mut differences = Vec::new();
    for api in [Api::Driver, Api::Runtime] {
        diff_functions(api, from, to, &mut differences);
        let (old, new) = (Types::of(from, api), Types::of(to, api));
        diff_types(api, &old, &new, &mut differences);
        diff_values(api, &old, &new, &mut differences);
    }
    differences.sort_by_cached_key(|d| (d.api, d.section, d.to_string()));
    differences.dedup();
    let coverage = [from, to]
        .iter()
        .flat_map(|m| [Api::Driver, Api::Runtime].map(|api| (m.ctk, api, m.api(api).coverage())))
        .collect();
    ModelDiff {
        from: from.ctk,
        to: to.ctk,
        differences,
        coverage,
    }
}

fn info(model: &Model, api: Api, f: &Function) -> FunctionInfo {
    let params: Vec<String> = f
        .params
        .iter()
        .map(|p| format!("{}: {}", p.name, spell_type(&p.ty)))
        .collect();
    let version = model.header_version(api, f);
    FunctionInfo {
        version,
        per_thread: f
            .per_thread
            .as_ref()
            .map(|pt: &PerThreadVariant| PerThread {
                symbol: pt.symbol.clone(),
                version: match api {
                    Api::Driver => Some(pt.version),
                    Api::Runtime => version,
                },
            }),
        signature: format!("({})", params.join(", ")),
    }
}

fn diff_functions(api: Api, from: &Model, to: &Model, out: &mut Vec<Difference>) {
    let side = |m: &Model| -> BTreeMap<String, FunctionInfo> {
        m.api(api)
            .functions
            .iter()
            .map(|f| (f.name.clone(), info(m, api, f)))
            .collect()
    };
    let (old, new) = (side(from), side(to));
    let mut push = |section, name: &str, change| {
        out.push(Difference {
            api,
            section,
            name: name.to_owned(),
            change,
        })
    };
    for (name, o) in &old {
        let Some(n) = new.get(name) else {
            push(
                Section::FunctionsRemoved,
                name,
                Change::FunctionRemoved(o.clone()),
            );
            continue;
        };
        if let (Some(a), Some(b)) = (o.version, n.version)
            && a != b
        {
            push(
                Section::FunctionsChanged,
                name,
                Change::Version { from: a, to: b },
            );
        }
        if o.per_thread != n.per_thread {
            push(
                Section::FunctionsChanged,
                name,
                Change::PerThread {
                    from: o.per_thread.clone(),
                    to: n.per_thread.clone(),
                },
            );
        }
        if o.signature != n.signature {
            push(
                Section::FunctionsChanged,
                name,
                Change::Signature {
                    from: o.signature.clone(),
                    to: n.signature.clone(),
                },
            );
        }
    }
    for (name, n) in &new {
        if !old.contains_key(name) {
            push(
                Section::FunctionsAdded,
                name,
                Change::FunctionAdded(n.clone()),
            );
        }
    }
    // C names: each alias macro and the declaration it maps onto.
    let names = |m: &Model| -> BTreeMap<String, String> {
        m.api(api)
            .functions
            .iter()
            .flat_map(|f| f.aliases.iter().map(|a| (a.clone(), f.name.clone())))
            .collect()
    };
    let (old, new) = (names(from), names(to));
    let all: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    for name in all {
        let (a, b) = (old.get(name), new.get(name));
        if a != b {
            push(
                Section::CNames,
                name,
                Change::CName {
                    from: a.cloned(),
                    to: b.cloned(),
                },
            );
        }
    }
}

/// What one API of one model defines besides functions, by name.
#[derive(Default)]
struct Types {
    /// Structs, unions, enums and aliases: their kind.
    kinds: BTreeMap<String, String>,
    /// Fields of structs and unions, in order: name and type.
    fields: BTreeMap<String, Vec<(String, String)>>,
    /// Alias targets, as types.
    aliases: BTreeMap<String, syn::Type>,
    /// Sizes, offsets from bindgen's layout checks.
    sizes: BTreeMap<String, u64>,
    offsets: BTreeMap<(String, String), u64>,
    /// The field type of newtype enums.
    reprs: BTreeMap<String, syn::Type>,
    /// Enum values, by `(enum, value name)`.
    values: BTreeMap<(String, String), String>,
    /// Top-level constants.
    constants: BTreeMap<String, String>,
}

impl Types {
    fn of(model: &Model, api: Api) -> Self {
        let mut t = Types::default();
        let items: Vec<&syn::Item> = model.api(api).types.iter().flat_map(|d| &d.items).collect();
        for item in &items {
            match item {
                syn::Item::Struct(s) => {
                    let name = s.ident.to_string();
                    match &s.fields {
                        syn::Fields::Unnamed(f) if f.unnamed.len() == 1 => {
                            t.reprs.insert(name.clone(), f.unnamed[0].ty.clone());
                            t.kinds.insert(name, "newtype".to_owned());
                        }
                        fields => {
                            t.fields.insert(name.clone(), named_fields(fields.iter()));
                            t.kinds.insert(name, "struct".to_owned());
                        }
                    }
                }
                syn::Item::Union(u) => {
                    let name = u.ident.to_string();
                    t.fields
                        .insert(name.clone(), named_fields(u.fields.named.iter()));
                    t.kinds.insert(name, "union".to_owned());
                }
                syn::Item::Enum(e) => {
                    let name = e.ident.to_string();
                    for v in &e.variants {
                        let value = v
                            .discriminant
                            .as_ref()
                            .map_or_else(String::new, |(_, e)| spell(e));
                        t.values.insert((name.clone(), v.ident.to_string()), value);
                    }
                    t.kinds.insert(name, "enum".to_owned());
                }
                syn::Item::Type(a) => {
                    let name = a.ident.to_string();
                    t.kinds
                        .insert(name.clone(), format!("alias of {}", spell(&a.ty)));
                    t.aliases.insert(name, (*a.ty).clone());
                }
                syn::Item::Use(u) => {
                    // bindgen's `pub use self::X_enum as X;`
                    if let syn::UseTree::Path(p) = &u.tree
                        && let syn::UseTree::Rename(r) = &*p.tree
                    {
                        let target = r.ident.to_string();
                        let name = r.rename.to_string();
                        t.kinds.insert(name.clone(), format!("alias of {target}"));
                        let ident = &r.ident;
                        t.aliases.insert(name, syn::parse_quote!(#ident));
                    }
                }
                syn::Item::Const(c) if c.ident == "_" => t.layout(&c.expr),
                syn::Item::Const(c) => {
                    t.constants.insert(c.ident.to_string(), spell(&c.expr));
                }
                syn::Item::Impl(i) if i.trait_.is_none() => {
                    let owner = spell(&i.self_ty);
                    for item in &i.items {
                        if let syn::ImplItem::Const(c) = item {
                            t.values
                                .insert((owner.clone(), c.ident.to_string()), enum_value(&c.expr));
                        }
                    }
                }
                _ => {}
            }
        }
        // A newtype with values is bindgen's enum.
        let enums: BTreeSet<String> = t.values.keys().map(|(o, _)| o.clone()).collect();
        for (name, kind) in &mut t.kinds {
            if kind == "newtype" {
                *kind = if enums.contains(name) {
                    "enum"
                } else {
                    "struct"
                }
                .to_owned();
            }
        }
        t
    }

    /// Reads one of bindgen's layout checks: `["Size of X"][size_of::<X>() - 16usize];` and
    /// `["Offset of field: X::f"][offset_of!(X, f) - 8usize];`.
    fn layout(&mut self, expr: &syn::Expr) {
        let syn::Expr::Block(block) = expr else {
            return;
        };
        for stmt in &block.block.stmts {
            let syn::Stmt::Expr(syn::Expr::Index(index), _) = stmt else {
                continue;
            };
            let syn::Expr::Array(label) = &*index.expr else {
                continue;
            };
            let Some(syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(label),
                ..
            })) = label.elems.first()
            else {
                continue;
            };
            let syn::Expr::Binary(b) = &*index.index else {
                continue;
            };
            let syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Int(n),
                ..
            }) = &*b.right
            else {
                continue;
            };
            let Ok(n) = n.base10_parse::<u64>() else {
                continue;
            };
            let label = label.value();
            if let Some(ty) = label.strip_prefix("Size of ") {
                self.sizes.insert(ty.to_owned(), n);
            } else if let Some(field) = label.strip_prefix("Offset of field: ")
                && let Some((ty, field)) = field.split_once("::")
            {
                self.offsets.insert((ty.to_owned(), field.to_owned()), n);
            }
        }
    }

    /// The size of the type named `name`, where the layout checks or the definitions give it.
    fn size_of(&self, name: &str, depth: u32) -> Option<u64> {
        if depth > 16 {
            return None;
        }
        if let Some(size) = self.sizes.get(name) {
            return Some(*size);
        }
        if let Some(ty) = self.aliases.get(name).or_else(|| self.reprs.get(name)) {
            return self.size_of_type(ty, depth + 1);
        }
        primitive_size(name)
    }

    fn size_of_type(&self, ty: &syn::Type, depth: u32) -> Option<u64> {
        match ty {
            syn::Type::Ptr(_) | syn::Type::FnPtr(_) | syn::Type::Reference(_) => Some(8),
            syn::Type::Array(a) => {
                let syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Int(n),
                    ..
                }) = &a.len
                else {
                    return None;
                };
                Some(self.size_of_type(&a.elem, depth)? * n.base10_parse::<u64>().ok()?)
            }
            syn::Type::Path(p) => {
                let last = p.path.segments.last()?;
                if last.ident == "Option" {
                    // `Option<unsafe extern "C" fn(..)>`: a nullable function pointer.
                    return Some(8);
                }
                self.size_of(&last.ident.to_string(), depth)
            }
            _ => None,
        }
    }
}

fn primitive_size(name: &str) -> Option<u64> {
    Some(match name {
        "c_char" | "c_schar" | "c_uchar" | "i8" | "u8" | "bool" => 1,
        "c_short" | "c_ushort" | "i16" | "u16" => 2,
        "c_int" | "c_uint" | "c_float" | "i32" | "u32" | "f32" => 4,
        "c_long" | "c_ulong" | "c_longlong" | "c_ulonglong" | "c_double" | "i64" | "u64"
        | "f64" | "isize" | "usize" => 8,
        _ => return None,
    })
}

fn named_fields<'a>(fields: impl Iterator<Item = &'a syn::Field>) -> Vec<(String, String)> {
    fields
        .filter_map(|f| Some((f.ident.as_ref()?.to_string(), spell(&f.ty))))
        .collect()
}

/// `X(0)` (a newtype enum's value) as `0`; anything else as spelled.
fn enum_value(expr: &syn::Expr) -> String {
    match expr {
        syn::Expr::Call(call) if call.args.len() == 1 => spell(&call.args[0]),
        other => spell(other),
    }
}

fn diff_types(api: Api, old: &Types, new: &Types, out: &mut Vec<Difference>) {
    let mut push = |section, name: &str, change| {
        out.push(Difference {
            api,
            section,
            name: name.to_owned(),
            change,
        })
    };
    let type_info = |t: &Types, name: &str| TypeInfo {
        kind: t.kinds[name].clone(),
        size: t.size_of(name, 0),
    };
    for name in old.kinds.keys() {
        if !new.kinds.contains_key(name) {
            push(
                Section::TypesRemoved,
                name,
                Change::TypeRemoved(type_info(old, name)),
            );
        }
    }
    for (name, kind) in &new.kinds {
        let Some(old_kind) = old.kinds.get(name) else {
            push(
                Section::TypesAdded,
                name,
                Change::TypeAdded(type_info(new, name)),
            );
            continue;
        };
        if old_kind != kind {
            push(
                Section::TypesChanged,
                name,
                Change::Kind {
                    from: old_kind.clone(),
                    to: kind.clone(),
                },
            );
        }
        if let (Some(a), Some(b)) = (old.size_of(name, 0), new.size_of(name, 0))
            && a != b
        {
            push(Section::TypesChanged, name, Change::Size { from: a, to: b });
        }
        let no_fields = Vec::new();
        let before = old.fields.get(name).unwrap_or(&no_fields);
        let after = new.fields.get(name).unwrap_or(&no_fields);
        for (field, ty) in before {
            match after.iter().find(|(f, _)| f == field) {
                None => push(
                    Section::TypesChanged,
                    name,
                    Change::FieldRemoved {
                        field: field.clone(),
                        ty: ty.clone(),
                    },
                ),
                Some((_, new_ty)) if new_ty != ty => push(
                    Section::TypesChanged,
                    name,
                    Change::FieldType {
                        field: field.clone(),
                        from: ty.clone(),
                        to: new_ty.clone(),
                    },
                ),
                Some(_) => {
                    let key = (name.clone(), field.clone());
                    if let (Some(a), Some(b)) = (old.offsets.get(&key), new.offsets.get(&key))
                        && a != b
                    {
                        push(
                            Section::TypesChanged,
                            name,
                            Change::FieldOffset {
                                field: field.clone(),
                                from: *a,
                                to: *b,
                            },
                        );
                    }
                }
            }
        }
        for (field, ty) in after {
            if !before.iter().any(|(f, _)| f == field) {
                push(
                    Section::TypesChanged,
                    name,
                    Change::FieldAdded {
                        field: field.clone(),
                        ty: ty.clone(),
                    },
                );
            }
        }
    }
}

fn diff_values(api: Api, old: &Types, new: &Types, out: &mut Vec<Difference>) {
    let mut push = |section, name: String, change| {
        out.push(Difference {
            api,
            section,
            name,
            change,
        })
    };
    compare_values(
        &old.values,
        &new.values,
        |(owner, name)| format!("{owner}::{name}"),
        [
            Section::EnumValuesRemoved,
            Section::EnumValuesChanged,
            Section::EnumValuesAdded,
        ],
        &mut push,
    );
    compare_values(
        &old.constants,
        &new.constants,
        String::clone,
        [
            Section::ConstantsRemoved,
            Section::ConstantsChanged,
            Section::ConstantsAdded,
        ],
        &mut push,
    );
}

/// Pushes one difference per key of `old` missing from `new` (`sections[0]`), per key whose
/// value changed (`sections[1]`), and per key only `new` has (`sections[2]`).
fn compare_values<K: Ord>(
    old: &BTreeMap<K, String>,
    new: &BTreeMap<K, String>,
    spelled: impl Fn(&K) -> String,
    [removed, changed, added]: [Section; 3],
    push: &mut impl FnMut(Section, String, Change),
) {
    for (key, value) in old {
        match new.get(key) {
            None => push(removed, spelled(key), Change::ValueRemoved(value.clone())),
            Some(v) if v != value => push(
                changed,
                spelled(key),
                Change::Value {
                    from: value.clone(),
                    to: v.clone(),
                },
            ),
            Some(_) => {}
        }
    }
    for (key, value) in new {
        if !old.contains_key(key) {
            push(added, spelled(key), Change::ValueAdded(value.clone()));
        }
    }
}

/// Tokens as a person would write them: `*mut c_void`, `Option<CUhostFn>`, without the
/// `::core::ffi::` bindgen spells out.
fn spell(tokens: &impl ToTokens) -> String {
    let mut s = tokens.to_token_stream().to_string();
    for (from, to) in [
        (":: core :: ffi :: ", ""),
        (":: core :: option :: ", ""),
        (" :: ", "::"),
        (":: ", "::"),
        ("* mut ", "*mut "),
        ("* const ", "*const "),
        (" < ", "<"),
        ("< ", "<"),
        (" >", ">"),
        (" ,", ","),
        ("( ", "("),
        (" )", ")"),
        ("[ ", "["),
        (" ]", "]"),
        (" ;", ";"),
    ] {
        s = s.replace(from, to);
    }
    s
}

/// A signature's type as [`spell`] spells tokens: `*mut c_void`, `CUstream`.
fn spell_type(ty: &CType) -> String {
    match ty {
        CType::Named(name) => ["::core::ffi::", "::core::option::"]
            .iter()
            .find_map(|prefix| name.strip_prefix(prefix))
            .unwrap_or(name)
            .to_owned(),
        CType::Pointer { mutable, to } => format!(
            "*{} {}",
            if *mutable { "mut" } else { "const" },
            spell_type(to)
        ),
        CType::Other(tokens) => tokens
            .parse::<proc_macro2::TokenStream>()
            .map_or_else(|_| tokens.clone(), |t| spell(&t)),
    }
}

fn per_thread(pt: &Option<PerThread>) -> String {
    match pt {
        Some(PerThread {
            symbol,
            version: Some(v),
        }) => format!("{symbol} at {v}"),
        Some(PerThread {
            symbol,
            version: None,
        }) => symbol.clone(),
        None => "none".to_owned(),
    }
}

fn function_info(f: &FunctionInfo) -> String {
    let mut out = match f.version {
        Some(v) => format!("ABI version {v}"),
        None => "no ABI version (resolved by symbol)".to_owned(),
    };
    if f.per_thread.is_some() {
        out.push_str(&format!(", per-thread {}", per_thread(&f.per_thread)));
    }
    out.push_str(&format!(", {}", f.signature));
    out
}

fn type_info(t: &TypeInfo) -> String {
    match t.size {
        Some(size) => format!("{}, {size} bytes", t.kind),
        None => t.kind.clone(),
    }
}

impl fmt::Display for Difference {
    /// One line: `+`, `-` or `~`, the name, and what changed.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.section.mark(), self.name)?;
        match &self.change {
            Change::FunctionAdded(i) | Change::FunctionRemoved(i) => {
                write!(f, ": {}", function_info(i))
            }
            Change::Version { from, to } => write!(f, ": ABI version {from} -> {to}"),
            Change::PerThread { from, to } => {
                write!(f, ": per-thread {} -> {}", per_thread(from), per_thread(to))
            }
            Change::Signature { from, to } => write!(f, ": signature {from} -> {to}"),
            Change::CName { from, to } => {
                let side = |s: &Option<String>| s.clone().unwrap_or_else(|| "none".to_owned());
                write!(f, ": maps onto {} -> {}", side(from), side(to))
            }
            Change::TypeAdded(t) | Change::TypeRemoved(t) => write!(f, ": {}", type_info(t)),
            Change::Kind { from, to } => write!(f, ": {from} -> {to}"),
            Change::Size { from, to } => write!(f, ": size {from} -> {to} bytes"),
            Change::FieldAdded { field, ty } => write!(f, ": field {field}: {ty} added"),
            Change::FieldRemoved { field, ty } => write!(f, ": field {field}: {ty} removed"),
            Change::FieldType { field, from, to } => {
                write!(f, ": field {field}: type {from} -> {to}")
            }
            Change::FieldOffset { field, from, to } => {
                write!(f, ": field {field}: offset {from} -> {to}")
            }
            Change::ValueAdded(v) | Change::ValueRemoved(v) => write!(f, " = {v}"),
            Change::Value { from, to } => write!(f, ": {from} -> {to}"),
        }
    }
}

impl fmt::Display for ModelDiff {
    /// A summary line, then for each API and section with differences a `## <api>: <section>
    /// (<count>)` heading and one line per difference.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "CTK {} -> {}: {} difference(s) in the models (+ only in {}, - only in {}, ~ changed)",
            self.from,
            self.to,
            self.differences.len(),
            self.to,
            self.from
        )?;
        let mut at = 0;
        while at < self.differences.len() {
            let first = &self.differences[at];
            let count = self.differences[at..]
                .iter()
                .take_while(|d| d.api == first.api && d.section == first.section)
                .count();
            writeln!(
                f,
                "## {}: {} ({count})",
                first.api.as_str(),
                first.section.heading()
            )?;
            for d in &self.differences[at..at + count] {
                writeln!(f, "{d}")?;
            }
            at += count;
        }
        writeln!(f, "## coverage: bound / declared by the headers")?;
        for (ctk, api, coverage) in &self.coverage {
            writeln!(f, "CTK {ctk} {}: {coverage}", api.as_str())?;
        }
        Ok(())
    }
}
