//! The Rust of the model's types and constants: each [`TypeDef`] as the items bindgen emits for
//! it ([`translation`]: the reader checks, for every type it reads, that these are bindgen's items
//! token for token, so the bindings stay bindgen's translation), and what the writer adds
//! ([`conversions`]).

use proc_macro2::{Ident, Literal, Span, TokenStream};
use quote::quote;

use crate::model::{CType, Definition, Enum, Record, TypeDef};

/// The items of `def`, as tokens (doc comments still the headers' Doxygen): its
/// [`translation`], then its [`conversions`].
pub fn tokens(def: &TypeDef) -> TokenStream {
    let mut tokens = translation(def);
    tokens.extend(conversions(def));
    tokens
}

/// The items bindgen emits for `def`.
pub fn translation(def: &TypeDef) -> TokenStream {
    translation_with(def, &mut doxygen)
}

/// [`translation`], each doc attribute's string stood in for by the identifier [`DOC_STRING`]:
/// what the reader compares with bindgen's items, whose doc strings the data holds as they are.
pub fn shape(def: &TypeDef) -> TokenStream {
    let string = ident(DOC_STRING);
    translation_with(def, &mut |lines| {
        lines.iter().map(|_| quote!(#[doc = #string])).collect()
    })
}

/// What stands for a doc attribute's string in a type's [`shape`].
pub const DOC_STRING: &str = "__doc_string__";

/// The doc attributes bindgen emits for the doc comment `lines`.
fn doxygen(lines: &[String]) -> Vec<TokenStream> {
    lines.iter().map(|l| quote!(#[doc = #l])).collect()
}

/// [`tokens`], each doc comment's attributes made by `docs` (the writer's Markdown).
pub(super) fn tokens_with(def: &TypeDef, docs: &mut Docs<'_>) -> TokenStream {
    let mut tokens = translation_with(def, docs);
    tokens.extend(conversions(def));
    tokens
}

/// What makes the attributes of a doc comment from its lines.
pub(super) type Docs<'a> = dyn FnMut(&[String]) -> Vec<TokenStream> + 'a;

/// [`translation`], each doc comment's attributes made by `docs`.
fn translation_with(def: &TypeDef, docs: &mut Docs<'_>) -> TokenStream {
    let name = ident(&def.name);
    let doc = docs(&def.doc);
    match &def.definition {
        Definition::Constant { ty, value } => {
            let (ty, value) = (ctype(ty), parsed(value));
            quote!(#(#doc)* pub const #name: #ty = #value;)
        }
        Definition::Alias(ty) => {
            let ty = ctype(ty);
            quote!(#(#doc)* pub type #name = #ty;)
        }
        Definition::Rename(of) => {
            let of = ident(of);
            quote!(#(#doc)* pub use self::#of as #name;)
        }
        Definition::Record(r) => record(&name, &doc, r, docs),
        Definition::Enum(e) => enumeration(&name, &doc, e, docs),
    }
}

fn record(name: &Ident, doc: &[TokenStream], r: &Record, docs: &mut Docs<'_>) -> TokenStream {
    let keyword = if r.union {
        quote!(union)
    } else {
        quote!(struct)
    };
    let align = r.align.map(|n| {
        let n = Literal::u64_unsuffixed(n);
        quote!(#[repr(align(#n))])
    });
    let derive = derive(&r.derives);
    let fields = r.fields.iter().map(|f| {
        let (doc, field, ty) = (docs(&f.doc), ident(&f.name), ctype(&f.ty));
        let public = f.public.then(|| quote!(pub));
        quote!(#(#doc)* #public #field: #ty,)
    });
    let mut out = quote! {
        #(#doc)*
        #[repr(C)]
        #align
        #derive
        pub #keyword #name { #(#fields)* }
    };
    if let Some(layout) = &r.layout {
        let check = |label: String, of: TokenStream, value: u64| {
            let value = Literal::usize_suffixed(value as usize);
            quote!([#label][#of - #value];)
        };
        let mut checks = vec![
            check(
                format!("Size of {name}"),
                quote!(::core::mem::size_of::<#name>()),
                layout.size,
            ),
            check(
                format!("Alignment of {name}"),
                quote!(::core::mem::align_of::<#name>()),
                layout.align,
            ),
        ];
        for (field, offset) in &layout.offsets {
            let label = format!("Offset of field: {name}::{field}");
            let field = ident(field);
            checks.push(check(
                label,
                quote!(::core::mem::offset_of!(#name, #field)),
                *offset,
            ));
        }
        out.extend(quote! {
            #[allow(clippy::unnecessary_operation, clippy::identity_op)]
            const _: () = { #(#checks)* };
        });
    }
    if r.zeroed_default {
        out.extend(quote! {
            impl Default for #name {
                fn default() -> Self {
                    let mut s = ::core::mem::MaybeUninit::<Self>::uninit();
                    unsafe {
                        ::core::ptr::write_bytes(s.as_mut_ptr(), 0, 1);
                        s.assume_init()
                    }
                }
            }
        });
    }
    out
}

fn enumeration(name: &Ident, doc: &[TokenStream], e: &Enum, docs: &mut Docs<'_>) -> TokenStream {
    let mut out = TokenStream::new();
    if !e.values.is_empty() {
        let values = e.values.iter().map(|v| {
            let (doc, value_name, value) = (docs(&v.doc), ident(&v.name), parsed(&v.value));
            quote!(#(#doc)* pub const #value_name: #name = #name(#value);)
        });
        out.extend(quote!(impl #name { #(#values)* }));
    }
    if e.flags {
        out.extend(quote! {
            impl ::core::ops::BitOr<#name> for #name {
                type Output = Self;
                #[inline]
                fn bitor(self, other: Self) -> Self {
                    #name(self.0 | other.0)
                }
            }
            impl ::core::ops::BitOrAssign for #name {
                #[inline]
                fn bitor_assign(&mut self, rhs: #name) {
                    self.0 |= rhs.0;
                }
            }
            impl ::core::ops::BitAnd<#name> for #name {
                type Output = Self;
                #[inline]
                fn bitand(self, other: Self) -> Self {
                    #name(self.0 & other.0)
                }
            }
            impl ::core::ops::BitAndAssign for #name {
                #[inline]
                fn bitand_assign(&mut self, rhs: #name) {
                    self.0 &= rhs.0;
                }
            }
        });
    }
    let (repr, derive) = (ctype(&e.repr), derive(&e.derives));
    out.extend(quote! {
        #[repr(transparent)]
        #(#doc)*
        #derive
        pub struct #name(pub #repr);
    });
    out
}

/// What the writer adds to bindgen's items for `def`. C passes an enumerator wherever it takes an
/// integer (`cuGraphInstantiate(.., unsigned long long flags)` with
/// `CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH`): an enumeration converts into the integers
/// that hold all its values (`u32` and `u64`, or `i32` and `i64`) with `From`, so that
/// `flag.into()` is what C's implicit conversion is.
pub fn conversions(def: &TypeDef) -> TokenStream {
    let mut out = TokenStream::new();
    let Definition::Enum(e) = &def.definition else {
        return out;
    };
    let name = ident(&def.name);
    let integers: &[&str] = match e.repr.last_ident() {
        Some("c_uint") => &["u32", "u64"],
        Some("c_int") => &["i32", "i64"],
        _ => &[],
    };
    for int in integers {
        let int = ident(int);
        out.extend(quote! {
            impl ::core::convert::From<#name> for #int {
                #[inline]
                fn from(value: #name) -> #int {
                    value.0 as #int
                }
            }
        });
    }
    out
}

fn derive(traits: &[String]) -> Option<TokenStream> {
    let traits = traits.iter().map(|t| ident(t));
    (traits.len() > 0).then(|| quote!(#[derive(#(#traits),*)]))
}

fn ident(name: &str) -> Ident {
    Ident::new(name, Span::call_site())
}

fn ctype(ty: &CType) -> TokenStream {
    parsed(&ty.to_string())
}

/// Tokens the reader took from bindgen's (a value, a type), lexed again.
fn parsed(tokens: &str) -> TokenStream {
    tokens
        .parse()
        .unwrap_or_else(|e| panic!("the reader's tokens lex again ({tokens}): {e}"))
}
