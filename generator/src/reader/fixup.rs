//! What bindgen mistranslates or drops, put right on its output before the model is built, and
//! checked against what libclang says the headers declare ([`super::scan`]).
//!
//! - Nested anonymous types get names from their place, not their position:
//!   `CUDA_RESOURCE_DESC_st__bindgen_ty_1` (the type of the field `res`) becomes
//!   `CUDA_RESOURCE_DESC_st_res`. bindgen numbers them in declaration order, so a member added
//!   by a newer header renames every later one; a name from the field stays.
//! - C11 anonymous members (`CUmemLocation` from 13.2: `union { int id; struct {..} localized; };`)
//!   are fields that bindgen calls `__bindgen_anon_1`; they become `anon` (`anon2`, ... for
//!   more), of type `<struct>_anon`, documented with the C spelling they stand for
//!   (`loc.anon.id` where C writes `loc.id`).
//! - Every struct and union must hold exactly the fields the header declares, in order (with
//!   anonymous members' fields inlined, bindgen's keyword renames `type_`/`fn_` undone): a
//!   dropped field, a bitfield unit or an opaque blob fails generation instead of shipping.
//! - Object-like macros bindgen cannot evaluate, in the bound headers: casts of an integer to a
//!   handle or integer type (`#define CU_STREAM_LEGACY ((CUstream)0x1)`,
//!   `#define CU_LAUNCH_PARAM_END ((void*)CU_LAUNCH_PARAM_END_AS_INT)`) and names of enum
//!   constants (`#define CU_KERNEL_NODE_ATTRIBUTE_PRIORITY CU_LAUNCH_ATTRIBUTE_PRIORITY`) become
//!   typed constants.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use proc_macro2::Span;
use syn::visit_mut::{self, VisitMut};

/// The part of a name bindgen gives nested anonymous types.
const ANON_TYPE: &str = "__bindgen_ty_";
/// The prefix of the fields bindgen gives C11 anonymous members.
const ANON_FIELD: &str = "__bindgen_anon_";

fn field_name(f: &syn::Field) -> String {
    f.ident
        .as_ref()
        .map(ToString::to_string)
        .unwrap_or_default()
}

/// The named fields of a struct or union item, with its name.
fn record(item: &syn::Item) -> Option<(String, Vec<&syn::Field>)> {
    match item {
        syn::Item::Struct(s) => Some((s.ident.to_string(), s.fields.iter().collect())),
        syn::Item::Union(u) => Some((u.ident.to_string(), u.fields.named.iter().collect())),
        _ => None,
    }
}

/// The type name a field's type mentions at its top (through arrays).
fn named_type(ty: &syn::Type) -> Option<String> {
    match ty {
        syn::Type::Path(p) => p.path.get_ident().map(ToString::to_string),
        syn::Type::Array(a) => named_type(&a.elem),
        _ => None,
    }
}

/// The new name of an anonymous member field: `anon`, then `anon2`, `anon3`, ...
fn anon_field(old: &str) -> Option<String> {
    let n: u32 = old.strip_prefix(ANON_FIELD)?.parse().ok()?;
    Some(if n == 1 {
        "anon".to_owned()
    } else {
        format!("anon{n}")
    })
}

/// Renames nested anonymous types and anonymous member fields (see the module docs); an error
/// names a new name that an item of the headers already has.
pub fn name_anonymous(items: &mut [syn::Item]) -> Result<(), String> {
    // The parent and field of each anonymous type.
    let mut parent: BTreeMap<String, (String, String)> = BTreeMap::new();
    let mut names = BTreeSet::new();
    for item in items.iter() {
        if let Some((name, fields)) = record(item) {
            for f in fields {
                if let Some(ty) = named_type(&f.ty)
                    && ty.contains(ANON_TYPE)
                {
                    parent.insert(ty, (name.clone(), field_name(f)));
                }
            }
            names.insert(name);
        }
        if let syn::Item::Type(t) = item {
            names.insert(t.ident.to_string());
        }
    }
    fn new_name(ty: &str, parent: &BTreeMap<String, (String, String)>, depth: u32) -> String {
        match parent.get(ty) {
            Some((p, field)) if depth < 32 => {
                let p = new_name(p, parent, depth + 1);
                format!("{p}_{}", anon_field(field).unwrap_or_else(|| field.clone()))
            }
            _ => ty.to_owned(),
        }
    }
    let mut renames: HashMap<String, String> = HashMap::new();
    for ty in parent.keys() {
        let new = new_name(ty, &parent, 0);
        if names.contains(&new) {
            return Err(format!(
                "the anonymous type {ty} would be named {new}, which the headers already use"
            ));
        }
        renames.insert(ty.clone(), new);
    }
    let mut rename = Rename { renames: &renames };
    for item in items.iter_mut() {
        rename.visit_item_mut(item);
    }
    Ok(())
}

struct Rename<'a> {
    renames: &'a HashMap<String, String>,
}

impl Rename<'_> {
    fn tokens(&mut self, ts: proc_macro2::TokenStream) -> proc_macro2::TokenStream {
        use proc_macro2::{Group, TokenTree};
        ts.into_iter()
            .map(|t| match t {
                TokenTree::Ident(mut i) => {
                    self.visit_ident_mut(&mut i);
                    TokenTree::Ident(i)
                }
                TokenTree::Group(g) => {
                    let mut new = Group::new(g.delimiter(), self.tokens(g.stream()));
                    new.set_span(g.span());
                    TokenTree::Group(new)
                }
                other => other,
            })
            .collect()
    }
}

impl VisitMut for Rename<'_> {
    fn visit_ident_mut(&mut self, i: &mut syn::Ident) {
        let s = i.to_string();
        if let Some(new) = self.renames.get(&s) {
            *i = syn::Ident::new(new, i.span());
        } else if let Some(new) = anon_field(&s) {
            *i = syn::Ident::new(&new, i.span());
        }
    }

    fn visit_macro_mut(&mut self, m: &mut syn::Macro) {
        // `offset_of!(T, field)` in bindgen's layout checks: tokens, not syntax.
        m.tokens = self.tokens(std::mem::take(&mut m.tokens));
        visit_mut::visit_macro_mut(self, m);
    }

    fn visit_field_mut(&mut self, f: &mut syn::Field) {
        let anonymous = f
            .ident
            .as_ref()
            .is_some_and(|i| i.to_string().starts_with(ANON_FIELD));
        visit_mut::visit_field_mut(self, f);
        if anonymous {
            let name = field_name(f);
            let doc = format!(
                " A C11 anonymous member: C reaches its fields directly (`x.<field>`), Rust through this field (`x.{name}.<field>`)."
            );
            f.attrs.push(syn::parse_quote!(#[doc = #doc]));
        }
    }

    fn visit_lit_str_mut(&mut self, s: &mut syn::LitStr) {
        // The names are ASCII words, spelt the same in the literal's source as in its value:
        // look there before unescaping every doc comment of the headers.
        let source = s.token().to_string();
        if !source.contains(ANON_TYPE) && !source.contains(ANON_FIELD) {
            return;
        }
        let value = s.value();
        // Compiled once: Unicode `\w` makes a large automaton, and building it for every
        // literal that names an anonymous member was about 8% of a regen's CPU time.
        static WORD: std::sync::LazyLock<regex::Regex> =
            std::sync::LazyLock::new(|| regex::Regex::new(r"\w+").expect("a valid regex"));
        let new = WORD.replace_all(&value, |c: &regex::Captures<'_>| {
            let w = &c[0];
            self.renames
                .get(w)
                .cloned()
                .or_else(|| anon_field(w))
                .unwrap_or_else(|| w.to_owned())
        });
        *s = syn::LitStr::new(&new, s.span());
    }
}

/// bindgen's name for a C field: Rust keywords get a trailing `_`.
fn c_name(rust: &str) -> &str {
    match rust.strip_suffix('_') {
        Some(c) if syn::parse_str::<syn::Ident>(c).is_err() => c,
        _ => rust,
    }
}

/// Every struct and union whose fields differ from the header's (see the module docs), one
/// line each.
pub fn field_mismatches(
    items: &[syn::Item],
    declared: &BTreeMap<String, Vec<String>>,
) -> Vec<String> {
    let records: HashMap<String, Vec<&syn::Field>> = items.iter().filter_map(record).collect();
    fn flat(
        fields: &[&syn::Field],
        records: &HashMap<String, Vec<&syn::Field>>,
        depth: u32,
    ) -> Vec<String> {
        let mut out = Vec::new();
        for f in fields {
            let name = field_name(f);
            let is_anon = name == "anon"
                || name
                    .strip_prefix("anon")
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
            match named_type(&f.ty).and_then(|t| records.get(&t)) {
                Some(inner) if is_anon && depth < 32 => out.extend(flat(inner, records, depth + 1)),
                _ => out.push(c_name(&name).to_owned()),
            }
        }
        out
    }
    let mut problems = Vec::new();
    for (name, c_fields) in declared {
        let Some(fields) = records.get(name) else {
            continue;
        };
        let rust = flat(fields, &records, 0);
        if &rust != c_fields {
            problems.push(format!(
                "{name}: bindgen emits the fields [{}], the header declares [{}]",
                rust.join(", "),
                c_fields.join(", ")
            ));
        }
    }
    problems
}

/// The integer literal of a macro token, if it is one (`0x1`, `12`, `2u`).
fn int_literal(token: &str) -> Option<syn::LitInt> {
    let lit: syn::LitInt = syn::parse_str(token.trim_end_matches(['u', 'U', 'l', 'L'])).ok()?;
    lit.base10_parse::<u64>().ok()?;
    Some(lit)
}

/// Typed constants for the macros of `bound` that bindgen dropped (see the module docs).
/// `items` is bindgen's output, `macros` every object-like macro's tokens after its name.
pub fn macro_constants(
    items: &[syn::Item],
    macros: &HashMap<String, Vec<String>>,
    bound: &BTreeSet<String>,
) -> Vec<syn::Item> {
    // What bindgen emitted: top-level names, and enum constants by name → their type.
    let mut emitted: BTreeSet<String> = BTreeSet::new();
    let mut integers: BTreeSet<String> = BTreeSet::new();
    let mut enum_constants: HashMap<String, syn::Ident> = HashMap::new();
    let mut aliases: HashMap<String, syn::Ident> = HashMap::new();
    for item in items {
        match item {
            syn::Item::Const(c) => {
                emitted.insert(c.ident.to_string());
                integers.insert(c.ident.to_string());
            }
            syn::Item::Type(t) => {
                emitted.insert(t.ident.to_string());
                if let Some(target) = named_type(&t.ty) {
                    aliases.entry(target).or_insert_with(|| t.ident.clone());
                }
            }
            syn::Item::Struct(s) => {
                emitted.insert(s.ident.to_string());
            }
            syn::Item::Fn(f) => {
                emitted.insert(f.sig.ident.to_string());
            }
            syn::Item::ForeignMod(m) => {
                for i in &m.items {
                    if let syn::ForeignItem::Fn(f) = i {
                        emitted.insert(f.sig.ident.to_string());
                    }
                }
            }
            syn::Item::Impl(i) if i.trait_.is_none() => {
                if let Some(ty) = named_type(&i.self_ty) {
                    for member in &i.items {
                        if let syn::ImplItem::Const(c) = member {
                            enum_constants.insert(
                                c.ident.to_string(),
                                syn::Ident::new(&ty, Span::call_site()),
                            );
                        }
                    }
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    for name in bound {
        if emitted.contains(name) || enum_constants.contains_key(name) {
            continue;
        }
        let Some(tokens) = macros.get(name) else {
            continue;
        };
        let tokens: Vec<&str> = tokens.iter().map(String::as_str).collect();
        let ident = syn::Ident::new(name, Span::call_site());
        let doc = format!(
            " `#define {name} {}` (a constant bindgen does not translate).",
            tokens.join(" ")
        );
        // `((T)X)` or `((T*)X)`, X an integer literal, `-` literal or an emitted integer constant.
        let cast = match tokens.as_slice() {
            ["(", "(", ty, ")", rest @ .., ")"] => Some((vec![*ty], rest)),
            ["(", "(", ty, "*", ")", rest @ .., ")"] => Some((vec![*ty, "*"], rest)),
            _ => None,
        };
        if let Some((ty, value)) = cast {
            let value: Option<syn::Expr> = match value {
                [v] => int_literal(v).map(|l| syn::parse_quote!(#l)).or_else(|| {
                    integers.contains(*v).then(|| {
                        let v = syn::Ident::new(v, Span::call_site());
                        syn::parse_quote!(#v)
                    })
                }),
                ["-", v] => int_literal(v).map(|l| syn::parse_quote!(-#l)),
                _ => None,
            };
            let ty: Option<syn::Type> = match ty.as_slice() {
                ["void", "*"] => Some(syn::parse_quote!(*mut ::core::ffi::c_void)),
                ["int"] => Some(syn::parse_quote!(::core::ffi::c_int)),
                [t] if emitted.contains(*t) => {
                    let t = syn::Ident::new(t, Span::call_site());
                    Some(syn::parse_quote!(#t))
                }
                _ => None,
            };
            if let (Some(value), Some(ty)) = (value, ty) {
                // An integer (or address) given a CUDA type, exactly as the C cast does; the
                // address is never dereferenced (it is a sentinel the API recognises).
                out.push(syn::parse_quote! {
                    #[doc = #doc]
                    pub const #ident: #ty = (#value) as #ty;
                });
            }
            continue;
        }
        // `#define A B`, B an enum constant: A is B, of B's type (or its typedef).
        if let [target] = tokens.as_slice()
            && let Some(ty) = enum_constants.get(*target)
        {
            let target = syn::Ident::new(target, Span::call_site());
            let alias = aliases.get(&ty.to_string()).unwrap_or(ty);
            out.push(syn::parse_quote! {
                #[doc = #doc]
                pub const #ident: #alias = #ty::#target;
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::ToTokens;

    #[test]
    fn anonymous_members_are_named_after_their_place() {
        let mut file: syn::File = syn::parse_quote! {
            pub struct L_st { pub type_: u32, pub __bindgen_anon_1: L_st__bindgen_ty_1 }
            pub union L_st__bindgen_ty_1 { pub id: i32, pub localized: L_st__bindgen_ty_1__bindgen_ty_1 }
            pub struct L_st__bindgen_ty_1__bindgen_ty_1 { pub deviceId: u8 }
            const _: () = { ["Size of L_st__bindgen_ty_1"][0]; };
        };
        name_anonymous(&mut file.items).unwrap();
        let text = file.to_token_stream().to_string();
        assert!(!text.contains("bindgen"), "{text}");
        assert!(text.contains("pub anon : L_st_anon"), "{text}");
        assert!(text.contains("pub union L_st_anon {"), "{text}");
        assert!(text.contains("pub struct L_st_anon_localized"), "{text}");
        assert!(text.contains("\"Size of L_st_anon\""), "{text}");
        let declared = BTreeMap::from([(
            "L_st".to_owned(),
            vec!["type".to_owned(), "id".to_owned(), "localized".to_owned()],
        )]);
        assert!(field_mismatches(&file.items, &declared).is_empty());
    }

    #[test]
    fn a_dropped_field_is_reported() {
        let file: syn::File = syn::parse_quote! {
            pub struct S { pub a: u32, pub _bitfield_1: u8 }
        };
        let declared = BTreeMap::from([("S".to_owned(), vec!["a".to_owned(), "b".to_owned()])]);
        assert_eq!(
            field_mismatches(&file.items, &declared),
            ["S: bindgen emits the fields [a, _bitfield_1], the header declares [a, b]"]
        );
    }

    #[test]
    fn cast_and_enum_alias_macros_become_constants() {
        let file: syn::File = syn::parse_quote! {
            pub type CUstream = *mut CUstream_st;
            pub struct CUstream_st { _unused: [u8; 0] }
            pub const CU_END_AS_INT: u32 = 0;
            pub struct CUlaunchAttributeID_enum(pub u32);
            impl CUlaunchAttributeID_enum { pub const CU_LAUNCH_ATTRIBUTE_PRIORITY: CUlaunchAttributeID_enum = CUlaunchAttributeID_enum(8); }
            pub type CUlaunchAttributeID = CUlaunchAttributeID_enum;
        };
        let spell = |s: &str| s.split(' ').map(str::to_owned).collect::<Vec<_>>();
        let macros = HashMap::from([
            ("CU_STREAM_LEGACY".to_owned(), spell("( ( CUstream ) 0x1 )")),
            ("CU_END".to_owned(), spell("( ( void * ) CU_END_AS_INT )")),
            ("CU_DEVICE_CPU".to_owned(), spell("( ( CUnknown ) - 1 )")),
            (
                "CU_KNA_PRIORITY".to_owned(),
                spell("CU_LAUNCH_ATTRIBUTE_PRIORITY"),
            ),
        ]);
        let bound = macros.keys().cloned().collect();
        let out: Vec<String> = macro_constants(&file.items, &macros, &bound)
            .iter()
            .map(|i| {
                let mut i = i.clone();
                if let syn::Item::Const(c) = &mut i {
                    c.attrs.clear();
                }
                i.to_token_stream().to_string()
            })
            .collect();
        assert_eq!(
            out,
            [
                "pub const CU_END : * mut :: core :: ffi :: c_void = (CU_END_AS_INT) as * mut :: core :: ffi :: c_void ;",
                "pub const CU_KNA_PRIORITY : CUlaunchAttributeID = CUlaunchAttributeID_enum :: CU_LAUNCH_ATTRIBUTE_PRIORITY ;",
                "pub const CU_STREAM_LEGACY : CUstream = (0x1) as CUstream ;",
            ]
        );
    }
}
