//! The whole pipeline, in memory: inputs → reader → model → writer → sealed files, for one target
//! ([`generate`]) and for the whole generated crate ([`generate_crate`]: every file regen writes
//! and check compares). Nothing is written here; [`crate::emit::ensure_tree`] writes or checks
//! the output.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::Ctk;
use crate::audit;
use crate::config::Config;
use crate::emit::{self, EmitError, GeneratedFile};
use crate::inputs::{InputError, Inputs};
use crate::layout::{self, LayoutError};
use crate::model::{ApiModel, Model};
use crate::reader::{self, HeaderSet, ReadError};
use crate::writer::{self, Templates};

/// Anything that stops generation; each message is one line that says what to do.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    /// Fetching or checking the inputs failed.
    #[error(transparent)]
    Input(#[from] InputError),
    /// bindgen or the model failed.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// A placeholder of a template reached the output unfilled (a misspelt placeholder).
    #[error(
        "{path}: the template placeholder(s) {names} were left unfilled; the generator fills only the placeholders templates/*.rs lists, so fix their spelling there (nothing was written)"
    )]
    Placeholder {
        /// The file, relative to the generated crate.
        path: PathBuf,
        /// Every unfilled placeholder, joined with `, `.
        names: String,
    },
    /// A host-function wrapper does more than forward its arguments (a template or writer bug).
    #[error(
        "the {api} wrappers of CTK {ctk} fail the no-trampoline audit: {violations}; fix templates/{api}_function.rs or the writer (nothing was written)"
    )]
    Audit {
        /// The target.
        ctk: Ctk,
        /// `driver` or `runtime`.
        api: &'static str,
        /// Every violation, joined with `; `.
        violations: String,
    },
    /// Sealing failed.
    #[error(transparent)]
    Emit(#[from] EmitError),
    /// The layout oracle (gcc) failed.
    #[error(transparent)]
    Layout(#[from] LayoutError),
}

/// The output of one target.
#[derive(Debug)]
pub struct Generated {
    /// The target.
    pub ctk: Ctk,
    /// The model the files were written from.
    pub model: Model,
    /// The sealed files, relative to the generated crate's root.
    pub files: Vec<GeneratedFile>,
    /// Warnings for the user (e.g. an overridden libclang).
    pub warnings: Vec<String>,
}

/// Options of one generation.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// A local CUDA toolkit to read instead of the pinned packages.
    pub cuda_home: Option<PathBuf>,
}

/// Fetches the inputs of `ctk` and generates its files in memory.
pub fn generate(config: &Config, ctk: Ctk, opts: &Options) -> Result<Generated, GenerateError> {
    let inputs = Inputs::gather(&config.inputs, ctk, opts.cuda_home.as_deref())?;
    generate_from(config, &inputs)
}

/// Fetches the inputs of `ctk` (any target the lock pins, listed in `generator/targets.txt` or
/// not) and reads its headers into a model, writing nothing: what `cargo xtask diff` compares,
/// and what the compatibility table needs of targets a regen does not write.
pub fn read_model(config: &Config, ctk: Ctk, opts: &Options) -> Result<Model, GenerateError> {
    let inputs = Inputs::gather(&config.inputs, ctk, opts.cuda_home.as_deref())?;
    model_from(config, &inputs)
}

/// Reads one target's headers, from inputs already gathered, into its model.
fn model_from(config: &Config, inputs: &Inputs) -> Result<Model, GenerateError> {
    inputs.libclang.activate()?;
    let headers = HeaderSet {
        ctk: inputs.headers.ctk,
        include_dirs: inputs.headers.include_dirs.clone(),
        clang_args: inputs.libclang.clang_args.clone(),
    };
    Ok(reader::read(
        &headers,
        &config.driver_list,
        &config.runtime_list,
    )?)
}

/// Generates one target's files from inputs already gathered.
pub fn generate_from(config: &Config, inputs: &Inputs) -> Result<Generated, GenerateError> {
    let ctk = inputs.headers.ctk;
    let model = model_from(config, inputs)?;
    let templates = &config.templates;
    let driver = rust_file(
        ctk,
        "driver.rs",
        &write_audited(&model, &model.driver, templates)?,
    )?;
    let runtime = rust_file(
        ctk,
        "runtime.rs",
        &write_audited(&model, &model.runtime, templates)?,
    )?;
    // The layout oracle: gcc's numbers for the model's types, and its test module in mod.rs.
    let oracle = layout::target_file(&model, &inputs.headers.include_dirs)?;
    let mut target_mod = writer::write_target_mod(&model);
    target_mod.items.push(oracle.module_item);
    let module = rust_file(ctk, "mod.rs", &target_mod)?;
    let layout = rust_file(ctk, layout::FILE, &oracle.file)?;
    let provenance = emit::provenance_file(
        ctk,
        &inputs.provenance(),
        &[&module, &driver, &runtime, &layout],
    )?;
    Ok(Generated {
        ctk,
        model,
        files: vec![module, driver, runtime, layout, provenance],
        warnings: inputs.libclang.warning.iter().cloned().collect(),
    })
}

/// One target's Rust file, refused while it holds an unfilled placeholder.
fn rust_file(ctk: Ctk, name: &str, file: &syn::File) -> Result<GeneratedFile, GenerateError> {
    unfilled(&emit::target_dir(ctk).join(name), file)?;
    Ok(emit::rust_file(ctk, name, file)?)
}

/// Every file of the generated crate at `config.out`, in memory.
#[derive(Debug)]
pub struct CrateOutput {
    /// The targets whose files were generated, each with its model and warnings.
    pub generated: Vec<Generated>,
    /// Every file: the generated targets' files, then those that depend on the whole target list
    /// (the sealed `src/bindings/mod.rs` and the generated features of `Cargo.toml`).
    pub files: Vec<GeneratedFile>,
    /// Whether every listed target was generated: only then does the output know every file the
    /// list produces, and may a write delete the sealed files of targets no longer listed.
    pub complete: bool,
}

/// Generates every file of the generated crate for `ctks` (targets of `config.targets`): each
/// target's sealed files, and the files that depend on the whole list: `src/bindings/mod.rs`
/// (the module list, `for_each_target!`, `newest_target!`, the compatibility table, which needs
/// the model of every listed target: those not in `ctks` are read from their pinned headers,
/// nothing of theirs is produced) and the generated features of `Cargo.toml`. `done` is told of
/// each generated target and how long it took. What regen writes and check compares.
pub fn generate_crate(
    config: &Config,
    ctks: &[Ctk],
    opts: &Options,
    mut done: impl FnMut(&Generated, Duration),
) -> Result<CrateOutput, GenerateError> {
    let mut generated = Vec::new();
    for &ctk in ctks {
        let started = Instant::now();
        let one = generate(config, ctk, opts)?;
        done(&one, started.elapsed());
        generated.push(one);
    }
    let mut others = Vec::new();
    for &ctk in &config.targets {
        if !ctks.contains(&ctk) {
            others.push(read_model(config, ctk, &Options::default())?);
        }
    }
    let models: Vec<&Model> = config
        .targets
        .iter()
        .filter_map(|ctk| {
            generated
                .iter()
                .map(|g| &g.model)
                .chain(&others)
                .find(|m| m.ctk == *ctk)
        })
        .collect();
    let mut module_list = writer::write_bindings_mod(&models);
    if let Some(newest) = config.targets.last() {
        module_list.items.push(newest_target_macro(*newest));
        module_list
            .items
            .push(newest_of_major_macro(&config.targets));
    }
    unfilled(std::path::Path::new(emit::BINDINGS_MOD), &module_list)?;
    let mut files: Vec<GeneratedFile> = generated.iter().flat_map(|g| g.files.clone()).collect();
    files.push(emit::bindings_mod(&module_list)?);
    files.push(emit::manifest(&config.out, &config.targets)?);
    Ok(CrateOutput {
        complete: config.targets.iter().all(|c| ctks.contains(c)),
        generated,
        files,
    })
}

/// `newest_target!`: `for_each_target!` for the newest listed target alone, so that hand-written
/// code that needs one target (the examples, the GPU probe) names none.
fn newest_target_macro(newest: Ctk) -> syn::Item {
    let part = quote::format_ident!("__hostcb_target_{}", newest.module());
    let doc = format!(
        " Calls `$callback!` as [`for_each_target!`](crate::for_each_target) does, for the newest \
         target of `generator/targets.txt` alone (now {newest}, cargo feature `{}`, which the \
         feature `newest-target` enables), and only when its feature is enabled: for code that \
         needs one target and should not name it.",
        newest.feature()
    );
    syn::parse_quote! {
        #[doc = #doc]
        #[macro_export]
        macro_rules! newest_target {
            ($callback:ident) => {
                $crate::#part!($callback);
            };
        }
    }
}

/// `newest_target_of_major!(12, callback)`: `for_each_target!` for the newest listed target of
/// that CUDA major version (12 or 13), or the newest listed target where none has it, so that
/// hand-written code that needs one target per runtime library (`libcudart.so.12`, `.13`) names
/// none and builds with any target list.
fn newest_of_major_macro(targets: &[Ctk]) -> syn::Item {
    let newest = *targets.last().expect("a target");
    let arms = [12u32, 13].map(|major| {
        let ctk = targets
            .iter()
            .rev()
            .find(|c| c.major() == major)
            .copied()
            .unwrap_or(newest);
        let part = quote::format_ident!("__hostcb_target_{}", ctk.module());
        let major = proc_macro2::Literal::u32_unsuffixed(major);
        quote::quote! { (#major, $callback:ident) => { $crate::#part!($callback); }; }
    });
    let doc = " Calls `$callback!` as [`for_each_target!`](crate::for_each_target) does, for the \
               newest target of `generator/targets.txt` whose CUDA major version is the first \
               argument (12 or 13), or the newest target where none is; only when its feature is \
               enabled.";
    syn::parse_quote! {
        #[doc = #doc]
        #[macro_export]
        macro_rules! newest_target_of_major {
            #(#arms)*
        }
    }
}

/// Fails on any identifier or literal of `file` (macro bodies and doc attributes included) that
/// is still spelled like a template placeholder, `__LIKE_THIS__`: a misspelt placeholder (`__bsae__`)
/// that the writer did not fill, which would otherwise compile into the output.
fn unfilled(path: &std::path::Path, file: &syn::File) -> Result<(), GenerateError> {
    use proc_macro2::{TokenStream, TokenTree};
    fn placeholder(text: &str) -> bool {
        text.len() > 4
            && text.starts_with("__")
            && text.ends_with("__")
            && text[2..text.len() - 2]
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_')
    }
    fn walk(tokens: TokenStream, found: &mut Vec<String>) {
        for token in tokens {
            match token {
                TokenTree::Group(g) => walk(g.stream(), found),
                TokenTree::Ident(i) if placeholder(&i.to_string()) => found.push(i.to_string()),
                TokenTree::Literal(l) => {
                    // The text between the quotes of a string, byte string or C string.
                    let text = l.to_string();
                    if let (Some(a), Some(b)) = (text.find('"'), text.rfind('"'))
                        && a < b
                        && placeholder(&text[a + 1..b])
                    {
                        found.push(text);
                    }
                }
                _ => {}
            }
        }
    }
    let mut found = Vec::new();
    walk(quote::ToTokens::to_token_stream(file), &mut found);
    found.sort();
    found.dedup();
    if found.is_empty() {
        return Ok(());
    }
    Err(GenerateError::Placeholder {
        path: path.to_path_buf(),
        names: found.join(", "),
    })
}

/// Writes one API's file and runs the no-trampoline audit over it, before anything is sealed,
/// written or compared.
fn write_audited(
    model: &Model,
    api: &ApiModel,
    templates: &Templates,
) -> Result<syn::File, GenerateError> {
    let file = writer::write_api(model, api, templates);
    let violations = audit::forwarding_violations(&file);
    if violations.is_empty() {
        return Ok(file);
    }
    Err(GenerateError::Audit {
        ctk: model.ctk,
        api: api.api.as_str(),
        violations: violations
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; "),
    })
}
