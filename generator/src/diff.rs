//! What changes between two targets' models: functions added and removed, ABI versions and
//! signatures that changed, the C names the headers' macros map onto other declarations, and types
//! (kinds, sizes, fields), enum values and constants added, removed or changed. Plain data with a
//! [`Display`](fmt::Display) of one line per difference under section headings, sorted, so the
//! same two models always print the same text. What `cargo xtask diff A B` prints.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::Ctk;
use crate::model::{Api, CType, Definitions, Function, Model, PerThreadVariant, Shape, spell};

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

/// What one API of one model defines besides functions, as `diff` compares it: each type's kind
/// and fields, over the model's [`Definitions`].
struct Types<'a> {
    /// The definitions.
    defs: &'a Definitions,
    /// Each type's kind: `struct`, `union`, `enum` (a Rust enum, or a newtype with values), or
    /// `alias of <target>`.
    kinds: BTreeMap<&'a str, String>,
    /// Fields of structs and unions, in order: name and type.
    fields: BTreeMap<&'a str, &'a [(String, CType)]>,
}

impl<'a> Types<'a> {
    fn of(model: &'a Model, api: Api) -> Self {
        let defs = &model.api(api).definitions;
        let enums: BTreeSet<&str> = defs.values.keys().map(|(o, _)| o.as_str()).collect();
        let (mut kinds, mut fields) = (BTreeMap::new(), BTreeMap::new());
        for (name, shape) in &defs.shapes {
            let name = name.as_str();
            let kind = match shape {
                Shape::Struct(f) | Shape::Union(f) => {
                    fields.insert(name, f.as_slice());
                    if matches!(shape, Shape::Union(_)) {
                        "union"
                    } else {
                        "struct"
                    }
                    .to_owned()
                }
                // A newtype with values is bindgen's enum.
                Shape::Tuple(t) if t.len() == 1 && enums.contains(name) => "enum".to_owned(),
                Shape::Tuple(_) => "struct".to_owned(),
                Shape::Alias(ty) => format!("alias of {}", spell_type(ty)),
                Shape::Rename(target) => format!("alias of {target}"),
            };
            kinds.insert(name, kind);
        }
        Types {
            defs,
            kinds,
            fields,
        }
    }

    /// The size of the type named `name`, where the layout checks or the definitions give it.
    fn size_of(&self, name: &str, depth: u32) -> Option<u64> {
        if depth > 16 {
            return None;
        }
        if let Some(size) = self.defs.sizes.get(name) {
            return Some(*size);
        }
        match self.defs.shapes.get(name) {
            Some(Shape::Alias(ty)) => return self.size_of_type(ty, depth + 1),
            Some(Shape::Rename(target)) => return self.size_of(target, depth + 1),
            Some(Shape::Tuple(t)) if t.len() == 1 => return self.size_of_type(&t[0], depth + 1),
            _ => {}
        }
        primitive_size(name)
    }

    fn size_of_type(&self, ty: &CType, depth: u32) -> Option<u64> {
        match ty {
            CType::Pointer { .. } | CType::Function { .. } => Some(8),
            CType::Array { of, len } => {
                let len: syn::LitInt = syn::parse_str(len).ok()?;
                Some(self.size_of_type(of, depth)? * len.base10_parse::<u64>().ok()?)
            }
            // `Option<unsafe extern "C" fn(..)>`: a nullable function pointer.
            CType::Generic { .. } if ty.last_ident() == Some("Option") => Some(8),
            CType::Named(_) | CType::Generic { .. } => self.size_of(ty.last_ident()?, depth),
            CType::Other(_) => None,
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
        let before = old.fields.get(name).copied().unwrap_or_default();
        let after = new.fields.get(name).copied().unwrap_or_default();
        for (field, ty) in before {
            match after.iter().find(|(f, _)| f == field) {
                None => push(
                    Section::TypesChanged,
                    name,
                    Change::FieldRemoved {
                        field: field.clone(),
                        ty: spell_type(ty),
                    },
                ),
                Some((_, new_ty)) if new_ty != ty => push(
                    Section::TypesChanged,
                    name,
                    Change::FieldType {
                        field: field.clone(),
                        from: spell_type(ty),
                        to: spell_type(new_ty),
                    },
                ),
                Some(_) => {
                    let key = (name.to_string(), field.clone());
                    if let (Some(a), Some(b)) =
                        (old.defs.offsets.get(&key), new.defs.offsets.get(&key))
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
                        ty: spell_type(ty),
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
        &old.defs.values,
        &new.defs.values,
        |(owner, name)| format!("{owner}::{name}"),
        [
            Section::EnumValuesRemoved,
            Section::EnumValuesChanged,
            Section::EnumValuesAdded,
        ],
        &mut push,
    );
    compare_values(
        &old.defs.constants,
        &new.defs.constants,
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

/// A type as [`spell`] spells its tokens: `*mut c_void`, `CUstream`.
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
        // Spelt from the tokens, as the headers' own types are never compared by hand.
        other => other
            .to_string()
            .parse::<proc_macro2::TokenStream>()
            .map_or_else(|_| other.to_string(), |t| spell(&t)),
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
