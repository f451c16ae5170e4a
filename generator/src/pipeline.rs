//! The whole pipeline, in memory: inputs → reader → model → writer → sealed files, for one target
//! ([`generate`]) and for the whole generated crate ([`generate_crate`]: every file regen writes
//! and check compares). Nothing is written here; [`crate::emit::tree::ensure_tree`] writes or checks
//! the output.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::Ctk;
use crate::audit;
use crate::config::Config;
use crate::emit::render::{self, RecordedGenerator};
use crate::emit::{self, EmitError, GeneratedFile};
use crate::inputs::{InputError, Inputs};
use crate::layout::{self, LayoutError};
use crate::manifest;
use crate::model::{Api, ApiModel, Definitions, Model, Summary, SummaryPart};
use crate::reader::{self, HeaderSet, ReadError};
use crate::shared::Shared;
use crate::writer::{self, ParsedTemplates, TemplateError, Written};

pub mod summaries;

/// Anything that stops generation; each message is one line that says what to do.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    /// Fetching or checking the inputs failed.
    #[error(transparent)]
    Input(#[from] InputError),
    /// bindgen or the model failed.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// A template could not be filled (a misspelt placeholder).
    #[error("{path}: {source} (nothing was written)")]
    Fill {
        /// The file, relative to the generated crate.
        path: PathBuf,
        /// Why.
        source: TemplateError,
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

/// Reads one target's headers, from inputs already gathered, into its model, with the items of
/// the driver's and the runtime's types.
fn model_from(config: &Config, inputs: &Inputs) -> Result<Model, GenerateError> {
    let driver = api_model_from(config, inputs, Api::Driver)?;
    let runtime = api_model_from(config, inputs, Api::Runtime)?;
    let model = Model {
        ctk: inputs.headers.ctk,
        driver,
        runtime,
    };
    Ok(model)
}

/// Reads one API of one target's headers, from inputs already gathered, into its model and the
/// items of its types.
fn api_model_from(config: &Config, inputs: &Inputs, api: Api) -> Result<ApiModel, GenerateError> {
    inputs.libclang.activate()?;
    let list = match api {
        Api::Driver => &config.driver_list,
        Api::Runtime => &config.runtime_list,
    };
    let history = || inputs.histories(&config.inputs);
    Ok(reader::read_api(&header_set(inputs), api, list, history)?)
}

/// What bindgen reads of `inputs`: the headers' folders and libclang's arguments.
pub fn header_set(inputs: &Inputs) -> HeaderSet {
    HeaderSet {
        ctk: inputs.headers.ctk,
        include_dirs: inputs.headers.include_dirs.clone(),
        clang_args: inputs.libclang.clang_args.clone(),
    }
}

/// Generates one target's files from inputs already gathered, on their own: every type is
/// defined in the target's files (none comes from the crate's `common` module, which only a
/// crate of several targets has: [`generate_crate`]).
pub fn generate_from(config: &Config, inputs: &Inputs) -> Result<Generated, GenerateError> {
    let model = model_from(config, inputs)?;
    let summary = Summary::of(&model);
    write_target(config, inputs, model, &summary, &BTreeSet::new())
}

/// Writes one target's files from its model; the types `shared` names are re-exported from the
/// crate's `common` module.
fn write_target(
    config: &Config,
    inputs: &Inputs,
    model: Model,
    summary: &Summary,
    shared: &BTreeSet<String>,
) -> Result<Generated, GenerateError> {
    let templates = &config.templates.parse();
    let generator = &RecordedGenerator::this(config.templates.sha256());
    let files = std::thread::scope(|scope| {
        let write = |api| {
            let oracle = measure(scope, inputs, api);
            write_api(inputs, templates, generator, api, shared, oracle)
        };
        let driver = write(&model.driver)?;
        let runtime = write(&model.runtime)?;
        finish_target(
            config, inputs, templates, generator, summary, driver, runtime,
        )
    })?;
    Ok(Generated {
        ctk: model.ctk,
        model,
        files,
        warnings: inputs.libclang.warning.iter().cloned().collect(),
    })
}

/// One API of one target, written: its sealed file, and the layout oracle's numbers for its
/// types. Plain data: each API is written on the thread that read it ([`generate_crate`]).
struct WrittenApi {
    file: GeneratedFile,
    oracle: layout::ApiOracle,
}

/// The layout oracle's numbers for the types of `api`, measured by gcc on a thread of `scope`
/// (a tenth of a second for the driver): started as soon as the API is read, so that they are
/// measured while the crate's shared types are decided and the file is written.
type Measuring<'s> = std::thread::ScopedJoinHandle<'s, Result<layout::ApiOracle, LayoutError>>;

/// Starts [`Measuring`] the types of `api`.
fn measure<'s, 'e: 's>(
    scope: &'s std::thread::Scope<'s, 'e>,
    inputs: &'e Inputs,
    api: &'e ApiModel,
) -> Measuring<'s> {
    let ctk = inputs.headers.ctk;
    std::thread::Builder::new()
        .name("hostcb-layout".to_owned())
        .spawn_scoped(scope, move || {
            layout::api_oracle(ctk, api, &inputs.headers.include_dirs)
        })
        .expect("spawn a layout thread")
}

/// Writes, audits and seals the file of one API of a target, and takes gcc's numbers for its
/// types from `oracle`.
fn write_api(
    inputs: &Inputs,
    templates: &ParsedTemplates,
    generator: &RecordedGenerator,
    api: &ApiModel,
    shared: &BTreeSet<String>,
    oracle: Measuring<'_>,
) -> Result<WrittenApi, GenerateError> {
    let ctk = inputs.headers.ctk;
    let path = emit::target_dir(ctk).join(format!("{}.rs", api.api.as_str()));
    let written = filled(&path, writer::write_api(ctk, api, templates, shared))?;
    audited(ctk, api, shared, &written.file)?;
    let file = render::rust_file(generator, Some(ctk), path, written.text())?;
    let oracle = oracle.join().expect("the layout thread does not panic")?;
    Ok(WrittenApi { file, oracle })
}

/// A target's files from its two written APIs: its `mod.rs`, the two API files, its `layout.rs`
/// and its `provenance.toml`, which seals the summary's digest with them (what vouches for a
/// cached summary).
fn finish_target(
    config: &Config,
    inputs: &Inputs,
    templates: &ParsedTemplates,
    generator: &RecordedGenerator,
    summary: &Summary,
    driver: WrittenApi,
    runtime: WrittenApi,
) -> Result<Vec<GeneratedFile>, GenerateError> {
    let ctk = summary.ctk;
    let rust_file = |name: &str, written: Result<Written, TemplateError>| {
        let path = emit::target_dir(ctk).join(name);
        let text = filled(&path, written)?.text();
        Ok::<_, GenerateError>(render::rust_file(generator, Some(ctk), path, text)?)
    };
    let oracle = layout::oracle(ctk, driver.oracle, runtime.oracle)?;
    let module = rust_file(
        "mod.rs",
        writer::write_target_mod(summary, &oracle.machine, templates),
    )?;
    let layout = rust_file(
        layout::FILE,
        writer::write_layout(&oracle.values, templates),
    )?;
    let provenance = render::provenance_file(
        generator,
        ctk,
        &inputs.provenance(&config.inputs)?,
        &[&module, &driver.file, &runtime.file, &layout],
        &crate::inputs::sha256_hex(summary.to_text().as_bytes()),
    )?;
    Ok(vec![module, driver.file, runtime.file, layout, provenance])
}

/// What one generated target contributes to the crate.
#[derive(Debug)]
pub struct TargetOutput {
    /// The target.
    pub ctk: Ctk,
    /// Its sealed files, relative to the generated crate's root.
    pub files: Vec<GeneratedFile>,
    /// What the all-target files need of its model (and its function counts).
    pub summary: Summary,
    /// Warnings for the user (e.g. an overridden libclang, a summary that could not be cached).
    pub warnings: Vec<String>,
    /// How long its generation took (on its worker thread).
    pub took: Duration,
}

/// Every file of the generated crate at `config.out`, in memory.
#[derive(Debug)]
pub struct CrateOutput {
    /// The targets whose files were generated, in the order asked for.
    pub generated: Vec<TargetOutput>,
    /// Every file: the generated targets' files, then those that depend on the whole target list
    /// (the sealed `src/bindings/mod.rs` and the generated features of `Cargo.toml`).
    pub files: Vec<GeneratedFile>,
    /// Whether every listed target was generated: only then does the output know every file the
    /// list produces, and may a write delete the sealed files of targets no longer listed.
    pub complete: bool,
    /// Warnings about the listed targets that were summarised, not generated (each generated
    /// target carries its own).
    pub warnings: Vec<String>,
}

/// Where [`generate_crate`] may take what the all-target files need of a listed target that it
/// does not generate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Others {
    /// From its pinned headers, read again: what `check` does, so that the check trusts nothing
    /// but the hash-checked inputs.
    Read,
    /// From the summary cache (`<cache>/summaries/`, keyed by the hashes of everything the
    /// summary depends on), reading the headers only on a miss: what `regen --ctk X` does, so it
    /// need not download the other targets' wheels once it has read them. The cache is writable
    /// by whoever shares it, so it is trusted with nothing: a cached summary is used only when
    /// its SHA-256 is the one the target's committed, sealed `provenance.toml` records (written
    /// there by the regen that generated the target from its hash-checked headers); any other is
    /// ignored with a warning that names it, and the headers are read instead.
    Cached,
}

/// One piece of work of [`generate_crate`], run on a worker thread.
#[derive(Clone, Copy)]
enum Job {
    /// Generate this target's files.
    Generate(Ctk),
    /// Summarise this listed target, which is not generated.
    Summarise(Ctk),
}

/// Generates every file of the generated crate for `ctks` (targets of `config.targets`): each
/// target's sealed files, and the files that depend on the whole list: `src/bindings/mod.rs`
/// (the module list, `for_each_target!`, `newest_target!`, the compatibility table, which needs
/// a [`Summary`] of every listed target: those not in `ctks` are summarised as `others` says,
/// nothing of theirs is produced) and the generated features of `Cargo.toml`. `done` is told of
/// each generated target as it is done. What regen writes and check compares.
///
/// The targets are generated in parallel, [`default_threads`] worker threads (at most one per
/// API of a target); the output does not depend on the number of threads or the order they
/// finish in.
/// On failure the error of the first failing target, in the order of `ctks`, is returned.
pub fn generate_crate(
    config: &Config,
    ctks: &[Ctk],
    opts: &Options,
    others: Others,
    done: impl FnMut(&TargetOutput),
) -> Result<CrateOutput, GenerateError> {
    generate_crate_with(config, ctks, opts, others, default_threads(), done)
}

/// How many APIs of targets [`generate_crate`] reads and writes at once: two per available
/// core. Each API of a target is one job, and jobs differ in size, so one per core left cores
/// idle while the last jobs ran; two per core lets the system share the cores among them
/// instead. With one job per target (before each API became one), `check` of three targets on
/// two cores took 3.6-3.9 s instead of 4.3-4.7 s wall (three runs each, interleaved), in the
/// same CPU time.
pub fn default_threads() -> usize {
    2 * std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// [`generate_crate`] with at most `threads` worker threads (1: one after the other).
pub fn generate_crate_with(
    config: &Config,
    ctks: &[Ctk],
    opts: &Options,
    others: Others,
    threads: usize,
    mut done: impl FnMut(&TargetOutput),
) -> Result<CrateOutput, GenerateError> {
    let cache = summaries::Cache::new(config);
    let mut jobs: Vec<Job> = ctks.iter().map(|&c| Job::Generate(c)).collect();
    let (mut cached, mut ignored) = (Vec::new(), Vec::new());
    for &ctk in &config.targets {
        if ctks.contains(&ctk) {
            continue;
        }
        let hit = match (others, &cache) {
            (Others::Cached, Some(cache)) => cache.load(ctk).unwrap_or_else(|warning| {
                ignored.push(warning);
                None
            }),
            _ => None,
        };
        match hit {
            Some(summary) => cached.push(summary),
            None => jobs.push(Job::Summarise(ctk)),
        }
    }
    // Every job's inputs are gathered here first (see Inputs::gather_all for the order their
    // errors come in), and libclang is loaded on this thread before any worker starts: loading
    // it names the file through the process environment for a moment, which must not happen
    // while a worker's clang reads its environment. The workers then find it loaded.
    let asked: Vec<(Ctk, Option<&Path>)> = (jobs.iter())
        .map(|job| match *job {
            Job::Generate(ctk) => (ctk, opts.cuda_home.as_deref()),
            Job::Summarise(ctk) => (ctk, None),
        })
        .collect();
    let inputs = Inputs::gather_all(&config.inputs, &asked)?;
    if let Some(first) = inputs.first() {
        first.libclang.activate()?;
    }
    // Each API of each job runs on a thread of its own, in two steps. First it reads its API of
    // the target's headers (at most `threads` at once: the permits of `gate`) and reports its
    // part of the target's summary; an API of a generated target keeps its model. Once every
    // listed target's summary is in, this thread decides which types the crate shares
    // (crate::shared: that needs every target's types), and each generated API's thread writes
    // its file with that decision; this thread then makes the target's other files from both.
    // The two APIs of a target share nothing until then, so a one-target regen uses two cores.
    // Every driver first: each takes about twice its runtime's time, and the last read holds
    // every writer back, so the long ones start while the short ones fill the cores later.
    let halves: Vec<(usize, Api)> = [Api::Driver, Api::Runtime]
        .into_iter()
        .flat_map(|api| (0..jobs.len()).map(move |i| (i, api)))
        .collect();
    let gate = Gate::new(threads.clamp(1, halves.len().max(1)));
    let decision = Decision::default();
    let mut reported: Vec<Option<Reported>> = jobs.iter().map(|_| None).collect();
    let mut written: Vec<Option<Result<TargetOutput, GenerateError>>> =
        jobs.iter().map(|_| None).collect();
    let mut crate_wide = None;
    let templates = config.templates.parse();
    let generator = RecordedGenerator::this(config.templates.sha256());
    std::thread::scope(|scope| {
        let (sender, receiver) = std::sync::mpsc::channel();
        for &(i, api) in &halves {
            let sender = sender.clone();
            let job = jobs[i];
            let (inputs, gate, decision, generator) = (&inputs[i], &gate, &decision, &generator);
            std::thread::Builder::new()
                .name("hostcb-regen".to_owned())
                // libclang and syn's visitors recurse deeply over the CUDA headers: the main
                // thread's stack size, not a spawned thread's default 2 MiB.
                .stack_size(64 << 20)
                .spawn_scoped(scope, move || {
                    let started = Instant::now();
                    let permit = gate.take();
                    let model = api_model_from(config, inputs, api);
                    drop(permit);
                    let took = started.elapsed();
                    let model = match model {
                        Ok(read) => read,
                        Err(e) => {
                            _ = sender.send(Message::Part(i, api, Err(e)));
                            return;
                        }
                    };
                    let part = SummaryPart::of(&model);
                    std::thread::scope(|scope| {
                        let oracle =
                            matches!(job, Job::Generate(_)).then(|| measure(scope, inputs, &model));
                        if sender.send(Message::Part(i, api, Ok(part))).is_err() {
                            return;
                        }
                        let (Some(oracle), Some(names)) = (oracle, decision.wait()) else {
                            return;
                        };
                        let _permit = gate.take();
                        let resumed = Instant::now();
                        let templates = config.templates.parse();
                        let output =
                            write_api(inputs, &templates, generator, &model, &names, oracle)
                                .map(|w| (w, took + resumed.elapsed()));
                        _ = sender.send(Message::Written(i, api, output));
                    });
                })
                .expect("spawn a generator thread");
        }
        drop(sender);
        let slot = |api: Api| usize::from(api == Api::Runtime);
        let mut parts: Vec<[Option<Result<SummaryPart, GenerateError>>; 2]> =
            jobs.iter().map(|_| [None, None]).collect();
        for _ in &halves {
            let Ok(Message::Part(i, api, part)) = receiver.recv() else {
                unreachable!("every half reports its part before its file, and only once")
            };
            parts[i][slot(api)] = Some(part);
        }
        for (i, [driver, runtime]) in parts.into_iter().enumerate() {
            let (Some(driver), Some(runtime)) = (driver, runtime) else {
                unreachable!("both halves reported")
            };
            reported[i] = Some(match (driver, runtime) {
                (Ok(driver), Ok(runtime)) => {
                    let summary = Summary::join(inputs[i].headers.ctk, driver, runtime);
                    // A local toolkit's (`--cuda-home`) headers are not pinned: its summary is
                    // not cached under the pinned target's name.
                    let cache = match jobs[i] {
                        Job::Generate(_) if opts.cuda_home.is_some() => None,
                        _ => cache.as_ref(),
                    };
                    let stored = cache.and_then(|c| c.store(&summary)).into_iter().collect();
                    Ok((summary, stored))
                }
                (Err(e), _) | (_, Err(e)) => Err(e),
            });
        }
        if reported.iter().flatten().all(Result::is_ok) {
            let all: Vec<&Summary> = config
                .targets
                .iter()
                .filter_map(|ctk| {
                    reported
                        .iter()
                        .flatten()
                        .flatten()
                        .map(|(s, _)| s)
                        .chain(&cached)
                        .find(|s| s.ctk == *ctk)
                })
                .collect();
            let shared = crate::shared::decide(&all);
            decision.set(Some(shared.names.clone()));
            // The files of the whole list need only the summaries: this thread makes them while
            // the APIs' threads write theirs.
            crate_wide = Some(crate_files(config, &all, &shared, &templates, &generator));
        } else {
            decision.set(None);
        }
        type Half = Result<(WrittenApi, Duration), GenerateError>;
        let mut halves_written: Vec<[Option<Half>; 2]> =
            jobs.iter().map(|_| [None, None]).collect();
        for message in receiver {
            let Message::Written(i, api, half) = message else {
                unreachable!("every part was received above")
            };
            halves_written[i][slot(api)] = Some(half);
            let [Some(_), Some(_)] = &halves_written[i] else {
                continue;
            };
            let [Some(driver), Some(runtime)] = std::mem::take(&mut halves_written[i]) else {
                unreachable!("both halves are in")
            };
            let Some(Ok((summary, stored))) = &reported[i] else {
                unreachable!("only a job whose summary is in writes its files")
            };
            let finished = Instant::now();
            let output = driver.and_then(|d| runtime.map(|r| (d, r))).and_then(
                |((driver, d_took), (runtime, r_took))| {
                    let files = finish_target(
                        config, &inputs[i], &templates, &generator, summary, driver, runtime,
                    )?;
                    Ok(TargetOutput {
                        ctk: summary.ctk,
                        files,
                        summary: summary.clone(),
                        warnings: inputs[i]
                            .libclang
                            .warning
                            .iter()
                            .cloned()
                            .chain(stored.iter().cloned())
                            .collect(),
                        took: d_took.max(r_took) + finished.elapsed(),
                    })
                },
            );
            if let Ok(output) = &output {
                done(output);
            }
            written[i] = Some(output);
        }
    });
    // Every job ran unless one failed, and then its error is among the results.
    let (mut generated, mut warnings) = (Vec::new(), ignored);
    for (job, made) in jobs.iter().zip(reported) {
        let (_, more) = made.expect("every job reported")?;
        if let Job::Summarise(_) = job {
            warnings.extend(more);
        }
    }
    for output in written.into_iter().flatten() {
        generated.push(output?);
    }
    let mut files: Vec<GeneratedFile> = generated.iter().flat_map(|g| g.files.clone()).collect();
    files.extend(crate_wide.expect("made once every job reported")?);
    Ok(CrateOutput {
        complete: config.targets.iter().all(|c| ctks.contains(c)),
        generated,
        files,
        warnings,
    })
}

/// The files that depend on the whole target list, from every listed target's summary (in the
/// list's order) and the shared types: `src/bindings/mod.rs`, `src/bindings/common.rs` and the
/// generated features of `Cargo.toml`.
fn crate_files(
    config: &Config,
    summaries: &[&Summary],
    shared: &Shared,
    templates: &ParsedTemplates,
    generator: &RecordedGenerator,
) -> Result<Vec<GeneratedFile>, GenerateError> {
    let module_list = filled(
        Path::new(emit::BINDINGS_MOD),
        writer::write_bindings_mod(summaries, templates),
    )?;
    let common = writer::write_common(shared, templates);
    let mut files = Vec::new();
    for (path, written) in [(emit::BINDINGS_MOD, &module_list), (emit::COMMON, &common)] {
        files.push(render::rust_file(
            generator,
            None,
            path.into(),
            written.text(),
        )?);
    }
    files.push(manifest::for_targets(&config.out, &config.targets)?);
    Ok(files)
}

/// A job's summary and the warnings of its caching, or why it has none.
type Reported = Result<(Summary, Vec<String>), GenerateError>;

/// What an API's thread tells [`generate_crate`]: its part of the target's summary, then (a
/// generated target) its written file, with the time it took.
enum Message {
    Part(usize, Api, Result<SummaryPart, GenerateError>),
    Written(usize, Api, Result<(WrittenApi, Duration), GenerateError>),
}

/// Permits for the heavy steps of the jobs of [`generate_crate`]: at most so many at once.
struct Gate {
    free: std::sync::Mutex<usize>,
    freed: std::sync::Condvar,
}

/// A permit of a [`Gate`], given back when dropped.
struct Permit<'a>(&'a Gate);

impl Gate {
    fn new(permits: usize) -> Gate {
        Gate {
            free: std::sync::Mutex::new(permits),
            freed: std::sync::Condvar::new(),
        }
    }

    fn take(&self) -> Permit<'_> {
        let free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        let mut free = self
            .freed
            .wait_while(free, |free| *free == 0)
            .unwrap_or_else(|p| p.into_inner());
        *free -= 1;
        Permit(self)
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        self.0.freed.notify_one();
    }
}

/// The shared names [`generate_crate`] decides once every summary is in, which the generated
/// targets' threads wait for: `None` when a job failed and nothing is to be written.
#[derive(Default)]
struct Decision {
    made: std::sync::Mutex<Option<Option<BTreeSet<String>>>>,
    changed: std::sync::Condvar,
}

impl Decision {
    fn set(&self, names: Option<BTreeSet<String>>) {
        *self.made.lock().unwrap_or_else(|p| p.into_inner()) = Some(names);
        self.changed.notify_all();
    }

    fn wait(&self) -> Option<BTreeSet<String>> {
        let made = self.made.lock().unwrap_or_else(|p| p.into_inner());
        let made = self
            .changed
            .wait_while(made, |made| made.is_none())
            .unwrap_or_else(|p| p.into_inner());
        made.clone().flatten()
    }
}

/// The file written to `path`, refused where its template could not be filled (a misspelt
/// placeholder, see [`writer::PLACEHOLDER`]).
fn filled(path: &Path, file: Result<Written, TemplateError>) -> Result<Written, GenerateError> {
    file.map_err(|source| GenerateError::Fill {
        path: path.to_path_buf(),
        source,
    })
}

/// Runs the no-trampoline audit over one API's file, before anything is sealed, written or
/// compared.
fn audited(
    ctk: Ctk,
    api: &ApiModel,
    shared: &BTreeSet<String>,
    file: &syn::File,
) -> Result<(), GenerateError> {
    // What the shared types the file re-exports define (the crate's `common` module defines
    // them as this API's headers do, documentation aside).
    let common = Definitions {
        shapes: (api.definitions.shapes.iter())
            .filter(|(name, _)| shared.contains(*name))
            .map(|(name, shape)| (name.clone(), shape.clone()))
            .collect(),
        ..Definitions::default()
    };
    let mut violations = audit::forwarding_violations(file, &common);
    violations.extend(audit::entry_point_violations(file));
    if violations.is_empty() {
        return Ok(());
    }
    Err(GenerateError::Audit {
        ctk,
        api: api.api.as_str(),
        violations: violations
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; "),
    })
}
