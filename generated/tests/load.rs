//! Loads the CUDA libraries for real: every error of the search on a machine without them, the
//! CUDA 13 runtime (which works without a GPU), and, where a driver is installed, resolution
//! through `cuGetProcAddress`.
//!
//! The loaded libraries, the default-stream mode and the environment belong to the whole
//! process, and a successful load is final, so this binary has its own harness that runs its
//! steps one at a time, in a fixed order: failures first, then loads. Each step is a trial.
//!
//! # When a step cannot do its job
//!
//! A step that cannot run here says `SKIP: <step>: <why>` and is reported as *ignored*, never
//! as passed, unless the environment says the machine must be able to run it; then it fails,
//! naming why. Which variable decides depends on what the step lacks:
//!
//! - What only a GPU machine has, the driver (`libcuda.so.1`): the step fails when
//!   `REQUIRE_GPU=1` (the GPU runner `.gpu/run.sh` sets it). CI has no GPU, so `CI=1` alone
//!   keeps it a skip, and a driver-less CI machine stays green.
//! - What CI can provide, and a GPU machine has installed: a CUDA 13 runtime (the pinned wheel
//!   through pip, or the toolkit's `libcudart.so.13`), and python3 to fetch and unpack the
//!   wheel. The step fails when `CI` or `REQUIRE_GPU` is on (`1`, `true` or `yes`, so GitHub's
//!   `CI=true` counts).
//! - A broken setup fails always: `$HOSTCB_TEST_LIBCUDART_13` naming no file, a wheel whose
//!   SHA-256 is not the one pinned, a lock without the pin.
//!
//! A step that finds the machine in its other legitimate state (the system loader finds
//! `libcuda.so.1`, so there is no failing driver search to check) is ignored with that reason
//! under any variable; the step that needs the driver runs instead.
//!
//! With `HOSTCB_TESTS_WRONG_EXPECTATIONS=1` (the workspace's one switch, `hostcb_gate`) every
//! check of a step (`check!`, `check_eq!`) expects the opposite, so each step that runs must fail
//! at its first check: the way to see that the checks can fail.
//!
//! # The CUDA 13 runtime the steps load
//!
//! The first of:
//! 1. `$HOSTCB_TEST_LIBCUDART_13`, the path of a `libcudart.so.13` fetched beforehand;
//! 2. `libcudart.so.13` in an entry of `$LD_LIBRARY_PATH`, in `$CUDA_HOME/lib64`,
//!    `$CUDA_PATH/lib64` or `/usr/local/cuda/lib64` (a toolkit; the GPU machine's, without
//!    network);
//! 3. the runtime wheel of the 13.0 target pinned in `generator/inputs.lock` (the generator's
//!    own pin), taken by `tools/pinned-runtimes` (the GPU bundle's fetcher too) from the input
//!    cache (`$HOSTCB_INPUTS_CACHE`, default the tests' own, `target/tmp/hostcb-inputs`) or
//!    downloaded into it by `python3 -m pip download`, and used only if its SHA-256 is the
//!    pinned one.

use std::env;
use std::ffi::{OsString, c_int, c_void};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Barrier, OnceLock, mpsc};
use std::time::Duration;

use cuda_hostcb::error::{Api, Error};
use cuda_hostcb::load::{
    DefaultStream, DriverFn, Entry, NamedEntry, PerThreadVariant, RuntimeFn, UNRESOLVED,
    default_stream, driver_result, driver_version, runtime_result, runtime_version,
    set_default_stream, take_unresolved,
};
use hostcb_gate::{check, check_eq};
use libtest_mimic::{Arguments, Completion, Failed, Trial};

/// What a step returns: done, ignored with a reason, or failed.
type Outcome = Result<Completion, Failed>;

/// A step: its trial's name and its function.
type Step = (&'static str, fn() -> Outcome);

/// The pinned target whose runtime wheel the steps load.
const PINNED_TARGET: &str = "13.0";
/// `tools/pinned-runtimes`'s exit status when pip could not fetch the wheel.
const FETCH_FAILED: i32 = 3;
/// Names a `libcudart.so.13` fetched beforehand (for machines that cannot reach PyPI).
const LIBCUDART_13_ENV: &str = "HOSTCB_TEST_LIBCUDART_13";
/// The input cache where the pinned wheel is looked for, and downloaded to.
const CACHE_ENV: &str = "HOSTCB_INPUTS_CACHE";

/// Any C function type: these tests compare and count addresses, and call nothing through them.
type AnyFn = unsafe extern "C" fn() -> u32;

/// Declares the marker type `$marker`, which names the static `$entry` (of type `$T`) to its
/// first-call stub.
macro_rules! named {
    ($marker:ident => $entry:ident: $T:ty) => {
        enum $marker {}
        impl NamedEntry for $marker {
            type Entry = $T;
            fn entry() -> &'static $T {
                &$entry
            }
        }
    };
}

// SAFETY (each static below): the type is only used through `Entry::address`, never called
// except through the first-call stubs of functions that never resolve (`*_MADE_UP`), which
// return UNRESOLVED without calling anything, or where no library is loaded.
static RT13_VERSION: RuntimeFn<AnyFn> = {
    named!(This => RT13_VERSION: RuntimeFn<AnyFn>);
    unsafe { RuntimeFn::new::<This>(c"cudaRuntimeGetVersion", 13, None, 2000) }
};
static RT13_MADE_UP: RuntimeFn<AnyFn> = {
    named!(This => RT13_MADE_UP: RuntimeFn<AnyFn>);
    unsafe { RuntimeFn::new::<This>(c"cudaNoSuchFunction", 13, None, 13000) }
};
static RT13_LAUNCH_HOST_FUNC: RuntimeFn<AnyFn> = {
    named!(This => RT13_LAUNCH_HOST_FUNC: RuntimeFn<AnyFn>);
    unsafe {
        RuntimeFn::new::<This>(
            c"cudaLaunchHostFunc",
            13,
            Some(c"cudaLaunchHostFunc_ptsz"),
            10000,
        )
    }
};
/// Called through its first-call stub (its C type is right), so that the stub is seen to
/// forward the arguments.
static RT13_GET_VERSION: RuntimeFn<unsafe extern "C" fn(*mut c_int) -> u32> = {
    named!(This => RT13_GET_VERSION: RuntimeFn<unsafe extern "C" fn(*mut c_int) -> u32>);
    unsafe { RuntimeFn::new::<This>(c"cudaRuntimeGetVersion", 13, None, 2000) }
};
static RT12_VERSION: RuntimeFn<AnyFn> = {
    named!(This => RT12_VERSION: RuntimeFn<AnyFn>);
    unsafe { RuntimeFn::new::<This>(c"cudaRuntimeGetVersion", 12, None, 2000) }
};

static CU_LAUNCH_HOST_FUNC: DriverFn<AnyFn> = {
    named!(This => CU_LAUNCH_HOST_FUNC: DriverFn<AnyFn>);
    unsafe {
        DriverFn::new::<This>(
            c"cuLaunchHostFunc",
            c"cuLaunchHostFunc",
            10000,
            10000,
            Some(PerThreadVariant {
                version: 10000,
                symbol: c"cuLaunchHostFunc_ptsz",
            }),
        )
    }
};
static CU_LAUNCH_HOST_FUNC_V2: DriverFn<AnyFn> = {
    named!(This => CU_LAUNCH_HOST_FUNC_V2: DriverFn<AnyFn>);
    unsafe {
        DriverFn::new::<This>(
            c"cuLaunchHostFunc_v2",
            c"cuLaunchHostFunc",
            13010,
            13020,
            Some(PerThreadVariant {
                version: 13010,
                symbol: c"cuLaunchHostFunc_v2_ptsz",
            }),
        )
    }
};
static CU_MADE_UP: DriverFn<AnyFn> = {
    named!(This => CU_MADE_UP: DriverFn<AnyFn>);
    unsafe { DriverFn::new::<This>(c"cuNoSuchFunction", c"cuNoSuchFunction", 13000, 13000, None) }
};

/// Every variable the search reads.
const SEARCH_VARS: [&str; 11] = [
    "CUDA_HOSTCB_LIBCUDA",
    "CUDA_HOSTCB_LIBCUDART",
    "CUDA_HOSTCB_LIBCUDART_12",
    "CUDA_HOSTCB_LIBCUDART_13",
    "CUDA_HOME",
    "CUDA_PATH",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "PYTHONPATH",
    "HOME",
    "CUDA_HOSTCB_PER_THREAD_DEFAULT_STREAM",
];

/// The variables the steps change, as they were at start-up (for finding a runtime and for pip).
#[derive(Debug)]
struct Original {
    home: Option<OsString>,
    cuda_home: Option<OsString>,
    cuda_path: Option<OsString>,
}

static ORIGINAL: OnceLock<Original> = OnceLock::new();
static SCRATCH: OnceLock<PathBuf> = OnceLock::new();
static RUNTIME_13: OnceLock<Result<PathBuf, Missing>> = OnceLock::new();

fn main() {
    let mut args = Arguments::from_args();
    // The steps share the process's libraries and environment: one at a time, in order.
    args.test_threads = Some(1);
    ORIGINAL
        .set(Original {
            home: env::var_os("HOME"),
            cuda_home: env::var_os("CUDA_HOME"),
            cuda_path: env::var_os("CUDA_PATH"),
        })
        .unwrap();
    // The build's target folder, or (for an executable carried to another machine, such as the
    // GPU runner's) the system's temporary folder.
    let name = format!("cuda-hostcb-load-{}", std::process::id());
    let mut scratch = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(&name);
    if !args.list && !fresh_dir(&scratch) {
        scratch = env::temp_dir().join(&name);
        assert!(fresh_dir(&scratch), "cannot create {}", scratch.display());
    }
    SCRATCH.set(scratch.clone()).unwrap();

    let steps: [Step; 9] = [
        ("stream_mode_can_change_before_any_resolution", stream_mode),
        (
            "driver_explicit_path_is_the_only_one_tried",
            driver_explicit,
        ),
        ("driver_search_lists_every_place", driver_search),
        (
            "only_regular_files_are_opened",
            only_regular_files_are_opened,
        ),
        (
            "driver_refuses_a_library_that_is_not_the_driver",
            not_a_driver,
        ),
        ("driver_resolution", driver_resolution),
        ("runtime_explicit_paths", runtime_explicit),
        ("runtime_search_lists_every_place", runtime_search),
        ("runtime_loading", runtime_loading),
    ];
    let trials = steps
        .into_iter()
        .map(|(name, step)| Trial::ignorable_test(name, step))
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    if !args.list {
        let _ = std::fs::remove_dir_all(&scratch);
    }
    conclusion.exit();
}

/// Empties or creates `dir`; whether it could.
fn fresh_dir(dir: &Path) -> bool {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).is_ok()
}

fn scratch() -> &'static Path {
    SCRATCH.get().unwrap()
}

fn set(var: &str, value: impl AsRef<std::ffi::OsStr>) {
    // SAFETY: the steps run one at a time on the main thread, and no other thread reads the
    // environment while it is changed.
    unsafe { env::set_var(var, value) }
}

fn unset(var: &str) {
    // SAFETY: as in `set`.
    unsafe { env::remove_var(var) }
}

/// Every step starts from no search variable set and `$HOME` in the scratch folder, whatever
/// an earlier step left behind.
fn clean_env() {
    for var in SEARCH_VARS {
        unset(var);
    }
    set("HOME", scratch().join("home"));
}

/// A step that resolves functions does it per-thread, also when run alone (`load <name>`).
fn per_thread() {
    set_default_stream(DefaultStream::PerThread).unwrap();
}

fn done() -> Outcome {
    Ok(Completion::Completed)
}

/// Whether `var` is on: `1`, `true` or `yes`, the workspace's one rule ([`hostcb_gate::on`]).
fn flag(var: &str) -> bool {
    hostcb_gate::env_on(var)
}

/// What a step lacks when it cannot run here (see the rule at the top of this file).
#[derive(Debug, Clone, Copy)]
enum Lacks {
    /// What only a GPU machine has: fails with `REQUIRE_GPU=1`.
    Gpu,
    /// What CI can provide and a GPU machine has: fails with `CI=1` or `REQUIRE_GPU=1`.
    Provided,
}

/// Skips `step` (ignored, with a `SKIP` line of its own, after the harness's `test <step> ...`),
/// or fails it where the machine must run it.
fn cannot_run(lacks: Lacks, step: &str, why: &str) -> Outcome {
    let strict: &[&str] = match lacks {
        Lacks::Gpu => &["REQUIRE_GPU"],
        Lacks::Provided => &["CI", "REQUIRE_GPU"],
    };
    if let Some(var) = strict.iter().find(|var| flag(var)) {
        let value = env::var(var).unwrap_or_default();
        return Err(format!("{var}={value}, so {step} must run, but it cannot: {why}").into());
    }
    println!("\nSKIP: {step}: {why}");
    Ok(Completion::ignored_with(why))
}

/// Why there is no runtime to load.
#[derive(Debug)]
enum Missing {
    /// None on this machine, and none could be fetched.
    Unavailable(String),
    /// The setup is wrong: always a failure.
    Broken(String),
}

/// The CUDA 13 runtime the steps load, or the outcome of a step that needs it and cannot run.
fn runtime_13(step: &str) -> Result<&'static Path, Outcome> {
    match RUNTIME_13.get_or_init(find_runtime_13) {
        Ok(path) => Ok(path),
        Err(Missing::Unavailable(why)) => Err(cannot_run(
            Lacks::Provided,
            step,
            &format!("no CUDA 13 runtime: {why}"),
        )),
        Err(Missing::Broken(why)) => Err(Err(why.clone().into())),
    }
}

fn find_runtime_13() -> Result<PathBuf, Missing> {
    if let Some(path) = env::var_os(LIBCUDART_13_ENV).filter(|v| !v.is_empty()) {
        let path = PathBuf::from(path);
        if !path.is_file() {
            return Err(Missing::Broken(format!(
                "${LIBCUDART_13_ENV}={}: no such file",
                path.display()
            )));
        }
        println!(
            "the CUDA 13 runtime: {} (${LIBCUDART_13_ENV})",
            path.display()
        );
        return Ok(path);
    }
    let original = ORIGINAL.get().unwrap();
    let mut dirs: Vec<PathBuf> = env::var_os("LD_LIBRARY_PATH")
        .map(|paths| env::split_paths(&paths).collect())
        .unwrap_or_default();
    for root in [&original.cuda_home, &original.cuda_path]
        .into_iter()
        .flatten()
    {
        dirs.push(Path::new(root).join("lib64"));
    }
    dirs.push(PathBuf::from("/usr/local/cuda/lib64"));
    let installed = dirs
        .iter()
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join("libcudart.so.13"))
        .find(|lib| lib.is_file());
    if let Some(lib) = installed {
        println!("the CUDA 13 runtime: {} (installed)", lib.display());
        return Ok(lib);
    }
    let lib = pinned_wheel_runtime()?;
    let version = std::fs::read_to_string(lib.with_file_name("version")).unwrap_or_default();
    println!(
        "the CUDA 13 runtime: {} (the pinned wheel, {})",
        lib.display(),
        version.trim()
    );
    Ok(lib)
}

/// The runtime of the 13.0 target's pinned wheel, as `tools/pinned-runtimes` takes it from the
/// hash-checked wheel (the input cache's, or one pip fetches into it) into the scratch folder.
fn pinned_wheel_runtime() -> Result<PathBuf, Missing> {
    if !cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        return Err(Missing::Unavailable(format!(
            "the pinned runtime wheel is for x86_64 Linux; set {LIBCUDART_13_ENV}"
        )));
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let script = root.join("tools/pinned-runtimes");
    if !script.is_file() {
        return Err(Missing::Unavailable(format!(
            "{} is not there (an executable carried away from its checkout); set \
             {LIBCUDART_13_ENV}",
            script.display()
        )));
    }
    let dest = scratch().join("pinned");
    let mut fetch = Command::new("python3");
    fetch
        .arg(&script)
        .arg(&dest)
        .arg(PINNED_TARGET)
        .current_dir(root);
    // The tests' input cache (the generator's tests fill it too), unless the caller names one.
    let cache = match env::var_os(CACHE_ENV).filter(|v| !v.is_empty()) {
        Some(cache) => PathBuf::from(cache),
        None => {
            let cache = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("hostcb-inputs");
            fetch.env(CACHE_ENV, &cache);
            cache
        }
    };
    // pip reads its configuration (index, proxy) from the user's home, which the steps move.
    match &ORIGINAL.get().unwrap().home {
        Some(home) => fetch.env("HOME", home),
        None => fetch.env_remove("HOME"),
    };
    let out = fetch.output().map_err(|e| {
        Missing::Unavailable(format!(
            "python3 (to run {}) could not run: {e}",
            script.display()
        ))
    })?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let why = stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map_or_else(|| out.status.to_string(), str::to_owned);
    let lib = dest.join(PINNED_TARGET).join("libcudart.so.13");
    match out.status.code() {
        Some(0) if lib.is_file() => Ok(lib),
        Some(0) => Err(Missing::Broken(format!(
            "tools/pinned-runtimes wrote no {}",
            lib.display()
        ))),
        Some(FETCH_FAILED) => Err(Missing::Unavailable(format!(
            "{why}; set {LIBCUDART_13_ENV} to a libcudart.so.13, or put the pinned wheel into \
             {}/wheels",
            cache.display()
        ))),
        _ => Err(Missing::Broken(why)),
    }
}

fn stream_mode() -> Outcome {
    clean_env();
    set("CUDA_HOSTCB_PER_THREAD_DEFAULT_STREAM", "1");
    check_eq!(
        default_stream(),
        DefaultStream::PerThread,
        "read from the environment at first use"
    );
    unset("CUDA_HOSTCB_PER_THREAD_DEFAULT_STREAM");
    set_default_stream(DefaultStream::Legacy).unwrap();
    check_eq!(default_stream(), DefaultStream::Legacy);
    set_default_stream(DefaultStream::PerThread).unwrap();
    check_eq!(default_stream(), DefaultStream::PerThread);
    done()
}

/// Whether the system loader finds `name`.
fn system_has(name: &str) -> bool {
    // SAFETY: loading a CUDA library runs no code that needs anything of the caller.
    unsafe { libloading::Library::new(name) }.is_ok()
}

fn address_in(library: &Path, symbol: &str) -> *const c_void {
    // SAFETY: as in `system_has`; only an address is taken, and the library is the one already
    // loaded, so it stays loaded after this handle closes.
    unsafe {
        let lib = libloading::Library::new(library).unwrap();
        *lib.get::<*const c_void>(symbol).unwrap()
    }
}

fn not_found(outcome: Result<impl std::fmt::Debug, Error>) -> (&'static str, Vec<String>, String) {
    match outcome {
        Err(e @ Error::LibraryNotFound { .. }) => {
            let text = e.to_string();
            let Error::LibraryNotFound { library, searched } = e else {
                unreachable!()
            };
            (library, searched.to_vec(), text)
        }
        other => panic!("expected LibraryNotFound, got {other:?}"),
    }
}

/// `major.minor` of a CUDA version number.
fn dotted(version: u32) -> String {
    format!("{}.{}", version / 1000, version % 1000 / 10)
}

fn driver_explicit() -> Outcome {
    clean_env();
    let missing = scratch().join("missing/libcuda.so.1");
    set("CUDA_HOSTCB_LIBCUDA", &missing);
    let (library, searched, text) = not_found(CU_LAUNCH_HOST_FUNC.address());
    check_eq!(library, "libcuda.so.1");
    check_eq!(
        searched,
        [
            format!("$CUDA_HOSTCB_LIBCUDA={}: no such file", missing.display()),
            "no other place was searched, since the variable is set".to_owned(),
        ]
    );
    check!(
        text.contains("set CUDA_HOSTCB_LIBCUDA to the path"),
        "{text}"
    );
    check!(matches!(
        driver_version(),
        Err(Error::LibraryNotFound { .. })
    ));
    done()
}

/// The whole search, in its documented order, where no driver is installed.
fn driver_search() -> Outcome {
    clean_env();
    if system_has("libcuda.so.1") {
        let why = "the system loader finds libcuda.so.1, so the search cannot fail here \
                   (driver_resolution runs instead)";
        println!("\nSKIP: driver_search_lists_every_place: {why}");
        return Ok(Completion::ignored_with(why));
    }
    let cuda_home = scratch().join("cuda");
    set("CUDA_HOME", &cuda_home);
    let (library, searched, text) = not_found(CU_LAUNCH_HOST_FUNC.address());
    println!("{text}");
    check_eq!(library, "libcuda.so.1");
    check_eq!(searched.len(), 4, "{searched:?}");
    check!(
        searched[0].starts_with("libcuda.so.1 (system loader): dlopen failed: "),
        "{searched:?}"
    );
    check_eq!(
        searched[1],
        format!("{}/lib64/libcuda.so.1: no such file", cuda_home.display())
    );
    check_eq!(
        searched[2],
        format!("{}/compat/libcuda.so.1: no such file", cuda_home.display())
    );
    check_eq!(searched[3], "$CUDA_PATH: not set");
    // A first call through the stub, without a driver: UNRESOLVED, and the mapper gives back
    // the error the stub left, once.
    // SAFETY: no driver loads, so the stub calls nothing.
    let status = unsafe { CU_MADE_UP.function()() };
    check_eq!(status, UNRESOLVED);
    match driver_result("cuNoSuchFunction", status) {
        Err(Error::LibraryNotFound {
            library: "libcuda.so.1",
            searched: left,
        }) => check_eq!(left, searched.as_slice()),
        other => panic!("{other:?}"),
    }
    check!(take_unresolved().is_none(), "the error is left once");
    check!(CU_MADE_UP.resolved().is_none());
    // Without the driver, an error code still becomes an error, named by a fallback.
    match driver_result("cuLaunchHostFunc", 1) {
        Err(
            e @ Error::Cuda {
                api: Api::Driver,
                function: "cuLaunchHostFunc",
                code: 1,
            },
        ) => {
            check_eq!(e.name(), Some("an unknown CUresult"));
            check_eq!(
                e.description().as_deref(),
                Some("no description, since libcuda.so.1 is not loaded")
            );
        }
        other => panic!("{other:?}"),
    }
    check_eq!(driver_result("cuLaunchHostFunc", 0).unwrap(), ());
    done()
}

/// Makes a FIFO at `path`.
fn mkfifo(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: `c_path` is a NUL-terminated path.
    let rc = unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) };
    check_eq!(
        rc,
        0,
        "mkfifo {}: {}",
        path.display(),
        std::io::Error::last_os_error()
    );
}

/// Runs `search` on another thread and returns its outcome, or fails if it has not returned
/// within a few seconds: a loader that opens `fifo` blocks until a writer comes. The writer is
/// then supplied, so that the blocked search ends and the rest of the binary cannot hang on its
/// lock.
fn promptly<T: Send + 'static>(fifo: &Path, search: fn() -> T) -> T {
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(search());
    });
    match receive.recv_timeout(Duration::from_secs(10)) {
        Ok(outcome) => outcome,
        Err(_) => {
            use std::os::unix::fs::OpenOptionsExt;
            let writer = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(fifo);
            drop(writer);
            panic!(
                "the search did not return within 10 s: it opened the FIFO {} and waited for a writer",
                fifo.display()
            );
        }
    }
}

/// A FIFO, a device or a folder where a library is expected is named as such, and never opened
/// (`dlopen` of a FIFO waits for a writer forever).
fn only_regular_files_are_opened() -> Outcome {
    clean_env();
    let scratch = scratch();
    let fifo = scratch.join("fifo/libcuda.so.1");
    mkfifo(&fifo);
    set("CUDA_HOSTCB_LIBCUDA", &fifo);
    let (library, searched, _) = not_found(promptly(&fifo, driver_version));
    check_eq!(library, "libcuda.so.1");
    check_eq!(
        searched,
        [
            format!(
                "$CUDA_HOSTCB_LIBCUDA={}: is not a regular file (a FIFO)",
                fifo.display()
            ),
            "no other place was searched, since the variable is set".to_owned(),
        ]
    );
    unset("CUDA_HOSTCB_LIBCUDA");

    // Through a symbolic link, for each runtime variable.
    let link = scratch.join("fifo/libcudart.so.13");
    std::os::unix::fs::symlink(&fifo, &link).unwrap();
    for var in ["CUDA_HOSTCB_LIBCUDART_13", "CUDA_HOSTCB_LIBCUDART"] {
        set(var, &link);
        let (_, searched, _) = not_found(promptly(&fifo, || runtime_version(13)));
        check_eq!(
            searched[0],
            format!("${var}={}: is not a regular file (a FIFO)", link.display())
        );
        unset(var);
    }

    // A device and a folder.
    set("CUDA_HOSTCB_LIBCUDART_12", "/dev/null");
    let (_, searched, _) = not_found(promptly(&fifo, || runtime_version(12)));
    check_eq!(
        searched[0],
        "$CUDA_HOSTCB_LIBCUDART_12=/dev/null: is not a regular file (a character device)"
    );
    set("CUDA_HOSTCB_LIBCUDART_12", scratch);
    let (_, searched, _) = not_found(promptly(&fifo, || runtime_version(12)));
    check_eq!(
        searched[0],
        format!(
            "$CUDA_HOSTCB_LIBCUDART_12={}: is not a regular file (a folder)",
            scratch.display()
        )
    );
    unset("CUDA_HOSTCB_LIBCUDART_12");

    // In a searched folder: the search names it and goes on. No system has a CUDA 99 runtime,
    // so the system loader cannot end the search early.
    let cuda_home = scratch.join("fifo-home");
    let in_lib64 = cuda_home.join("lib64/libcudart.so.99");
    mkfifo(&in_lib64);
    set("CUDA_HOME", &cuda_home);
    let (library, searched, _) = not_found(promptly(&in_lib64, || runtime_version(99)));
    check_eq!(library, "libcudart.so.99");
    check_eq!(
        searched[1..3],
        [
            format!("{}: is not a regular file (a FIFO)", in_lib64.display()),
            format!("{}/lib/libcudart.so.99: no such file", cuda_home.display()),
        ],
        "{searched:#?}"
    );
    unset("CUDA_HOME");
    done()
}

/// A library that is not the driver is refused, with the reason.
fn not_a_driver() -> Outcome {
    const STEP: &str = "driver_refuses_a_library_that_is_not_the_driver";
    clean_env();
    let runtime = match runtime_13(STEP) {
        Ok(path) => path,
        Err(outcome) => return outcome,
    };
    set("CUDA_HOSTCB_LIBCUDA", runtime);
    let (_, searched, _) = not_found(driver_version());
    check_eq!(
        searched[0],
        format!(
            "$CUDA_HOSTCB_LIBCUDA={}: exports no cuGetProcAddress: the driver is older than CUDA 11.3, or the file is not libcuda",
            runtime.display()
        )
    );
    done()
}

/// Resolution through `cuGetProcAddress`, where a driver is installed.
fn driver_resolution() -> Outcome {
    clean_env();
    if !system_has("libcuda.so.1") {
        return cannot_run(
            Lacks::Gpu,
            "driver_resolution",
            "no CUDA driver: the system loader finds no libcuda.so.1",
        );
    }
    per_thread();
    let version = driver_version().unwrap();
    println!("driver: CUDA {}", dotted(version));
    check!(version >= 11030, "{version}");
    let launch = CU_LAUNCH_HOST_FUNC.address().unwrap();
    check_eq!(
        launch,
        address_in(Path::new("libcuda.so.1"), "cuLaunchHostFunc_ptsz"),
        "the per-thread variant"
    );
    check_eq!(CU_LAUNCH_HOST_FUNC.address().unwrap(), launch);
    // Once resolved, the wrappers call the driver's function itself.
    check_eq!(CU_LAUNCH_HOST_FUNC.function() as *const c_void, launch);
    check_eq!(
        CU_LAUNCH_HOST_FUNC.resolved().map(|f| f as *const c_void),
        Some(launch)
    );
    // SAFETY: cuNoSuchFunction never resolves, so the stub calls nothing.
    let status = unsafe { CU_MADE_UP.function()() };
    check_eq!(status, UNRESOLVED);
    check!(
        matches!(
            driver_result("cuNoSuchFunction", status),
            Err(Error::Unavailable {
                function: "cuNoSuchFunction",
                needs: 13000,
                ..
            })
        ),
        "the stub's error comes back"
    );
    match CU_MADE_UP.address() {
        Err(Error::Unavailable {
            api: Api::Driver,
            function: "cuNoSuchFunction",
            needs: 13000,
            found,
            library,
        }) => {
            check_eq!(found, Some(version));
            check_eq!(library, "libcuda.so.1");
        }
        other => panic!("{other:?}"),
    }
    match CU_LAUNCH_HOST_FUNC_V2.address() {
        // ABI 13010, first declared by the 13.2 header: refused below 13.2 (a 13.1 driver would
        // answer with the three-argument function).
        Ok(_) => check!(version >= 13020, "{version}"),
        Err(e @ Error::Unavailable { .. }) => {
            check!(version < 13020, "{version}: {e}");
            let text = e.to_string();
            check!(text.starts_with("cuLaunchHostFunc_v2 is not available: it needs CUDA 13.2, the installed driver (libcuda.so.1) is CUDA "), "{text}");
            println!("{text}");
        }
        Err(e) => panic!("{e}"),
    }
    match driver_result("cuLaunchHostFunc", 1) {
        Err(e @ Error::Cuda { .. }) => check_eq!(
            e.to_string(),
            "cuLaunchHostFunc failed with CUDA_ERROR_INVALID_VALUE (1): invalid argument"
        ),
        other => panic!("{other:?}"),
    }
    check!(matches!(
        set_default_stream(DefaultStream::Legacy),
        Err(Error::StreamModeLocked {
            current: DefaultStream::PerThread
        })
    ));
    done()
}

/// The runtime variables: each is the only file tried, the per-major one first, and a runtime
/// of the wrong major is refused.
fn runtime_explicit() -> Outcome {
    const STEP: &str = "runtime_explicit_paths";
    clean_env();
    let runtime = match runtime_13(STEP) {
        Ok(path) => path,
        Err(outcome) => return outcome,
    };
    let missing = scratch().join("missing/libcudart.so.13");
    set("CUDA_HOSTCB_LIBCUDART", &missing);
    let (library, searched, text) = not_found(RT13_VERSION.address());
    check_eq!(library, "libcudart.so.13");
    check_eq!(
        searched,
        [
            format!("$CUDA_HOSTCB_LIBCUDART={}: no such file", missing.display()),
            "no other place was searched, since the variable is set".to_owned(),
        ]
    );
    check!(text.contains("set CUDA_HOSTCB_LIBCUDART_13"), "{text}");

    // The per-major variable wins over the generic one, for its major only.
    set("CUDA_HOSTCB_LIBCUDART_13", &missing);
    set("CUDA_HOSTCB_LIBCUDART", runtime);
    let (_, searched, _) = not_found(RT13_VERSION.address());
    check_eq!(
        searched[0],
        format!(
            "$CUDA_HOSTCB_LIBCUDART_13={}: no such file",
            missing.display()
        )
    );
    unset("CUDA_HOSTCB_LIBCUDART_13");

    // An explicit runtime of the wrong major version is refused; it was opened through a
    // symbolic link, which is fine.
    let link = scratch().join("link/libcudart.so.12");
    std::fs::create_dir_all(link.parent().unwrap()).unwrap();
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(runtime, &link).unwrap();
    set("CUDA_HOSTCB_LIBCUDART", &link);
    let (library, searched, _) = not_found(RT12_VERSION.address());
    check_eq!(library, "libcudart.so.12");
    let prefix = format!(
        "$CUDA_HOSTCB_LIBCUDART={}: it is the CUDA 13.",
        link.display()
    );
    check!(
        searched[0].starts_with(&prefix) && searched[0].ends_with(" runtime, not a CUDA 12.x one"),
        "{searched:?}"
    );
    unset("CUDA_HOSTCB_LIBCUDART");
    done()
}

/// The whole runtime search, in its documented order, finding nothing: for a CUDA 99 runtime,
/// which no system has, so that the system loader cannot end it early.
fn runtime_search() -> Outcome {
    clean_env();
    let scratch = scratch();
    let cuda_home = scratch.join("cuda");
    set("CUDA_HOME", &cuda_home);
    let venv = scratch.join("venv");
    let site = venv.join("lib/python3.12/site-packages");
    std::fs::create_dir_all(&site).unwrap();
    set("VIRTUAL_ENV", &venv);
    let python_path = [scratch.join("pp1"), scratch.join("pp2")];
    set("PYTHONPATH", env::join_paths(&python_path).unwrap());
    let home = scratch.join("home");
    let wheel = "nvidia/cu99/lib/libcudart.so.99";
    let (library, searched, text) = not_found(runtime_version(99));
    println!("{text}");
    check_eq!(library, "libcudart.so.99");
    check!(
        searched[0].starts_with("libcudart.so.99 (system loader): dlopen failed: "),
        "{searched:?}"
    );
    let expected = [
        format!(
            "{}/lib64/libcudart.so.99: no such file",
            cuda_home.display()
        ),
        format!("{}/lib/libcudart.so.99: no such file", cuda_home.display()),
        "$CUDA_PATH: not set".to_owned(),
        format!("{}/{wheel}: no such file", site.display()),
        "$CONDA_PREFIX: not set".to_owned(),
        format!("{}/{wheel}: no such file", python_path[0].display()),
        format!("{}/{wheel}: no such file", python_path[1].display()),
        format!(
            "{}/.local/lib/python3.*/site-packages/{wheel}: no such folder",
            home.display()
        ),
    ];
    check_eq!(searched[1..=expected.len()], expected, "{searched:#?}");
    let last = searched.last().unwrap();
    check!(
        last.starts_with(&format!("/usr/lib/python3/dist-packages/{wheel}: ")),
        "{last}"
    );
    check!(
        searched
            .iter()
            .any(|s| s.starts_with("/usr/local/lib/python3")),
        "{searched:#?}"
    );
    check!(text.contains("set CUDA_HOSTCB_LIBCUDART_99"), "{text}");
    done()
}

/// The runtime loads and runs, without a GPU: installed as pip installs it with `--user`, found
/// through `$HOME` (or first by the system loader, where it finds one); eight threads race to
/// load it.
fn runtime_loading() -> Outcome {
    const STEP: &str = "runtime_loading";
    clean_env();
    let runtime = match runtime_13(STEP) {
        Ok(path) => path,
        Err(outcome) => return outcome,
    };
    per_thread();
    let home = scratch().join("home");
    let user_lib = home.join(".local/lib/python3.12/site-packages/nvidia/cu13/lib/libcudart.so.13");
    std::fs::create_dir_all(user_lib.parent().unwrap()).unwrap();
    std::fs::copy(runtime, &user_lib).unwrap();
    let system = system_has("libcudart.so.13");
    if system {
        println!("the system loader finds libcudart.so.13, so that one is loaded");
    }
    let barrier = Barrier::new(8);
    let stubs = std::sync::Mutex::new(Vec::new());
    let outcomes: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    // The first calls, at once on every thread, through the stubs: one that
                    // resolves and forwards the argument, and one that cannot resolve, whose
                    // error each thread gets back for itself.
                    let mut version: c_int = 0;
                    // SAFETY: `version` is valid for writes; the type is the function's.
                    let code = unsafe { RT13_GET_VERSION.function()(&mut version) };
                    // SAFETY: cudaNoSuchFunction never resolves, so the stub calls nothing.
                    let status = unsafe { RT13_MADE_UP.function()() };
                    let unresolved = runtime_result("cudaNoSuchFunction", 13, status);
                    stubs
                        .lock()
                        .unwrap()
                        .push((code, version, status, unresolved));
                    (
                        RT13_VERSION.address().map(|p| p as usize),
                        RT13_MADE_UP.address().map(|p| p as usize),
                        RT13_LAUNCH_HOST_FUNC.address().map(|p| p as usize),
                    )
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let (version_fn, made_up, launch) = outcomes[0];
    for other in &outcomes[1..] {
        check_eq!(other.0.as_ref().ok(), version_fn.as_ref().ok());
        check_eq!(other.2.as_ref().ok(), launch.as_ref().ok());
        check!(other.1.as_ref().is_err_and(Error::is_unavailable));
    }

    // The resolved function runs, without a GPU.
    let version_fn = version_fn.unwrap() as *const c_void;
    // SAFETY: the address is cudaRuntimeGetVersion's, whose C type this is.
    let get_version = unsafe {
        std::mem::transmute::<*const c_void, unsafe extern "C" fn(*mut c_int) -> u32>(version_fn)
    };
    let mut version: c_int = 0;
    // SAFETY: `version` is valid for writes.
    check_eq!(unsafe { get_version(&mut version) }, 0);
    let version = u32::try_from(version).unwrap();
    check_eq!(version / 1000, 13);
    check_eq!(runtime_version(13).unwrap(), version);
    println!("runtime: CUDA {}", dotted(version));
    let stubs = stubs.into_inner().unwrap();
    check_eq!(stubs.len(), 8);
    for (code, got, status, unresolved) in stubs {
        check_eq!(
            (code, u32::try_from(got).unwrap()),
            (0, version),
            "through the stub"
        );
        check_eq!(status, UNRESOLVED);
        check!(
            unresolved.is_err_and(|e| e == made_up.unwrap_err()),
            "{unresolved:?}"
        );
    }
    check_eq!(
        RT13_GET_VERSION.resolved().map(|f| f as usize),
        Some(version_fn as usize)
    );

    let loaded = (!system).then(|| user_lib.display().to_string());
    match made_up {
        Err(e @ Error::Unavailable { .. }) => {
            check_eq!(e.code(), None);
            let Error::Unavailable {
                api,
                function,
                needs,
                found,
                library,
            } = &e
            else {
                unreachable!()
            };
            check_eq!(
                (*api, *function, *needs),
                (Api::Runtime { major: 13 }, "cudaNoSuchFunction", 13000)
            );
            check_eq!(*found, Some(version));
            if let Some(loaded) = &loaded {
                check_eq!(library, loaded);
                check_eq!(
                    e.to_string(),
                    format!(
                        "cudaNoSuchFunction is not available: the installed CUDA 13 runtime ({loaded}) is CUDA {} and does not provide it, though it appeared in CUDA 13.0; it may have been removed, so use the API that replaces it",
                        dotted(version)
                    )
                );
            }
        }
        other => panic!("{other:?}"),
    }
    if let Some(loaded) = &loaded {
        // The per-thread mode chose the _ptsz variant.
        let launch = launch.unwrap() as *const c_void;
        check_eq!(
            launch,
            address_in(Path::new(loaded), "cudaLaunchHostFunc_ptsz")
        );
        assert_ne!(launch, address_in(Path::new(loaded), "cudaLaunchHostFunc"));
    }

    // Error codes are named by the runtime that was called.
    check_eq!(runtime_result("cudaLaunchHostFunc", 13, 0).unwrap(), ());
    match runtime_result("cudaLaunchHostFunc", 13, 1) {
        Err(
            e @ Error::Cuda {
                api: Api::Runtime { major: 13 },
                ..
            },
        ) => {
            check_eq!(e.code(), Some(1));
            check_eq!(
                e.to_string(),
                "cudaLaunchHostFunc failed with cudaErrorInvalidValue (1): invalid argument"
            );
        }
        other => panic!("{other:?}"),
    }
    match runtime_result("cudaLaunchHostFunc", 12, 1) {
        Err(e @ Error::Cuda { .. }) => check_eq!(e.name(), Some("an unknown cudaError_t")),
        other => panic!("{other:?}"),
    }

    // Resolution fixed the mode.
    check!(matches!(
        set_default_stream(DefaultStream::Legacy),
        Err(Error::StreamModeLocked {
            current: DefaultStream::PerThread
        })
    ));
    set_default_stream(DefaultStream::PerThread).unwrap();

    // A loaded runtime stays loaded, whatever the environment says later.
    set(
        "CUDA_HOSTCB_LIBCUDART",
        scratch().join("missing/libcudart.so.13"),
    );
    check_eq!(RT13_VERSION.address().unwrap(), version_fn);
    check_eq!(runtime_version(13).unwrap(), version);
    unset("CUDA_HOSTCB_LIBCUDART");
    done()
}
