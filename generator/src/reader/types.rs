//! bindgen's items for one name, read into the model's data ([`TypeDef`]). The reading takes
//! what the data holds and looks no further; [`super::read_api`] then checks that the writer's
//! items for the data ([`crate::writer::type_shape`]) are bindgen's, token for token, so that
//! nothing bindgen emitted is dropped or changed on the way.

use quote::ToTokens;

use crate::model::{Api, CType, Definition, Enum, Enumerator, Field, Layout, Record, TypeDef};

/// The data of `items`, bindgen's items grouped under `name` ([`super::group_of`]); `None` where
/// they define no type or constant of a form the model knows.
pub fn type_def(api: Api, name: &str, items: &[syn::Item]) -> Option<TypeDef> {
    let mut defining = items.iter().filter(|i| {
        matches!(
            i,
            syn::Item::Struct(_) | syn::Item::Union(_) | syn::Item::Type(_) | syn::Item::Use(_)
        ) || matches!(i, syn::Item::Const(c) if c.ident != "_")
    });
    let (Some(item), None) = (defining.next(), defining.next()) else {
        return None;
    };
    let (attrs, definition) = match item {
        syn::Item::Const(c) => (
            &c.attrs,
            Definition::Constant {
                ty: CType::of(&c.ty),
                value: c.expr.to_token_stream().to_string(),
            },
        ),
        syn::Item::Type(t) => (&t.attrs, Definition::Alias(CType::of(&t.ty))),
        syn::Item::Use(u) => {
            let syn::UseTree::Path(p) = &u.tree else {
                return None;
            };
            let syn::UseTree::Rename(r) = &*p.tree else {
                return None;
            };
            (&u.attrs, Definition::Rename(r.ident.to_string()))
        }
        syn::Item::Struct(s) => match &s.fields {
            syn::Fields::Unnamed(f) => {
                let field = f.unnamed.first()?;
                let e = Enum {
                    repr: CType::of(&field.ty),
                    derives: derives(&s.attrs),
                    flags: items.iter().any(|i| trait_of(i) == Some("BitOr")),
                    values: enumerators(items),
                };
                (&s.attrs, Definition::Enum(e))
            }
            fields => (
                &s.attrs,
                Definition::Record(record(false, &s.attrs, fields.iter(), items)),
            ),
        },
        syn::Item::Union(u) => (
            &u.attrs,
            Definition::Record(record(true, &u.attrs, u.fields.named.iter(), items)),
        ),
        _ => return None,
    };
    Some(TypeDef {
        api,
        name: name.to_owned(),
        doc: doc(attrs),
        definition,
    })
}

/// The lines of the doc attributes among `attrs`.
pub fn doc(attrs: &[syn::Attribute]) -> Vec<String> {
    attrs
        .iter()
        .filter_map(|a| match &a.meta {
            syn::Meta::NameValue(nv) if nv.path.is_ident("doc") => match &nv.value {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) => Some(s.value()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

fn derives(attrs: &[syn::Attribute]) -> Vec<String> {
    let parse = syn::punctuated::Punctuated::<syn::Path, syn::Token![,]>::parse_terminated;
    attrs
        .iter()
        .filter(|a| a.path().is_ident("derive"))
        .filter_map(|a| a.parse_args_with(parse).ok())
        .flatten()
        .map(|p| p.to_token_stream().to_string())
        .collect()
}

/// The last segment of the trait an impl item implements.
fn trait_of(item: &syn::Item) -> Option<&str> {
    let syn::Item::Impl(i) = item else {
        return None;
    };
    let (path, _) = i.trait_.as_ref()?;
    let ident = &path.segments.last()?.ident;
    // An ident's text is not borrowed from it: name the traits the reading asks about.
    ["BitOr", "Default"].into_iter().find(|t| ident == t)
}

fn record<'a>(
    union: bool,
    attrs: &[syn::Attribute],
    fields: impl Iterator<Item = &'a syn::Field>,
    items: &[syn::Item],
) -> Record {
    let align = attrs
        .iter()
        .filter(|a| a.path().is_ident("repr"))
        .find_map(|a| {
            let mut align = None;
            let _ = a.parse_nested_meta(|m| {
                if m.path.is_ident("align") {
                    let content;
                    syn::parenthesized!(content in m.input);
                    align = content.parse::<syn::LitInt>()?.base10_parse().ok();
                }
                Ok(())
            });
            align
        });
    let fields = fields
        .map(|f| Field {
            name: f
                .ident
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default(),
            ty: CType::of(&f.ty),
            public: matches!(f.vis, syn::Visibility::Public(_)),
            doc: doc(&f.attrs),
        })
        .collect();
    let layout = items.iter().find_map(|i| match i {
        syn::Item::Const(c) if c.ident == "_" => layout(&c.expr),
        _ => None,
    });
    Record {
        union,
        align,
        derives: derives(attrs),
        zeroed_default: items.iter().any(|i| trait_of(i) == Some("Default")),
        fields,
        layout,
    }
}

/// Reads one of bindgen's layout-check blocks: `["Size of X"][size_of::<X>() - 16usize];`, the
/// same for the alignment, and `["Offset of field: X::f"][offset_of!(X, f) - 8usize];` for each
/// field.
fn layout(expr: &syn::Expr) -> Option<Layout> {
    let syn::Expr::Block(block) = expr else {
        return None;
    };
    let (mut size, mut align, mut offsets) = (None, None, Vec::new());
    for stmt in &block.block.stmts {
        let syn::Stmt::Expr(syn::Expr::Index(index), _) = stmt else {
            return None;
        };
        let syn::Expr::Array(label) = &*index.expr else {
            return None;
        };
        let Some(syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(label),
            ..
        })) = label.elems.first()
        else {
            return None;
        };
        let syn::Expr::Binary(b) = &*index.index else {
            return None;
        };
        let syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(n),
            ..
        }) = &*b.right
        else {
            return None;
        };
        let n = n.base10_parse::<u64>().ok()?;
        let label = label.value();
        if label.starts_with("Size of ") {
            size = Some(n);
        } else if label.starts_with("Alignment of ") {
            align = Some(n);
        } else if let Some(field) = label.strip_prefix("Offset of field: ") {
            let (_, field) = field.split_once("::")?;
            offsets.push((field.to_owned(), n));
        }
    }
    Some(Layout {
        size: size?,
        align: align?,
        offsets,
    })
}

/// The enumerators of an enumeration: the constants of its inherent impl among `items`.
fn enumerators(items: &[syn::Item]) -> Vec<Enumerator> {
    let mut out = Vec::new();
    for item in items {
        let syn::Item::Impl(i) = item else { continue };
        if i.trait_.is_some() {
            continue;
        }
        for member in &i.items {
            let syn::ImplItem::Const(c) = member else {
                continue;
            };
            // `pub const X: T = T(value);`
            let value = match &c.expr {
                syn::Expr::Call(call) if call.args.len() == 1 => &call.args[0],
                other => other,
            };
            out.push(Enumerator {
                name: c.ident.to_string(),
                value: value.to_token_stream().to_string(),
                doc: doc(&c.attrs),
            });
        }
    }
    out
}
