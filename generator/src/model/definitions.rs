//! What one API's types define, indexed by name from the model's types ([`super::TypeDef`]): the
//! shapes the layout oracle checks, the fields, sizes and values `cargo xtask diff` compares, and
//! the types through which a host function reaches CUDA.

use std::collections::{BTreeMap, BTreeSet};

use quote::ToTokens;

use super::{CType, Definition, TypeDef};

/// What a name defines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shape {
    /// A struct with named fields (bindgen's records).
    Struct(Vec<(String, CType)>),
    /// A tuple struct (bindgen's newtype enums: `pub struct CUevent_flags_enum(pub c_uint);`), or
    /// a unit struct (no fields).
    Tuple(Vec<CType>),
    /// A union.
    Union(Vec<(String, CType)>),
    /// A type alias: `pub type CUstream = *mut CUstream_st;`.
    Alias(CType),
    /// bindgen's typedef of a newtype enum: `pub use self::CUctx_flags_enum as CUctx_flags;`.
    Rename(String),
}

/// What one API's types define, by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Definitions {
    /// Each defined type's shape.
    pub shapes: BTreeMap<String, Shape>,
    /// Sizes from bindgen's layout checks.
    pub sizes: BTreeMap<String, u64>,
    /// Field offsets from bindgen's layout checks, by `(type, field)`.
    pub offsets: BTreeMap<(String, String), u64>,
    /// Enum values, by `(enum, value name)`, as [`spell`] spells them (a newtype enum's `X(0)` as
    /// `0`).
    pub values: BTreeMap<(String, String), String>,
    /// Top-level constants, as [`spell`] spells them.
    pub constants: BTreeMap<String, String>,
}

impl Definitions {
    /// What `types` define.
    pub fn of(types: &[TypeDef]) -> Definitions {
        let mut d = Definitions::default();
        for t in types {
            let name = &t.name;
            let shape = match &t.definition {
                Definition::Constant { value, .. } => {
                    d.constants.insert(name.clone(), spell_text(value));
                    continue;
                }
                Definition::Alias(ty) => Shape::Alias(ty.clone()),
                Definition::Rename(of) => Shape::Rename(of.clone()),
                Definition::Record(r) => {
                    if let Some(layout) = &r.layout {
                        d.sizes.insert(name.clone(), layout.size);
                        for (field, offset) in &layout.offsets {
                            d.offsets.insert((name.clone(), field.clone()), *offset);
                        }
                    }
                    let fields = r.fields.iter().map(|f| (f.name.clone(), f.ty.clone()));
                    match r.union {
                        true => Shape::Union(fields.collect()),
                        false => Shape::Struct(fields.collect()),
                    }
                }
                Definition::Enum(e) => {
                    for v in &e.values {
                        d.values
                            .insert((name.clone(), v.name.clone()), spell_text(&v.value));
                    }
                    Shape::Tuple(vec![e.repr.clone()])
                }
            };
            d.shapes.insert(name.clone(), shape);
        }
        d
    }

    /// The names of the types through which a caller's function pointer reaches CUDA:
    /// function-pointer aliases (`CUhostFn`, `cudaStreamCallback_t`), and every alias, struct or
    /// union that holds one of them, directly or through pointers, arrays and other such types
    /// (`CUDA_HOST_NODE_PARAMS_v2`, `cudaHostNodeParams`). Computed from the definitions, not from
    /// a list of names, so a new params struct of a new CTK is covered without anyone listing it.
    pub fn host_function_types(&self) -> BTreeSet<String> {
        // Each named type's component types: an alias's target, a struct's or union's fields.
        let parts: Vec<(&String, Vec<&CType>)> = self
            .shapes
            .iter()
            .filter_map(|(name, shape)| {
                let parts = match shape {
                    Shape::Alias(ty) => vec![ty],
                    Shape::Struct(fields) | Shape::Union(fields) => {
                        fields.iter().map(|(_, ty)| ty).collect()
                    }
                    Shape::Tuple(tys) => tys.iter().collect(),
                    Shape::Rename(_) => return None,
                };
                Some((name, parts))
            })
            .collect();
        let mut carriers = BTreeSet::new();
        // A fixed point: each pass adds the types that hold a type found by the pass before.
        loop {
            let before = carriers.len();
            for (name, tys) in &parts {
                if !carriers.contains(*name) && tys.iter().any(|t| t.carries(&carriers)) {
                    carriers.insert((*name).clone());
                }
            }
            if carriers.len() == before {
                return carriers;
            }
        }
    }
}

/// Tokens as a person would write them: `*mut c_void`, `Option<CUhostFn>`, without the
/// `::core::ffi::` bindgen spells out.
pub fn spell(tokens: &impl ToTokens) -> String {
    spell_text(&tokens.to_token_stream().to_string())
}

/// [`spell`] of tokens already printed.
pub fn spell_text(tokens: &str) -> String {
    let mut s = tokens.to_owned();
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
