//! The types and constants of one API, as C defines them: what the reader makes of bindgen's
//! items ([`crate::reader`]) and the writer turns into Rust ([`crate::writer`]). Plain data: no
//! syntax tree and no Rust text beyond the spelling of a type ([`CType`]) or a value.

use super::{Api, CType};

/// One type or constant of an API's headers, with the header's doc comment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeDef {
    /// The API whose headers define it.
    pub api: Api,
    /// Its Rust name (bindgen's, after the reader's renames of anonymous types).
    pub name: String,
    /// The header's doc comment (Doxygen, as bindgen hands it over), one entry per line.
    pub doc: Vec<String>,
    /// What it is.
    pub definition: Definition,
}

/// What a name defines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Definition {
    /// A constant: an object-like macro (`#define CU_MEMHOSTALLOC_PORTABLE 0x01`, also those
    /// bindgen cannot evaluate, which the reader translates: `#define CU_STREAM_LEGACY
    /// ((CUstream)0x1)`).
    Constant {
        /// Its type.
        ty: CType,
        /// Its value, as Rust tokens (`1`, `(0x1) as CUstream`,
        /// `CUlaunchAttributeID_enum :: CU_LAUNCH_ATTRIBUTE_PRIORITY`).
        value: String,
    },
    /// A typedef of anything but an enumeration: `typedef struct CUstream_st *CUstream;`.
    Alias(CType),
    /// A typedef of an enumeration (`typedef enum CUctx_flags_enum {..} CUctx_flags;`): the name
    /// of the enumeration.
    Rename(String),
    /// A struct or a union.
    Record(Record),
    /// An enumeration.
    Enum(Enum),
}

/// A struct or a union.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// A union rather than a struct.
    pub union: bool,
    /// The alignment the header asks for beyond its members' (`__align__(64)`), if any.
    pub align: Option<u64>,
    /// The traits derived for it (bindgen's choice: `Debug`, `Default`, `Copy`, `Clone`).
    pub derives: Vec<String>,
    /// Whether `Default` is implemented as all bits zero, where it cannot be derived (a member
    /// is a pointer, a union or a long array).
    pub zeroed_default: bool,
    /// The fields, in order: the header's members, or one private `_unused` field for a type the
    /// headers only declare.
    pub fields: Vec<Field>,
    /// Size, alignment and field offsets, as libclang lays the type out (none for a type the
    /// headers only declare).
    pub layout: Option<Layout>,
}

/// A field of a [`Record`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    /// Its Rust name.
    pub name: String,
    /// Its type.
    pub ty: CType,
    /// Whether it is public (all but the `_unused` of a type the headers only declare).
    pub public: bool,
    /// The header's doc comment, one entry per line.
    pub doc: Vec<String>,
}

/// A [`Record`]'s layout, in bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Its size.
    pub size: u64,
    /// Its alignment.
    pub align: u64,
    /// Each field's offset, by name, in the fields' order.
    pub offsets: Vec<(String, u64)>,
}

/// An enumeration: a newtype of its integer type, with a constant per enumerator, so that a
/// value the headers of another toolkit add is still a value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Enum {
    /// The integer type that holds it (`::core::ffi::c_uint`).
    pub repr: CType,
    /// The traits derived for it.
    pub derives: Vec<String>,
    /// Whether its values are flags that combine with `|` and `&`.
    pub flags: bool,
    /// The enumerators, in the header's order.
    pub values: Vec<Enumerator>,
}

/// One enumerator of an [`Enum`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Enumerator {
    /// Its name.
    pub name: String,
    /// Its value, as Rust tokens (`0`, `- 1`).
    pub value: String,
    /// The header's doc comment, one entry per line.
    pub doc: Vec<String>,
}

impl TypeDef {
    /// Calls `f` with every word the definition spells besides the names it defines (its own,
    /// its fields', its enumerators'): the types and constants it names, and the other words of
    /// their paths (`core`, `ffi`).
    pub fn words(&self, f: &mut impl FnMut(&str)) {
        let mut spelt = |text: &str| {
            text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .filter(|w| !w.is_empty())
                .for_each(&mut *f);
        };
        match &self.definition {
            Definition::Constant { ty, value } => {
                spelt(&ty.to_string());
                spelt(value);
            }
            Definition::Alias(ty) => spelt(&ty.to_string()),
            Definition::Rename(of) => spelt(of),
            Definition::Record(r) => r.fields.iter().for_each(|f| spelt(&f.ty.to_string())),
            Definition::Enum(e) => {
                spelt(&e.repr.to_string());
                e.values.iter().for_each(|v| spelt(&v.value));
            }
        }
    }
}
