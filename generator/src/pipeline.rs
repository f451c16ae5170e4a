//! The whole pipeline for one target, in memory: inputs → reader → model → writer → sealed files.
//! Nothing is written to the output tree here; [`crate::emit::write_tree`] does that once every
//! requested target has been generated.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::Ctk;
use crate::allowlist::{DenyList, DenyListError};
use crate::audit;
use crate::emit::{self, EmitError, GeneratedFile};
use crate::inputs::{InputError, Inputs};
use crate::model::{ApiModel, Model};
use crate::reader::{self, HeaderSet, ReadError};
use crate::target::{TargetList, TargetListError};
use crate::writer::{self, TemplateError, Templates};

/// Where the pipeline reads its checked-in configuration (the workspace root).
#[derive(Clone, Debug)]
pub struct Workspace {
    /// The workspace root.
    pub root: PathBuf,
}

/// No checkout of this workspace around the running command.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot find the workspace to act on: no folder above {searched} holds Cargo.toml and generator/allowlist/; run cargo xtask inside a checkout of cuda-hostcb"
)]
pub struct NoWorkspace {
    /// Where the search started.
    pub searched: String,
}

impl Workspace {
    /// The checkout the running command belongs to, found at run time.
    ///
    /// Looked up from `$CARGO_MANIFEST_DIR` as cargo sets it when it runs a program (`cargo
    /// xtask`, `cargo test`), else from the current directory: the nearest folder above that holds
    /// `Cargo.toml` and `generator/allowlist/`. Never the folder the generator was compiled in:
    /// two checkouts that share one `CARGO_TARGET_DIR` can run the same binary, built in the
    /// other checkout.
    pub fn locate() -> Result<Self, NoWorkspace> {
        let start = match std::env::var_os("CARGO_MANIFEST_DIR") {
            Some(dir) if !dir.is_empty() => PathBuf::from(dir),
            _ => std::env::current_dir().unwrap_or_default(),
        };
        Self::above(&start).ok_or_else(|| NoWorkspace {
            searched: start.display().to_string(),
        })
    }

    /// The nearest folder at or above `start` that is a checkout of this workspace.
    pub fn above(start: &Path) -> Option<Self> {
        start
            .ancestors()
            .find(|dir| {
                dir.join("Cargo.toml").is_file() && dir.join("generator/allowlist").is_dir()
            })
            .map(|root| Workspace {
                root: root.to_path_buf(),
            })
    }

    /// The committed list of the targets `generated/` holds (`generator/targets.txt`).
    pub fn targets(&self) -> Result<Vec<Ctk>, TargetListError> {
        TargetList::load(&self.root.join("generator/targets.txt")).map(|l| l.targets)
    }

    /// The generated crate (`generated/`).
    pub fn generated(&self) -> PathBuf {
        self.root.join("generated")
    }

    /// The cache of downloaded and unpacked inputs: `$HOSTCB_INPUTS_CACHE` when set, else
    /// `target/hostcb-inputs/`. Everything in it is hash-checked on use.
    pub fn cache(&self) -> PathBuf {
        match std::env::var_os("HOSTCB_INPUTS_CACHE") {
            Some(dir) if !dir.is_empty() => PathBuf::from(dir),
            _ => self.root.join("target/hostcb-inputs"),
        }
    }

    fn templates(&self) -> PathBuf {
        self.root.join("templates")
    }

    fn allowlist(&self, api: &str) -> PathBuf {
        self.root.join(format!("generator/allowlist/{api}.txt"))
    }
}

/// Anything that stops generation; each message is one line that says what to do.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    /// Fetching or checking the inputs failed.
    #[error(transparent)]
    Input(#[from] InputError),
    /// A deny-list is unreadable.
    #[error(transparent)]
    DenyList(#[from] DenyListError),
    /// bindgen or the model failed.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// A template is broken.
    #[error(transparent)]
    Template(#[from] TemplateError),
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
pub fn generate(ws: &Workspace, ctk: Ctk, opts: &Options) -> Result<Generated, GenerateError> {
    let inputs = Inputs::gather(ctk, &ws.cache(), opts.cuda_home.as_deref())?;
    generate_from(ws, &inputs)
}

/// Fetches the inputs of `ctk` (any target the lock pins, listed in `generator/targets.txt` or
/// not) and reads its headers into a model, writing nothing: what `cargo xtask diff` compares,
/// and what the compatibility table needs of targets a regen does not write.
pub fn read_model(ws: &Workspace, ctk: Ctk, opts: &Options) -> Result<Model, GenerateError> {
    let inputs = Inputs::gather(ctk, &ws.cache(), opts.cuda_home.as_deref())?;
    model_from(ws, &inputs)
}

/// Reads one target's headers, from inputs already gathered, into its model.
fn model_from(ws: &Workspace, inputs: &Inputs) -> Result<Model, GenerateError> {
    use_libclang(&inputs.libclang.dir);
    let headers = HeaderSet {
        ctk: inputs.headers.ctk,
        include_dirs: inputs.headers.include_dirs.clone(),
        clang_args: inputs.libclang.clang_args.clone(),
    };
    let driver_list = DenyList::load(&ws.allowlist("driver"))?;
    let runtime_list = DenyList::load(&ws.allowlist("runtime"))?;
    Ok(reader::read(&headers, &driver_list, &runtime_list)?)
}

/// Generates one target's files from inputs already gathered.
pub fn generate_from(ws: &Workspace, inputs: &Inputs) -> Result<Generated, GenerateError> {
    let ctk = inputs.headers.ctk;
    let model = model_from(ws, inputs)?;
    let templates = Templates::load(&ws.templates())?;
    let driver = emit::rust_file(
        ctk,
        "driver.rs",
        &write_audited(&model, &model.driver, &templates)?,
    )?;
    let runtime = emit::rust_file(
        ctk,
        "runtime.rs",
        &write_audited(&model, &model.runtime, &templates)?,
    )?;
    let module = emit::rust_file(ctk, "mod.rs", &writer::write_target_mod(&model))?;
    let provenance =
        emit::provenance_file(ctk, &inputs.provenance(), &[&module, &driver, &runtime])?;
    Ok(Generated {
        ctk,
        model,
        files: vec![module, driver, runtime, provenance],
        warnings: inputs.libclang.warning.iter().cloned().collect(),
    })
}

/// The files of the generated crate that depend on the target list rather than on one target:
/// the sealed `src/bindings/mod.rs` (with the compatibility table of every target) and the
/// generated features of the `Cargo.toml` under `root`. `models` holds one model per listed
/// target, oldest first.
pub fn crate_files(root: &Path, models: &[&Model]) -> Result<Vec<GeneratedFile>, GenerateError> {
    let targets: Vec<Ctk> = models.iter().map(|m| m.ctk).collect();
    Ok(vec![
        emit::bindings_mod(&writer::write_bindings_mod(models))?,
        emit::manifest(root, &targets)?,
    ])
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

/// Points bindgen (through clang-sys, which reads `LIBCLANG_PATH` when it loads libclang) at the
/// pinned libclang. The process environment is global: the lock keeps two generations in one
/// process (tests) from racing, and the value only ever changes to the same pinned folder.
fn use_libclang(dir: &Path) {
    static LOCK: Mutex<()> = Mutex::new(());
    let _guard = LOCK.lock();
    // Remember the user's own value before replacing it.
    let _ = crate::inputs::user_libclang_path();
    if std::env::var_os("LIBCLANG_PATH").as_deref() != Some(dir.as_os_str()) {
        // SAFETY: set before bindgen loads libclang; the generator's own threads do not read the
        // environment concurrently, and the lock serialises the generator's callers.
        unsafe { std::env::set_var("LIBCLANG_PATH", dir) };
    }
}
