//! The module templates (`templates/target_mod.rs`, `bindings_mod.rs`, `layout.rs`): the
//! committed ones fill, and a misspelt placeholder in any of them (an identifier, a word of a doc
//! comment or string literal, a repetition) stops generation with one line that names the
//! template and the placeholder. Needs gcc (the layout oracle), no network.

use std::path::{Path, PathBuf};

use hostcb_generator::Ctk;
use hostcb_generator::layout;
use hostcb_generator::model::{
    Api, ApiModel, CType, Definition, Field, Model, Record, Summary, TypeDef, TypeText,
};
use hostcb_generator::writer::{self, TemplateError, Templates};

fn templates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../templates")
}

/// The committed templates, read from a copy in `dir` where `name` has `from` replaced by `to`.
fn edited(dir: &Path, name: &str, from: &str, to: &str) -> Templates {
    for entry in std::fs::read_dir(templates_dir()).unwrap() {
        let entry = entry.unwrap();
        let mut text = std::fs::read_to_string(entry.path()).unwrap();
        if entry.file_name() == name {
            assert_eq!(text.matches(from).count(), 1, "{name} holds `{from}` once");
            text = text.replacen(from, to, 1);
        }
        std::fs::write(dir.join(entry.file_name()), text).unwrap();
    }
    Templates::load(dir).expect("a misspelt placeholder still parses")
}

/// A made-up 13.0 target: a driver API with one struct, an empty runtime API.
fn model() -> Model {
    let field = |name: &str, ty: &str| Field {
        name: name.to_owned(),
        ty: CType::Named(ty.to_owned()),
        public: true,
        doc: Vec::new(),
    };
    let pair = TypeDef {
        api: Api::Driver,
        name: "pair".to_owned(),
        doc: Vec::new(),
        definition: Definition::Record(Record {
            union: false,
            align: None,
            derives: Vec::new(),
            zeroed_default: false,
            fields: vec![field("a", "c_int"), field("b", "c_char")],
            layout: None,
        }),
    };
    let text = TypeText {
        api: Api::Driver,
        name: pair.name.clone(),
        text: writer::type_tokens(&pair).to_string(),
        key: String::new(),
        uses: Vec::new(),
    };
    Model {
        ctk: Ctk::new(13, 0),
        driver: ApiModel::new(
            Api::Driver,
            Vec::new(),
            vec![pair],
            vec![text],
            Default::default(),
        ),
        runtime: ApiModel::new(
            Api::Runtime,
            Vec::new(),
            Vec::new(),
            Vec::new(),
            Default::default(),
        ),
    }
}

/// Writes the module file of template `name` for [`model`].
fn write(name: &str, templates: &Templates) -> Result<writer::Written, TemplateError> {
    let model = model();
    let parsed = templates.parse();
    match name {
        "target_mod.rs" => writer::write_target_mod(&Summary::of(&model), "unix", &parsed),
        "bindings_mod.rs" => writer::write_bindings_mod(&[&Summary::of(&model)], &parsed),
        "layout.rs" => {
            let headers = tempfile::tempdir().unwrap();
            let cuda_h = "typedef struct pair { int a; char b; } pair;\n";
            std::fs::write(headers.path().join("cuda.h"), cuda_h).unwrap();
            std::fs::write(headers.path().join("cudaTypedefs.h"), "").unwrap();
            std::fs::write(headers.path().join("cuda_runtime_api.h"), "").unwrap();
            let oracle = layout::target_file(&model, &[headers.path().to_path_buf()])
                .expect("gcc's numbers for the made-up headers");
            writer::write_layout(&oracle.values, &parsed)
        }
        _ => unreachable!("{name} is no module template"),
    }
}

#[test]
fn the_committed_module_templates_fill() {
    let templates = Templates::load(&templates_dir()).unwrap();
    for name in ["target_mod.rs", "bindings_mod.rs", "layout.rs"] {
        write(name, &templates).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn a_misspelt_placeholder_in_a_module_template_is_refused() {
    for (name, from, to, misspelt) in [
        // An identifier: the name of the target's part of for_each_target!.
        (
            "target_mod.rs",
            "macro_rules! __PART__",
            "macro_rules! __PRAT__",
            "__PRAT__",
        ),
        // A word of a doc comment.
        (
            "target_mod.rs",
            "(`__SONAME__`)",
            "(`__SONMAE__`)",
            "__SONMAE__",
        ),
        // A word of a string literal (an attribute's), within a repetition.
        (
            "bindings_mod.rs",
            "#[cfg(feature = \"__FEATURE__\")]",
            "#[cfg(feature = \"__FAETURE__\")]",
            "__FAETURE__",
        ),
        // A repetition: its name, left unfilled with what it holds.
        (
            "bindings_mod.rs",
            "__EACH_MAJOR__! {\n",
            "__EACH_MAJRO__! {\n",
            "__EACH_MAJRO__, __MAJOR__",
        ),
        // A whole string literal, in the test repeated per API.
        (
            "layout.rs",
            "report(\"__CTK__\"",
            "report(\"__CKT__\"",
            "__CKT__",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let templates = edited(dir.path(), name, from, to);
        let err = write(name, &templates)
            .err()
            .unwrap_or_else(|| panic!("{name} with `{to}` was filled"))
            .to_string();
        let want = format!(
            "the template {} names the placeholder(s) {misspelt}, which the writer has no value for: fix their spelling (its header lists those it fills)",
            dir.path().join(name).display()
        );
        assert_eq!(err, want, "{name} with `{to}`");
    }
}
