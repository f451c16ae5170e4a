//! Loads the CUDA libraries for real: every error of the search on a machine without them, and
//! the CUDA 13 runtime of pip's `nvidia-cuda-runtime` wheel, which works without a GPU. Where a
//! driver is installed, resolution through `cuGetProcAddress` too.
//!
//! The loaded libraries, the default-stream mode and the environment belong to the whole
//! process, and a successful load is final, so this binary holds one test whose steps run in a
//! fixed order: failures first, then loads.

use std::env;
use std::ffi::{c_int, c_void};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Barrier, mpsc};
use std::time::Duration;

use cuda_hostcb::error::{Api, Error};
use cuda_hostcb::load::{
    DefaultStream, DriverFn, RuntimeFn, default_stream, driver_result, driver_version,
    runtime_result, runtime_version, set_default_stream,
};

const WHEEL: &str = "nvidia-cuda-runtime==13.0.96";
/// Where the wheel is looked for before it is downloaded (for machines that cannot reach PyPI).
const WHEELS_ENV: &str = "CUDA_HOSTCB_TEST_WHEELS";

static RT13_VERSION: RuntimeFn = RuntimeFn::new(
    "cudaRuntimeGetVersion",
    13,
    c"cudaRuntimeGetVersion",
    None,
    2000,
);
static RT13_MADE_UP: RuntimeFn =
    RuntimeFn::new("cudaNoSuchFunction", 13, c"cudaNoSuchFunction", None, 13000);
static RT13_LAUNCH_HOST_FUNC: RuntimeFn = RuntimeFn::new(
    "cudaLaunchHostFunc",
    13,
    c"cudaLaunchHostFunc",
    Some(c"cudaLaunchHostFunc_ptsz"),
    10000,
);
static RT12_VERSION: RuntimeFn = RuntimeFn::new(
    "cudaRuntimeGetVersion",
    12,
    c"cudaRuntimeGetVersion",
    None,
    2000,
);

static CU_LAUNCH_HOST_FUNC: DriverFn =
    DriverFn::new("cuLaunchHostFunc", c"cuLaunchHostFunc", 10000, true);
static CU_LAUNCH_HOST_FUNC_V2: DriverFn =
    DriverFn::new("cuLaunchHostFunc_v2", c"cuLaunchHostFunc", 13010, true);
static CU_MADE_UP: DriverFn = DriverFn::new("cuNoSuchFunction", c"cuNoSuchFunction", 13000, false);

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

fn set(var: &str, value: impl AsRef<std::ffi::OsStr>) {
    // SAFETY: this binary runs one test, on one thread, and nothing else reads the environment
    // while it is changed.
    unsafe { env::set_var(var, value) }
}

fn unset(var: &str) {
    // SAFETY: as in `set`.
    unsafe { env::remove_var(var) }
}

#[test]
fn loading_runs_in_process_order() {
    let wheel_lib = fetch_runtime_13();
    let scratch =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("load-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    for var in SEARCH_VARS {
        unset(var);
    }
    set("HOME", scratch.join("home"));

    stream_mode_can_change_before_any_resolution();
    driver(&scratch, wheel_lib.as_deref());
    only_regular_files_are_opened(&scratch);
    match &wheel_lib {
        Some(lib) => runtime(&scratch, lib),
        None => println!("SKIP runtime loading: could not get {WHEEL} (see above)"),
    }
    let _ = std::fs::remove_dir_all(&scratch);
}

/// The unpacked `libcudart.so.13` of the wheel, downloaded once into the target folder.
fn fetch_runtime_13() -> Option<PathBuf> {
    let dir = env::var_os(WHEELS_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("wheels"));
    let lib = dir.join("unpacked/nvidia/cu13/lib/libcudart.so.13");
    if lib.is_file() {
        return Some(lib);
    }
    let find_wheel = || {
        std::fs::read_dir(&dir)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                    n.starts_with("nvidia_cuda_runtime-13.0.96-") && n.ends_with(".whl")
                })
            })
    };
    if find_wheel().is_none() {
        let status = Command::new("python3")
            .args([
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--quiet",
                "-d",
            ])
            .arg(&dir)
            .arg(WHEEL)
            .status();
        if !matches!(status, Ok(s) if s.success()) {
            println!("SKIP: `python3 -m pip download {WHEEL}` failed: {status:?}");
            return None;
        }
    }
    let wheel = find_wheel()?;
    let status = Command::new("python3")
        .args(["-m", "zipfile", "-e"])
        .arg(&wheel)
        .arg(dir.join("unpacked"))
        .status();
    if !matches!(status, Ok(s) if s.success()) || !lib.is_file() {
        println!("SKIP: unpacking {} failed: {status:?}", wheel.display());
        return None;
    }
    Some(lib)
}

fn stream_mode_can_change_before_any_resolution() {
    set("CUDA_HOSTCB_PER_THREAD_DEFAULT_STREAM", "1");
    assert_eq!(
        default_stream(),
        DefaultStream::PerThread,
        "read from the environment at first use"
    );
    unset("CUDA_HOSTCB_PER_THREAD_DEFAULT_STREAM");
    set_default_stream(DefaultStream::Legacy).unwrap();
    assert_eq!(default_stream(), DefaultStream::Legacy);
    set_default_stream(DefaultStream::PerThread).unwrap();
    assert_eq!(default_stream(), DefaultStream::PerThread);
}

/// Whether the system loader finds `name`, and the address of `symbol` in it.
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
            (library, searched, text)
        }
        other => panic!("expected LibraryNotFound, got {other:?}"),
    }
}

/// Makes a FIFO at `path`.
fn mkfifo(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: `c_path` is a NUL-terminated path.
    let rc = unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) };
    assert_eq!(
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
fn only_regular_files_are_opened(scratch: &Path) {
    let fifo = scratch.join("fifo/libcuda.so.1");
    mkfifo(&fifo);
    set("CUDA_HOSTCB_LIBCUDA", &fifo);
    let (library, searched, _) = not_found(promptly(&fifo, driver_version));
    assert_eq!(library, "libcuda.so.1");
    assert_eq!(
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
        assert_eq!(
            searched[0],
            format!("${var}={}: is not a regular file (a FIFO)", link.display())
        );
        unset(var);
    }

    // A device and a folder.
    set("CUDA_HOSTCB_LIBCUDART_12", "/dev/null");
    let (_, searched, _) = not_found(promptly(&fifo, || runtime_version(12)));
    assert_eq!(
        searched[0],
        "$CUDA_HOSTCB_LIBCUDART_12=/dev/null: is not a regular file (a character device)"
    );
    set("CUDA_HOSTCB_LIBCUDART_12", scratch);
    let (_, searched, _) = not_found(promptly(&fifo, || runtime_version(12)));
    assert_eq!(
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
    let outer_home = env::var_os("CUDA_HOME");
    set("CUDA_HOME", &cuda_home);
    let (library, searched, _) = not_found(promptly(&in_lib64, || runtime_version(99)));
    assert_eq!(library, "libcudart.so.99");
    assert_eq!(
        searched[1..3],
        [
            format!("{}: is not a regular file (a FIFO)", in_lib64.display()),
            format!("{}/lib/libcudart.so.99: no such file", cuda_home.display()),
        ],
        "{searched:#?}"
    );
    match outer_home {
        Some(home) => set("CUDA_HOME", home),
        None => unset("CUDA_HOME"),
    }
}

fn driver(scratch: &Path, not_a_driver: Option<&Path>) {
    // An explicit path is the only file tried.
    let missing = scratch.join("missing/libcuda.so.1");
    set("CUDA_HOSTCB_LIBCUDA", &missing);
    let (library, searched, text) = not_found(CU_LAUNCH_HOST_FUNC.get());
    assert_eq!(library, "libcuda.so.1");
    assert_eq!(
        searched,
        [
            format!("$CUDA_HOSTCB_LIBCUDA={}: no such file", missing.display()),
            "no other place was searched, since the variable is set".to_owned(),
        ]
    );
    assert!(
        text.contains("set CUDA_HOSTCB_LIBCUDA to the path"),
        "{text}"
    );
    assert!(matches!(
        driver_version(),
        Err(Error::LibraryNotFound { .. })
    ));

    // A library that is not the driver is refused, with the reason.
    if let Some(lib) = not_a_driver {
        set("CUDA_HOSTCB_LIBCUDA", lib);
        let (_, searched, _) = not_found(driver_version());
        assert!(
            searched[0].ends_with("exports no cuGetProcAddress: the driver is older than CUDA 11.3, or the file is not libcuda"),
            "{searched:?}"
        );
    }
    unset("CUDA_HOSTCB_LIBCUDA");

    // The whole search, in its documented order.
    let cuda_home = scratch.join("cuda");
    set("CUDA_HOME", &cuda_home);
    if !system_has("libcuda.so.1") {
        let (library, searched, text) = not_found(CU_LAUNCH_HOST_FUNC.get());
        println!("{text}");
        assert_eq!(library, "libcuda.so.1");
        assert_eq!(searched.len(), 4, "{searched:?}");
        assert!(
            searched[0].starts_with("libcuda.so.1 (system loader): dlopen failed: "),
            "{searched:?}"
        );
        assert_eq!(
            searched[1],
            format!("{}/lib64/libcuda.so.1: no such file", cuda_home.display())
        );
        assert_eq!(
            searched[2],
            format!("{}/compat/libcuda.so.1: no such file", cuda_home.display())
        );
        assert_eq!(searched[3], "$CUDA_PATH: not set");
        // Without the driver, an error code still becomes an error, named by a fallback.
        match driver_result("cuLaunchHostFunc", 1) {
            Err(Error::Cuda {
                api: Api::Driver,
                function: "cuLaunchHostFunc",
                code: 1,
                name,
                description,
            }) => {
                assert_eq!(name, "an unknown CUresult");
                assert_eq!(
                    description,
                    "no description, since libcuda.so.1 is not loaded"
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(driver_result("cuLaunchHostFunc", 0).unwrap(), ());
        println!("SKIP driver resolution: this machine has no libcuda.so.1");
        return;
    }

    let version = driver_version().unwrap();
    assert!(version >= 11030, "{version}");
    let launch = CU_LAUNCH_HOST_FUNC.get().unwrap();
    assert_eq!(
        launch,
        address_in(Path::new("libcuda.so.1"), "cuLaunchHostFunc_ptsz"),
        "the per-thread variant"
    );
    assert_eq!(CU_LAUNCH_HOST_FUNC.get().unwrap(), launch);
    match CU_MADE_UP.get() {
        Err(Error::Unavailable {
            api: Api::Driver,
            function: "cuNoSuchFunction",
            needs: 13000,
            found,
            library,
        }) => {
            assert_eq!(found, Some(version));
            assert_eq!(library, "libcuda.so.1");
        }
        other => panic!("{other:?}"),
    }
    match CU_LAUNCH_HOST_FUNC_V2.get() {
        Ok(_) => assert!(version >= 13010, "{version}"),
        Err(e @ Error::Unavailable { .. }) => {
            assert!(version < 13010, "{version}: {e}");
            let text = e.to_string();
            assert!(text.starts_with("cuLaunchHostFunc_v2 is not available: it needs CUDA 13.1, the installed driver (libcuda.so.1) is CUDA "), "{text}");
            println!("{text}");
        }
        Err(e) => panic!("{e}"),
    }
    match driver_result("cuLaunchHostFunc", 1) {
        Err(e @ Error::Cuda { .. }) => assert_eq!(
            e.to_string(),
            "cuLaunchHostFunc failed with CUDA_ERROR_INVALID_VALUE (1): invalid argument"
        ),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        set_default_stream(DefaultStream::Legacy),
        Err(Error::StreamModeLocked {
            current: DefaultStream::PerThread
        })
    ));
}

fn runtime(scratch: &Path, wheel_lib: &Path) {
    // An explicit path is the only file tried.
    let missing = scratch.join("missing/libcudart.so.13");
    set("CUDA_HOSTCB_LIBCUDART", &missing);
    let (library, searched, text) = not_found(RT13_VERSION.get());
    assert_eq!(library, "libcudart.so.13");
    assert_eq!(
        searched[0],
        format!("$CUDA_HOSTCB_LIBCUDART={}: no such file", missing.display())
    );
    assert!(text.contains("set CUDA_HOSTCB_LIBCUDART_13"), "{text}");

    // The per-major variable wins over the generic one, for its major only.
    set("CUDA_HOSTCB_LIBCUDART_13", &missing);
    set("CUDA_HOSTCB_LIBCUDART", wheel_lib);
    let (_, searched, _) = not_found(RT13_VERSION.get());
    assert_eq!(
        searched[0],
        format!(
            "$CUDA_HOSTCB_LIBCUDART_13={}: no such file",
            missing.display()
        )
    );
    unset("CUDA_HOSTCB_LIBCUDART_13");
    set("CUDA_HOSTCB_LIBCUDART", &missing);

    // An explicit runtime of the wrong major version is refused.
    set("CUDA_HOSTCB_LIBCUDART", wheel_lib);
    let (library, searched, _) = not_found(RT12_VERSION.get());
    assert_eq!(library, "libcudart.so.12");
    assert_eq!(
        searched[0],
        format!(
            "$CUDA_HOSTCB_LIBCUDART={}: it is the CUDA 13.0 runtime, not a CUDA 12.x one",
            wheel_lib.display()
        )
    );
    unset("CUDA_HOSTCB_LIBCUDART");

    // The whole search, in its documented order, finding nothing.
    let cuda_home = scratch.join("cuda");
    let venv = scratch.join("venv");
    let site = venv.join("lib/python3.12/site-packages");
    std::fs::create_dir_all(&site).unwrap();
    set("VIRTUAL_ENV", &venv);
    let python_path = [scratch.join("pp1"), scratch.join("pp2")];
    set("PYTHONPATH", env::join_paths(&python_path).unwrap());
    let home = scratch.join("home");
    let wheel = "nvidia/cu13/lib/libcudart.so.13";
    let system = system_has("libcudart.so.13");
    if !system {
        let (_, searched, text) = not_found(RT13_VERSION.get());
        println!("{text}");
        assert!(
            searched[0].starts_with("libcudart.so.13 (system loader): dlopen failed: "),
            "{searched:?}"
        );
        let expected = [
            format!(
                "{}/lib64/libcudart.so.13: no such file",
                cuda_home.display()
            ),
            format!("{}/lib/libcudart.so.13: no such file", cuda_home.display()),
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
        assert_eq!(searched[1..=expected.len()], expected, "{searched:#?}");
        let last = searched.last().unwrap();
        assert!(
            last.starts_with(&format!("/usr/lib/python3/dist-packages/{wheel}: ")),
            "{last}"
        );
        assert!(
            searched
                .iter()
                .any(|s| s.starts_with("/usr/local/lib/python3")),
            "{searched:#?}"
        );
    } else {
        println!("SKIP runtime search failure: the system loader finds libcudart.so.13");
    }

    // Installed as pip installs it with --user, found through $HOME; eight threads race to load.
    let user_site = home.join(".local/lib/python3.12/site-packages");
    let user_lib = user_site.join(wheel);
    std::fs::create_dir_all(user_lib.parent().unwrap()).unwrap();
    std::fs::copy(wheel_lib, &user_lib).unwrap();
    let barrier = Barrier::new(8);
    let outcomes: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    (
                        RT13_VERSION.get().map(|p| p as usize),
                        RT13_MADE_UP.get().map(|p| p as usize),
                        RT13_LAUNCH_HOST_FUNC.get().map(|p| p as usize),
                    )
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let (version_fn, made_up, launch) = outcomes[0].clone();
    for other in &outcomes[1..] {
        assert_eq!(other.0.as_ref().ok(), version_fn.as_ref().ok());
        assert_eq!(other.2.as_ref().ok(), launch.as_ref().ok());
        assert!(other.1.as_ref().is_err_and(Error::is_unavailable));
    }
    let loaded = if system {
        None
    } else {
        Some(user_lib.display().to_string())
    };
    match made_up {
        Err(e @ Error::Unavailable { .. }) => {
            assert_eq!(e.code(), None);
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
            assert_eq!(
                (*api, *function, *needs),
                (Api::Runtime { major: 13 }, "cudaNoSuchFunction", 13000)
            );
            assert_eq!(found.map(|v| v / 1000), Some(13));
            if let Some(loaded) = &loaded {
                assert_eq!(library, loaded);
                assert_eq!(*found, Some(13000));
                assert_eq!(
                    e.to_string(),
                    format!(
                        "cudaNoSuchFunction is not available: the installed CUDA 13 runtime ({loaded}) is CUDA 13.0 and does not provide it, though it appeared in CUDA 13.0; it may have been removed, so use the API that replaces it"
                    )
                );
            }
        }
        other => panic!("{other:?}"),
    }

    // The resolved function runs, without a GPU.
    let version_fn = version_fn.unwrap() as *const c_void;
    // SAFETY: the address is cudaRuntimeGetVersion's, whose C type this is.
    let get_version = unsafe {
        std::mem::transmute::<*const c_void, unsafe extern "C" fn(*mut c_int) -> u32>(version_fn)
    };
    let mut version: c_int = 0;
    // SAFETY: `version` is valid for writes.
    assert_eq!(unsafe { get_version(&mut version) }, 0);
    assert_eq!(version / 1000, 13);
    assert_eq!(runtime_version(13).unwrap(), version as u32);
    if let Some(loaded) = &loaded {
        assert_eq!(version, 13000);
        // The per-thread mode chose the _ptsz variant.
        let launch = launch.unwrap() as *const c_void;
        assert_eq!(
            launch,
            address_in(Path::new(loaded), "cudaLaunchHostFunc_ptsz")
        );
        assert_ne!(launch, address_in(Path::new(loaded), "cudaLaunchHostFunc"));
    }

    // Error codes are named by the runtime that was called.
    assert_eq!(runtime_result("cudaLaunchHostFunc", 13, 0).unwrap(), ());
    match runtime_result("cudaLaunchHostFunc", 13, 1) {
        Err(
            e @ Error::Cuda {
                api: Api::Runtime { major: 13 },
                ..
            },
        ) => {
            assert_eq!(e.code(), Some(1));
            assert_eq!(
                e.to_string(),
                "cudaLaunchHostFunc failed with cudaErrorInvalidValue (1): invalid argument"
            );
        }
        other => panic!("{other:?}"),
    }
    match runtime_result("cudaLaunchHostFunc", 12, 1) {
        Err(Error::Cuda { name, .. }) => assert_eq!(name, "an unknown cudaError_t"),
        other => panic!("{other:?}"),
    }

    // Resolution fixed the mode.
    assert!(matches!(
        set_default_stream(DefaultStream::Legacy),
        Err(Error::StreamModeLocked {
            current: DefaultStream::PerThread
        })
    ));
    set_default_stream(DefaultStream::PerThread).unwrap();

    // A loaded runtime stays loaded, whatever the environment says later.
    set("CUDA_HOSTCB_LIBCUDART", &missing);
    assert_eq!(RT13_VERSION.get().unwrap(), version_fn);
    assert_eq!(runtime_version(13).unwrap(), version as u32);
    unset("CUDA_HOSTCB_LIBCUDART");
}
