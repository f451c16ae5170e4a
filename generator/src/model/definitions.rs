//! What one API's types define, as C-level data read once from bindgen's items: the shapes the
//! layout oracle checks, the fields, sizes and values `cargo xtask diff` compares, and the types
//! through which a host function reaches CUDA. The writer emits the items themselves
//! ([`super::TypeDef::text`]).

use std::collections::{BTreeMap, BTreeSet};

use quote::ToTokens;

use super::CType;

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
    /// A Rust enum.
    Enum,
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
    /// The generic structs and unions (bindgen's helpers, `__BindgenBitfieldUnit<Storage>`).
    pub generic: BTreeSet<String>,
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
    /// What `items` (bindgen's, or a generated file's) define.
    pub fn of<'a>(items: impl IntoIterator<Item = &'a syn::Item>) -> Definitions {
        let mut d = Definitions::default();
        let named = |fields: &syn::FieldsNamed| -> Vec<(String, CType)> {
            fields
                .named
                .iter()
                .filter_map(|f| Some((f.ident.as_ref()?.to_string(), CType::of(&f.ty))))
                .collect()
        };
        for item in items {
            let (name, shape, generic) = match item {
                syn::Item::Struct(s) => {
                    let shape = match &s.fields {
                        syn::Fields::Named(f) => Shape::Struct(named(f)),
                        fields => Shape::Tuple(fields.iter().map(|f| CType::of(&f.ty)).collect()),
                    };
                    (&s.ident, shape, !s.generics.params.is_empty())
                }
                syn::Item::Union(u) => (
                    &u.ident,
                    Shape::Union(named(&u.fields)),
                    !u.generics.params.is_empty(),
                ),
                syn::Item::Enum(e) => {
                    let name = e.ident.to_string();
                    for v in &e.variants {
                        let value = v
                            .discriminant
                            .as_ref()
                            .map_or_else(String::new, |(_, e)| spell(e));
                        d.values.insert((name.clone(), v.ident.to_string()), value);
                    }
                    (&e.ident, Shape::Enum, false)
                }
                syn::Item::Type(a) => (&a.ident, Shape::Alias(CType::of(&a.ty)), false),
                syn::Item::Use(u) => {
                    let syn::UseTree::Path(p) = &u.tree else {
                        continue;
                    };
                    let syn::UseTree::Rename(r) = &*p.tree else {
                        continue;
                    };
                    (&r.rename, Shape::Rename(r.ident.to_string()), false)
                }
                syn::Item::Const(c) if c.ident == "_" => {
                    d.layout(&c.expr);
                    continue;
                }
                syn::Item::Const(c) => {
                    d.constants.insert(c.ident.to_string(), spell(&c.expr));
                    continue;
                }
                syn::Item::Impl(i) if i.trait_.is_none() => {
                    let owner = spell(&i.self_ty);
                    for item in &i.items {
                        if let syn::ImplItem::Const(c) = item {
                            let value = match &c.expr {
                                syn::Expr::Call(call) if call.args.len() == 1 => {
                                    spell(&call.args[0])
                                }
                                other => spell(other),
                            };
                            d.values.insert((owner.clone(), c.ident.to_string()), value);
                        }
                    }
                    continue;
                }
                _ => continue,
            };
            let name = name.to_string();
            if generic {
                d.generic.insert(name.clone());
            }
            d.shapes.insert(name, shape);
        }
        d
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
                    Shape::Enum | Shape::Rename(_) => return None,
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
