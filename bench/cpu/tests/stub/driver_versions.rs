//! Every driver version, simulated: the stub driver (`stub/cuda_stub.c`) acts as the driver of
//! each pinned target's CUDA version D (12.0 to 13.5), its `cuGetProcAddress` answering from the
//! `PFN_<name>_v<version>[_ptsz|_ptds]` typedefs of D's own `cudaTypedefs.h` (read here from the
//! hash-checked runtime wheel that `generator/inputs.lock` pins for D, fetched into the input
//! cache on first use) with the real driver's rule: a version newer than D refused, else the
//! newest ABI of the name at or below the version asked for (under the per-thread flag its
//! `_ptsz`/`_ptds` twin where that version has one).
//!
//! For every D, both default-stream modes (one child process each: the mode and the resolved
//! entry points are fixed per process) and every committed target T (`for_each_target!`), each
//! driver entry point of T must ask `cuGetProcAddress` once, for its own name (or its base
//! without `_vN`), with the flag of the mode, for an ABI that T's own header declares; and then
//! resolve to exactly that ABI where D's header declares it, else return `Error::Unavailable`
//! naming its version and D; or, where D is older than the first pinned header of T's major
//! that declares that ABI (13.1's header lacks `PFN_cuLaunchHostFunc_v13010`, first in 13.2's),
//! return `Error::Unavailable` naming that header's version without asking (such a driver
//! would hand back an older ABI of the name, another signature; that outcome fails the test). The safe layer (one, over the newest target's bindings) at each D: a
//! one-shot closure on a stream runs everywhere, and so does `Stream::launch_fn` on a plain
//! stream (below 12.3, which lacks `cuStreamGetCaptureInfo_v3`, through `cuStreamIsCapturing`);
//! `launch_fn` on a capturing stream captures from 12.3 and returns `_v3`'s `Unavailable`
//! below; a sync mode (`Stream::launch_with_sync_mode`, and a host node with one,
//! `cuGraphAddNode_v2` with `CUDA_HOST_NODE_PARAMS_v2`) is refused naming the driver below 13.2,
//! and reaches the driver from 13.2. And every kind of host node the layer makes (added, added
//! with a sync mode, set in an updatable executable, set with a sync mode): the stub records the
//! entry point each reached and the bytes of the parameters it was handed, and none may set a
//! byte beyond what that driver version's own `cuda.h` declares of the struct (16 bytes of
//! `CUDA_HOST_NODE_PARAMS`; of `CUDA_HOST_NODE_PARAMS_v2` none before 12.3, 16 up to 13.1, 20 in
//! 13.2 and 13.3, 32 from 13.4, read from each pinned wheel's `cuda.h`).
//!
//! With `HOSTCB_TESTS_WRONG_EXPECTATIONS=1` the stub gets wrong tables (every ABI of
//! `cuLaunchHostFunc` one minor version later than its header says), so every simulated driver
//! must fail, and the test with them.
//!
//! The stub is the one `bench/cpu/build.rs` built on this machine (`HOSTCB_STUB_DIR`); where it is
//! not (an executable carried to another machine), the test says so and passes.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

use cuda_hostcb::Error;
use cuda_hostcb::error::Api;
use cuda_hostcb::load::{DefaultStream, Entry, PER_THREAD_ENV, default_stream};
use cuda_hostcb_safe::{CaptureMode, HostSyncMode, SYNC_MODE_DRIVER_VERSION, SyncModeMissing};
use hostcb_gate::wrong_expectations;

/// Set in a child: the driver version (a pinned target, `13.1`) it simulates.
const CHILD_ENV: &str = "HOSTCB_DRIVER_VERSIONS_CHILD";
/// Set in a child: the folder of the tables, per pinned target `<MAJOR.MINOR>.txt` (its
/// header's) and `<MAJOR.MINOR>.stub.txt` (the stub's: the same, or wrong on purpose).
const TABLES_ENV: &str = "HOSTCB_DRIVER_VERSIONS_TABLES";
/// What starts a child's summary line.
const MATRIX: &str = "matrix: ";
/// `hostcb_stub_count`'s index of `cuGetProcAddress` calls (`COUNT_PROC_ADDRESS`).
const COUNT_PROC_ADDRESS: c_int = 9;
/// `hostcb_stub_count`'s index of the generic function's calls (`COUNT_NOT_IMPLEMENTED`).
const COUNT_NOT_IMPLEMENTED: c_int = 12;
/// The status of the stub's generic function (`STUB_NOT_IMPLEMENTED` in `cuda_stub.c`), which
/// every name it does not implement resolves to: no CUDA version defines it.
const STUB_NOT_IMPLEMENTED: u32 = 0x57AB;
/// `CUdriverProcAddress_flags`.
const LEGACY_STREAM: u64 = 1;
const PER_THREAD_STREAM: u64 = 2;

/// Which typedef of an ABI: `PFN_x_vN`, `PFN_x_vN_ptsz` or `PFN_x_vN_ptds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Kind {
    Plain,
    Ptsz,
    Ptds,
}

impl Kind {
    fn suffix(self) -> &'static str {
        match self {
            Kind::Plain => "",
            Kind::Ptsz => " ptsz",
            Kind::Ptds => " ptds",
        }
    }
}

/// One `PFN_` typedef: the name `cuGetProcAddress` takes, the ABI version, the kind.
type Row = (String, u32, Kind);

/// One header's typedefs and its CUDA version.
struct Table {
    driver: u32,
    rows: BTreeSet<Row>,
}

/// The typedefs of a `cudaTypedefs.h`: every `typedef CUresult (CUDAAPI *PFN_...)(...)`, its
/// name after the header's object-like `#define PFN_x PFN_x_vN` (or
/// `__API_TYPEDEF_PTSZ(PFN_x, N, M)`, whose default is `_vN`), as the preprocessor renames it
/// (12.4 to 12.9 declare `PFN_cuLibraryGetKernelCount` bare, after such a define).
fn parse_typedefs(text: &str) -> Result<BTreeSet<Row>, String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut defines = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.trim_start().strip_prefix('#') else {
            continue;
        };
        let Some(rest) = rest.trim_start().strip_prefix("define") else {
            continue;
        };
        let name = ident(rest);
        if !name.starts_with("PFN_") {
            continue;
        }
        let value = rest.trim_start()[name.len()..].trim();
        let renamed = match value.split_once('(') {
            Some((wrapper, args)) if wrapper.trim().starts_with("__API_TYPEDEF_PT") => {
                let mut args = args.trim_end_matches(')').split(',').map(str::trim);
                match (args.next(), args.next()) {
                    (Some(api), Some(default)) => format!("{api}_v{default}"),
                    _ => return Err(format!("an unexpected define: {line}")),
                }
            }
            _ => ident(value),
        };
        defines.insert(name, renamed);
    }
    let mut rows = BTreeSet::new();
    let mut typedefs = 0;
    for line in text.lines().filter(|l| l.contains("typedef")) {
        typedefs += 1;
        let name = line
            .split_once('*')
            .map(|(_, after)| ident(after))
            .filter(|n| n.starts_with("PFN_"))
            .ok_or_else(|| format!("a typedef that is no PFN_ function pointer: {line}"))?;
        let name = defines.get(&name).cloned().unwrap_or(name);
        let (rest, kind) = match (name.strip_suffix("_ptsz"), name.strip_suffix("_ptds")) {
            (Some(rest), _) => (rest, Kind::Ptsz),
            (_, Some(rest)) => (rest, Kind::Ptds),
            _ => (name.as_str(), Kind::Plain),
        };
        let (base, version) = rest
            .strip_prefix("PFN_")
            .and_then(|r| r.rsplit_once("_v"))
            .and_then(|(base, v)| Some((base, v.parse::<u32>().ok()?)))
            .ok_or_else(|| format!("a typedef name without a version: {name} ({line})"))?;
        rows.insert((base.to_owned(), version, kind));
    }
    if rows.len() != typedefs {
        return Err(format!(
            "{typedefs} typedef lines but {} distinct typedefs",
            rows.len()
        ));
    }
    Ok(rows)
}

/// The table file the stub reads (see `hostcb_stub_use_table`).
fn table_text(table: &Table) -> String {
    let mut text = format!("driver {}\n", table.driver);
    for (name, version, kind) in &table.rows {
        let _ = writeln!(text, "{name} {version}{}", kind.suffix());
    }
    text
}

fn read_table(path: &Path) -> Result<Table, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut lines = text.lines();
    let driver = lines
        .next()
        .and_then(|l| l.strip_prefix("driver "))
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("{}: no driver line", path.display()))?;
    let rows = lines
        .map(|l| {
            let mut words = l.split(' ');
            let name = words.next().unwrap_or_default().to_owned();
            let version = words.next().and_then(|v| v.parse().ok());
            let kind = match words.next() {
                None => Some(Kind::Plain),
                Some("ptsz") => Some(Kind::Ptsz),
                Some("ptds") => Some(Kind::Ptds),
                Some(_) => None,
            };
            match (version, kind) {
                (Some(v), Some(k)) => Ok((name, v, k)),
                _ => Err(format!("{}: a malformed line: {l}", path.display())),
            }
        })
        .collect::<Result<_, _>>()?;
    Ok(Table { driver, rows })
}

/// One committed target, for the child.
struct Target {
    name: &'static str,
    version: &'static str,
    entries: &'static [&'static dyn Entry],
}

/// `cuStreamGetCaptureInfo_v3`'s ABI version: below it a driver lacks the function.
const CAPTURE_INFO_V3: u32 = 12030;

/// What the headers the safe layer is compiled over (the newest target's) declare: host sync
/// modes, `cuStreamGetCaptureInfo_v3`; and their CTK version.
macro_rules! newest {
    ($target:ident, $version:literal, $major:literal, [$($capability:ident)*]) => {
        const SAFE_HOST_FUNC_V2: bool = has!(host_func_v2, [$($capability)*]);
        const SAFE_CAPTURE_INFO_V3: bool = has!(capture_info_v3, [$($capability)*]);
        const SAFE_HEADERS: &str = $version;
    };
}

/// `true` if the capability list holds `$wanted`.
macro_rules! has {
    ($wanted:ident, []) => {
        false
    };
    (host_func_v2, [host_func_v2 $($rest:ident)*]) => {
        true
    };
    (capture_info_v3, [capture_info_v3 $($rest:ident)*]) => {
        true
    };
    ($wanted:ident, [$other:ident $($rest:ident)*]) => {
        has!($wanted, [$($rest)*])
    };
}

cuda_hostcb::newest_target!(newest);

/// The safe layer at driver version `driver`: what its sync modes and `Stream::launch_fn` did,
/// or how that differs from what this driver must give.
///
/// `sync_from`: the first pinned header that declares `PFN_cuLaunchHostFunc_v13010` (the
/// conservative rule for a driver that takes sync modes), read from the tables, not from the
/// safe layer.
///
/// `stub` tells the host nodes it was handed; `declared`: how many bytes of
/// `CUDA_HOST_NODE_PARAMS_v2` this driver's `cuda.h` declares.
fn safe_checks(
    driver: u32,
    sync_from: u32,
    stub: &Stub,
    declared: usize,
) -> Result<String, String> {
    use cuda_hostcb_safe::{Context, Graph, Stream};
    let ctx = Context::primary(0).map_err(|e| format!("Context::primary: {e}"))?;
    ctx.make_current()
        .map_err(|e| format!("make_current: {e}"))?;
    let stream = Stream::new(&ctx).map_err(|e| format!("Stream::new: {e}"))?;
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = || {
        let calls = Arc::clone(&calls);
        move || {
            calls.fetch_add(1, SeqCst);
        }
    };
    stream
        .launch(counted())
        .map_err(|e| format!("Stream::launch: {e}"))?;
    stream
        .launch_fn(counted())
        .map_err(|e| format!("Stream::launch_fn on a plain stream: {e}"))?;
    let sync = stream.launch_with_sync_mode(HostSyncMode::SpinWait, counted());
    stream
        .synchronize()
        .map_err(|e| format!("Stream::synchronize: {e}"))?;
    cuda_hostcb_safe::wait_for_drops().map_err(|e| format!("wait_for_drops: {e}"))?;
    let graph = Graph::new(&ctx).map_err(|e| format!("Graph::new: {e}"))?;
    let node = graph
        .add_host_node_with_sync_mode(&[], HostSyncMode::SpinWait, || {})
        .map(drop);
    let sync_node = stub.last_host_node();
    drop(graph);
    let sync_mode = match (&sync, &node) {
        (Ok(()), Ok(())) => format!("available (the host node reached {})", sync_node.0),
        (
            Err(cuda_hostcb_safe::Error::SyncModeUnavailable { missing: a, .. }),
            Err(cuda_hostcb_safe::Error::SyncModeUnavailable { missing: b, .. }),
        ) if a == b => format!("unavailable: {a:?}"),
        (a, b) => {
            return Err(format!(
                "Stream::launch_with_sync_mode: {a:?}; \
                 Graph::add_host_node_with_sync_mode: {b:?}"
            ));
        }
    };
    // Host nodes of every kind: the entry point each reached and the bytes it was handed, none
    // of them set beyond what this driver's header declares.
    let mut layouts = Vec::new();
    let mut check_layout = |kind: &str, (entry, bytes): (String, Vec<u8>)| -> Result<(), String> {
        let v1 = entry == "cuGraphAddHostNode" || entry == "cuGraphExecHostNodeSetParams";
        let limit = if v1 { 16 } else { declared };
        let used = bytes.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
        if used > limit {
            return Err(format!(
                "{kind}: {entry} was handed bytes set up to {used} of a host node's parameters; this driver's header declares {limit}"
            ));
        }
        layouts.push(format!(
            "{kind} {entry} (set up to byte {used} of {limit} declared)"
        ));
        Ok(())
    };
    let graph = Graph::new(&ctx).map_err(|e| format!("Graph::new: {e}"))?;
    let plain = graph
        .add_host_node(&[], || {})
        .map_err(|e| format!("Graph::add_host_node: {e}"))?
        .id();
    check_layout("add", stub.last_host_node())?;
    let synced = if node.is_ok() {
        check_layout("add with a sync mode", sync_node)?;
        Some(
            graph
                .add_host_node_with_sync_mode(&[], HostSyncMode::SpinWait, || {})
                .map_err(|e| format!("Graph::add_host_node_with_sync_mode: {e}"))?
                .id(),
        )
    } else {
        None
    };
    let mut exec = graph
        .instantiate_updatable()
        .map_err(|e| format!("Graph::instantiate_updatable: {e}"))?;
    exec.set_host_node(plain, || {})
        .map_err(|e| format!("UpdatableExec::set_host_node: {e}"))?;
    check_layout("set", stub.last_host_node())?;
    if let Some(synced) = synced {
        exec.set_host_node_with_sync_mode(synced, HostSyncMode::Blocking, || {})
            .map_err(|e| format!("UpdatableExec::set_host_node_with_sync_mode: {e}"))?;
        check_layout("set with a sync mode", stub.last_host_node())?;
    }
    drop(exec);
    let layouts = layouts.join(", ");
    // A closure captured into a graph (never launched): it needs the capture's id and graph.
    stream
        .begin_capture(CaptureMode::Global)
        .map_err(|e| format!("Stream::begin_capture: {e}"))?;
    let captured = stream.launch_fn(counted());
    let graph = stream.end_capture();
    let capture = match (&captured, &graph) {
        (Ok(()), Ok(_)) => "captured".to_owned(),
        (
            Err(cuda_hostcb_safe::Error::Cuda(Error::Unavailable {
                function, needs, ..
            })),
            Ok(_),
        ) => format!("refused: {function} needs {needs}"),
        (a, b) => {
            return Err(format!(
                "Stream::launch_fn on a capturing stream: {a:?}; end_capture: {b:?}"
            ));
        }
    };
    drop(graph);
    let launched = calls.load(SeqCst);
    // Sync modes: refused naming the headers where they lack them, naming the driver below the
    // first header that declares cuLaunchHostFunc_v2 (13.2: a 13.1 driver would hand back the
    // three-argument function, and take a host node's syncMode for nothing); from there the
    // closure runs and the host node reaches the driver's cuGraphAddNode.
    if SYNC_MODE_DRIVER_VERSION != sync_from {
        return Err(format!(
            "the safe layer takes sync modes from {SYNC_MODE_DRIVER_VERSION}; the first header that declares cuLaunchHostFunc_v2 is {sync_from}"
        ));
    }
    let want_sync = SAFE_HOST_FUNC_V2 && driver >= sync_from;
    let want = if want_sync {
        "available (the host node reached cuGraphAddNode)".to_owned()
    } else if !SAFE_HOST_FUNC_V2 {
        let missing = SyncModeMissing::Target {
            headers: SAFE_HEADERS,
        };
        format!("unavailable: {missing:?}")
    } else {
        format!(
            "unavailable: {:?}",
            SyncModeMissing::Driver { found: driver }
        )
    };
    // Headers before 12.3 declare `_v2` only, which every driver here has.
    let want_capture = if !SAFE_CAPTURE_INFO_V3 || driver >= CAPTURE_INFO_V3 {
        "captured".to_owned()
    } else {
        format!("refused: cuStreamGetCaptureInfo_v3 needs {CAPTURE_INFO_V3}")
    };
    // Stream::launch and launch_fn on the plain stream, and the sync-mode closure where taken.
    let want_calls = if want_sync { 3 } else { 2 };
    if sync_mode != want || capture != want_capture || launched != want_calls {
        return Err(format!(
            "sync mode {sync_mode}, capture {capture}, {launched} closure(s) called; \
             expected {want}, {want_capture}, {want_calls}"
        ));
    }
    Ok(format!(
        "sync mode {sync_mode}; launch_fn: plain stream ran, capture {capture}; host nodes: {layouts}"
    ))
}

/// Every committed target (`cuda_hostcb::for_each_target!`).
fn targets() -> Vec<Target> {
    let mut targets = Vec::new();
    macro_rules! target {
        ($target:ident, $version:literal, $major:literal, [$($capability:ident)*]) => {{
            targets.push(Target {
                name: stringify!($target),
                version: $version,
                entries: cuda_hostcb::$target::driver::entry::ALL,
            });
        }};
    }
    cuda_hostcb::for_each_target!(target);
    targets
}

fn stub_path() -> PathBuf {
    PathBuf::from(env!("HOSTCB_STUB_DIR")).join("libcuda.so.1")
}

#[test]
fn every_driver_version_answers_its_own_typedefs() {
    if let Ok(driver) = std::env::var(CHILD_ENV) {
        if let Err(e) = child(&driver) {
            panic!("{e}");
        }
        return;
    }
    let stub = stub_path();
    if !stub.is_file() {
        println!(
            "SKIP: the stub driver is not at {} (built by bench/cpu/build.rs)",
            stub.display()
        );
        return;
    }
    let tables = tempfile::tempdir().unwrap();
    let drivers = write_tables(tables.path());
    let exe = std::env::current_exe().unwrap();
    let jobs: Vec<(String, DefaultStream)> = drivers
        .iter()
        .flat_map(|d| [DefaultStream::Legacy, DefaultStream::PerThread].map(|m| (d.clone(), m)))
        .collect();
    let next = AtomicUsize::new(0);
    let results: Vec<(usize, Result<String, String>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, SeqCst);
                        let Some((driver, mode)) = jobs.get(i) else {
                            break done;
                        };
                        done.push((i, run_child(&exe, tables.path(), &stub, driver, *mode)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    let mut results = results;
    results.sort_by_key(|(i, _)| *i);
    let mut failures = Vec::new();
    for (i, result) in results {
        let (driver, mode) = &jobs[i];
        match result {
            Ok(summary) => print!("{summary}"),
            Err(e) => failures.push(format!("driver {driver}, {mode} default stream:\n{e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} simulated drivers failed{}:\n{}",
        failures.len(),
        jobs.len(),
        if wrong_expectations() {
            " (HOSTCB_TESTS_WRONG_EXPECTATIONS=1: against wrong tables, as they must)"
        } else {
            ""
        },
        failures.join("\n")
    );
}

/// Writes the tables of every pinned target into `dir` (`12.0.txt`, `12.0.stub.txt`, ...);
/// returns their versions. Each target's `cudaTypedefs.h` and `cuda.h` come from its
/// hash-checked runtime wheel through `tools/pinned-runtimes --headers` (the script that gives
/// the GPU bundle its runtimes), from the input cache or fetched into it.
fn write_tables(dir: &Path) -> Vec<String> {
    // The workspace root, two folders above this package (bench/cpu).
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let script = root.join("tools/pinned-runtimes");
    let out = Command::new("python3")
        .arg(&script)
        .arg("--headers")
        .arg(scratch.path())
        .arg("all")
        .current_dir(root)
        .output()
        .unwrap_or_else(|e| panic!("python3 {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "tools/pinned-runtimes --headers: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let mut targets: Vec<(u32, u32)> = std::fs::read_dir(scratch.path())
        .unwrap()
        .map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            let (major, minor) = name.split_once('.').expect("MAJOR.MINOR");
            (major.parse().unwrap(), minor.parse().unwrap())
        })
        .collect();
    targets.sort();
    let mut drivers = Vec::new();
    for (major, minor) in targets {
        let ctk = format!("{major}.{minor}");
        let dest = scratch.path().join(&ctk);
        let text = std::fs::read_to_string(dest.join("cudaTypedefs.h")).unwrap();
        let rows = parse_typedefs(&text).unwrap_or_else(|e| panic!("{ctk}'s cudaTypedefs.h: {e}"));
        // What its cuda.h declares of a host node's parameters.
        let header = std::fs::read_to_string(dest.join("cuda.h")).unwrap();
        let declared =
            host_v2_declared_bytes(&header).unwrap_or_else(|e| panic!("{ctk}'s cuda.h: {e}"));
        std::fs::write(dir.join(format!("{ctk}.host.txt")), declared.to_string()).unwrap();
        let mut table = Table {
            driver: major * 1000 + minor * 10,
            rows,
        };
        // The headers' table, which the children expect; then the stub's, the same unless
        // wrong on purpose.
        std::fs::write(dir.join(format!("{ctk}.txt")), table_text(&table)).unwrap();
        if wrong_expectations() {
            // Every ABI of cuLaunchHostFunc one minor version later than its header says.
            table.rows = table
                .rows
                .into_iter()
                .map(|(n, v, k)| {
                    let v = if n == "cuLaunchHostFunc" { v + 10 } else { v };
                    (n, v, k)
                })
                .collect();
        }
        std::fs::write(dir.join(format!("{ctk}.stub.txt")), table_text(&table)).unwrap();
        drivers.push(ctk);
    }
    assert_eq!(drivers.len(), 15, "the pinned targets: {drivers:?}");
    drivers
}

/// How many bytes of `CUDA_HOST_NODE_PARAMS_v2` a `cuda.h` declares, from its struct's fields in
/// order (each at its alignment): `CUhostFn fn` and `void *userData` (8 each), `unsigned int
/// syncMode` (4), an anonymous `union { CUcontext ctx; ... }` (8). None before the struct
/// appears, 16 up to the 13.1 headers, 20 in 13.2 and 13.3, 32 from 13.4.
fn host_v2_declared_bytes(header: &str) -> Result<usize, String> {
    // Before 12.3 there is none: nothing of it is declared.
    let Some(start) = header.find("typedef struct CUDA_HOST_NODE_PARAMS_v2_st") else {
        return Ok(0);
    };
    let body = &header[start..];
    let open = body.find('{').ok_or("no body")?;
    let end = body.find("} CUDA_HOST_NODE_PARAMS_v2;").ok_or("no end")?;
    let mut fields = String::new();
    for line in body[open + 1..end].lines() {
        // Comments go; what is left is declarations.
        let line = line.split("//").next().unwrap_or_default();
        let line = match (line.find("/*"), line.find("*/")) {
            (Some(a), Some(b)) if b > a => format!("{}{}", &line[..a], &line[b + 2..]),
            _ => line.to_owned(),
        };
        fields.push_str(&line);
        fields.push(' ');
    }
    let (mut offset, mut depth, mut decl) = (0usize, 0, String::new());
    for c in fields.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ';' if depth == 0 => {
                let d = decl.split_whitespace().collect::<Vec<_>>().join(" ");
                let (size, align) =
                    if d.starts_with("union") || d.contains('*') || d.starts_with("CU") {
                        (8, 8)
                    } else if d.starts_with("unsigned int") || d.starts_with("int") {
                        (4, 4)
                    } else {
                        return Err(format!("a field of unknown size: {d}"));
                    };
                offset = offset.div_ceil(align) * align + size;
                decl.clear();
                continue;
            }
            _ => {}
        }
        if depth == 0 || c == '{' {
            decl.push(c);
        }
    }
    Ok(offset)
}

/// Runs this test again as a child simulating `driver` in `mode`; its summary lines, or why it
/// failed.
fn run_child(
    exe: &Path,
    tables: &Path,
    stub: &Path,
    driver: &str,
    mode: DefaultStream,
) -> Result<String, String> {
    // The test's name as the harness knows it: its module path without the crate's name.
    let name = format!(
        "{}::every_driver_version_answers_its_own_typedefs",
        module_path!().split_once("::").unwrap().1
    );
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", &name, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, driver)
        .env(TABLES_ENV, tables)
        .env("CUDA_HOSTCB_LIBCUDA", stub);
    match mode {
        DefaultStream::PerThread => cmd.env(PER_THREAD_ENV, "1"),
        DefaultStream::Legacy => cmd.env_remove(PER_THREAD_ENV),
    };
    let out = cmd
        .output()
        .map_err(|e| format!("running the child: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if out.status.success() && !stdout.contains("test result: ok. 1 passed;") {
        // Filtered away: a child that ran nothing proves nothing.
        Err(format!("the child ran no test named {name}:\n{stdout}"))
    } else if out.status.success() {
        // The harness's own `test ... ` may start the first line.
        Ok(stdout
            .lines()
            .filter_map(|l| l.split_once(MATRIX).map(|(_, line)| format!("{line}\n")))
            .collect())
    } else {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = stdout.lines().chain(stderr.lines()).collect();
        Err(format!(
            "{}\n{}",
            out.status,
            tail[tail.len().saturating_sub(30)..].join("\n")
        ))
    }
}

/// The stub's controls, from the library the loader opened.
struct Stub {
    _lib: libloading::Library,
    count: unsafe extern "C" fn(c_int) -> u64,
    last_query: unsafe extern "C" fn(*mut *const c_char, *mut c_int, *mut u64) -> c_int,
    last_proc: unsafe extern "C" fn(
        *mut *const c_char,
        *mut c_int,
        *mut c_int,
        *mut *const c_void,
    ) -> c_int,
    use_table: unsafe extern "C" fn(*const c_char, *mut c_int) -> c_int,
    last_host: unsafe extern "C" fn(*mut *const c_char, *mut *const u8) -> c_int,
    not_implemented: *const c_void,
}

impl Stub {
    fn open(path: &Path) -> Result<Stub, String> {
        // SAFETY: the stub's initialisers are trivial; its controls have these C types.
        unsafe {
            let lib = libloading::Library::new(path).map_err(|e| e.to_string())?;
            let count = *lib
                .get::<unsafe extern "C" fn(c_int) -> u64>(b"hostcb_stub_count\0")
                .map_err(|e| e.to_string())?;
            let last_query = *lib
                .get(b"hostcb_stub_last_query\0")
                .map_err(|e| e.to_string())?;
            let last_proc = *lib
                .get(b"hostcb_stub_last_proc\0")
                .map_err(|e| e.to_string())?;
            let generic: unsafe extern "C" fn(*mut c_int) -> *const c_void = *lib
                .get(b"hostcb_stub_not_implemented\0")
                .map_err(|e| e.to_string())?;
            let mut status = 0;
            let not_implemented = generic(&mut status);
            if status as u32 != STUB_NOT_IMPLEMENTED {
                return Err(format!("the generic function's status is {status:#x}"));
            }
            let use_table = *lib
                .get(b"hostcb_stub_use_table\0")
                .map_err(|e| e.to_string())?;
            let last_host = *lib
                .get(b"hostcb_stub_last_host_node\0")
                .map_err(|e| e.to_string())?;
            Ok(Stub {
                _lib: lib,
                count,
                last_query,
                last_proc,
                use_table,
                last_host,
                not_implemented,
            })
        }
    }

    fn use_table(&self, path: &Path) -> Result<(), String> {
        let c = CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        let mut line = 0;
        // SAFETY: the stub's control, with a NUL-terminated path.
        let rc = unsafe { (self.use_table)(c.as_ptr(), &mut line) };
        if rc == 0 {
            Ok(())
        } else {
            Err(format!("the stub refused {} (line {line})", path.display()))
        }
    }

    /// The last host node the stub was handed: its entry point and the bytes of its parameters
    /// (16 of a `CUDA_HOST_NODE_PARAMS`, or 32 of the `CUDA_HOST_NODE_PARAMS_v2` inside a
    /// `CUgraphNodeParams`).
    fn last_host_node(&self) -> (String, Vec<u8>) {
        let (mut entry, mut bytes) = (std::ptr::null(), std::ptr::null());
        // SAFETY: valid out-pointers; the stub's entry string and byte buffer live in the stub,
        // and `len` of them are written.
        unsafe {
            let len = (self.last_host)(&mut entry, &mut bytes);
            (
                CStr::from_ptr(entry).to_string_lossy().into_owned(),
                std::slice::from_raw_parts(bytes, usize::try_from(len).unwrap_or(0)).to_vec(),
            )
        }
    }

    /// The last `cuGetProcAddress` call: symbol, version, flags.
    fn query(&self) -> Option<(String, u32, u64)> {
        let (mut symbol, mut version, mut flags) = (std::ptr::null(), 0, 0);
        // SAFETY: valid out-pointers; the stub's symbol string lives in the stub.
        unsafe {
            ((self.last_query)(&mut symbol, &mut version, &mut flags) != 0).then(|| {
                (
                    CStr::from_ptr(symbol).to_string_lossy().into_owned(),
                    version as u32,
                    flags,
                )
            })
        }
    }

    /// The row the last answer came from, and the function it handed back.
    fn answer(&self) -> Option<(Row, *const c_void)> {
        let (mut name, mut version, mut kind, mut pfn) = (std::ptr::null(), 0, 0, std::ptr::null());
        // SAFETY: valid out-pointers; the row's name lives in the stub's table.
        unsafe {
            ((self.last_proc)(&mut name, &mut version, &mut kind, &mut pfn) != 0).then(|| {
                let kind = match kind {
                    1 => Kind::Ptsz,
                    2 => Kind::Ptds,
                    _ => Kind::Plain,
                };
                (
                    (
                        CStr::from_ptr(name).to_string_lossy().into_owned(),
                        version as u32,
                        kind,
                    ),
                    pfn,
                )
            })
        }
    }
}

/// What the driver's rule answers for `name` at `version` under `flags`: the row handed back,
/// or `None` (refused, unknown name, or no ABI old enough).
fn rule(table: &Table, name: &str, version: u32, flags: u64) -> Option<Row> {
    if version > table.driver {
        return None;
    }
    let per_thread = flags == PER_THREAD_STREAM;
    table
        .rows
        .iter()
        .filter(|(n, v, k)| n == name && *v <= version && (per_thread || *k == Kind::Plain))
        .max_by_key(|(_, v, k)| (*v, *k != Kind::Plain))
        .cloned()
}

/// The names `cuGetProcAddress` may take for a declaration: its own, and without its `_vN`.
fn bases(name: &str) -> Vec<&str> {
    let mut bases = vec![name];
    if let Some((base, n)) = name.rsplit_once("_v")
        && !n.is_empty()
        && n.bytes().all(|b| b.is_ascii_digit())
    {
        bases.push(base);
    }
    bases
}

#[derive(Default)]
struct Counts {
    resolved: usize,
    unavailable: usize,
    /// Refused before asking: the driver is older than the first header that declares the ABI.
    refused: Vec<String>,
}

/// Every pinned target's table (`<MAJOR.MINOR>.txt`), by CUDA version.
fn all_tables(dir: &Path) -> Result<BTreeMap<u32, Table>, String> {
    let mut tables = BTreeMap::new();
    for entry in std::fs::read_dir(dir).map_err(|e| e.to_string())? {
        let path = entry.map_err(|e| e.to_string())?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if name.ends_with(".txt") && !name.ends_with(".stub.txt") && !name.ends_with(".host.txt") {
            let table = read_table(&path)?;
            tables.insert(table.driver, table);
        }
    }
    Ok(tables)
}

/// The CUDA version of the first pinned header of `target`'s major, up to `target`, that
/// declares `row` (the conservative rule for the driver an ABI needs).
fn first_declared(tables: &BTreeMap<u32, Table>, target: u32, row: &Row) -> Option<u32> {
    tables
        .range(target / 1000 * 1000..=target)
        .find(|(_, t)| t.rows.contains(row))
        .map(|(v, _)| *v)
}

/// The child: simulates driver `driver` (a pinned target) for every committed target.
fn child(driver: &str) -> Result<(), String> {
    let dir = PathBuf::from(std::env::var_os(TABLES_ENV).ok_or("no tables folder")?);
    let table = read_table(&dir.join(format!("{driver}.txt")))?;
    let stub = Stub::open(&stub_path())?;
    stub.use_table(&dir.join(format!("{driver}.stub.txt")))?;
    let mode = default_stream();
    let found = cuda_hostcb::load::driver_version().map_err(|e| e.to_string())?;
    if found != table.driver {
        return Err(format!(
            "the stub says driver {found}, its table {}",
            table.driver
        ));
    }
    let mut problems = Vec::new();
    let mut lines = Vec::new();
    let mut generic_called = false;
    let tables = all_tables(&dir)?;
    for target in targets() {
        // The target's own header: the ABIs its entry points may ask for.
        let own = read_table(&dir.join(format!("{}.txt", target.version)))?;
        let mut counts = Counts::default();
        for entry in target.entries {
            let name = entry.name();
            let per_thread = entry.export(DefaultStream::PerThread);
            let has_variant = per_thread != entry.export(DefaultStream::Legacy);
            let (flags, kind) = match (mode, has_variant) {
                (DefaultStream::PerThread, true) => {
                    let kind = if per_thread.to_bytes().ends_with(b"_ptds") {
                        Kind::Ptds
                    } else {
                        Kind::Ptsz
                    };
                    (PER_THREAD_STREAM, kind)
                }
                _ => (LEGACY_STREAM, Kind::Plain),
            };
            // SAFETY: the stub's counter read.
            let before = unsafe { (stub.count)(COUNT_PROC_ADDRESS) };
            let got = entry.address();
            // SAFETY: as above.
            let calls = unsafe { (stub.count)(COUNT_PROC_ADDRESS) } - before;
            let mut fail = |why: String| problems.push(format!("{} {name}: {why}", target.name));
            if entry.api() != Api::Driver {
                fail("not a driver entry point".into());
                continue;
            }
            if calls == 0 {
                // Refused before asking: only below the first header (of the target's major)
                // that declares one of its ABIs with an older number.
                match &got {
                    Err(Error::Unavailable {
                        api: Api::Driver,
                        function,
                        needs,
                        found,
                        ..
                    }) if *function == name
                        && *found == Some(table.driver)
                        && *needs > table.driver =>
                    {
                        let justified = own.rows.iter().any(|row| {
                            bases(name).contains(&row.0.as_str())
                                && row.1 < *needs
                                && first_declared(&tables, own.driver, row) == Some(*needs)
                        });
                        if justified {
                            counts.unavailable += 1;
                            counts.refused.push(format!("{name} (needs {needs})"));
                        } else {
                            fail(format!(
                                "refused as needing {needs}, which no header's first declaration of its ABIs says"
                            ));
                        }
                    }
                    other => fail(format!("no cuGetProcAddress call, and {other:?}")),
                }
                continue;
            }
            if calls != 1 {
                fail(format!("{calls} cuGetProcAddress calls, not 1"));
                continue;
            }
            let Some((symbol, version, asked_flags)) = stub.query() else {
                fail("no cuGetProcAddress query recorded".into());
                continue;
            };
            if !bases(name).contains(&symbol.as_str()) || asked_flags != flags {
                fail(format!(
                    "asked for {symbol} with flags {asked_flags}; expected {:?} with {flags}",
                    bases(name)
                ));
                continue;
            }
            let wanted = (symbol.clone(), version, kind);
            if !own.rows.contains(&wanted) {
                fail(format!(
                    "asked for {symbol} {version}{}, which {}'s cudaTypedefs.h does not declare",
                    kind.suffix(),
                    target.version
                ));
                continue;
            }
            let expected = rule(&table, &symbol, version, flags);
            match (&got, expected) {
                (Ok(address), Some(row)) => {
                    let answer = stub.answer();
                    if answer.as_ref().map(|(r, _)| r) != Some(&row) {
                        fail(format!("answered {answer:?}, the rule says {row:?}"));
                    } else if answer.as_ref().is_some_and(|(_, pfn)| pfn != address) {
                        fail(format!(
                            "resolved to {address:?}, the stub handed {answer:?}"
                        ));
                    } else if row == wanted {
                        counts.resolved += 1;
                        if *address == stub.not_implemented && !generic_called {
                            // The generic function is a function: it counts its call.
                            // SAFETY: the address is the stub's `not_implemented`, of C type
                            // `CUresult (void)`; the counter reads are the stub's.
                            let (n, status, m) = unsafe {
                                let f: unsafe extern "C" fn() -> u32 =
                                    std::mem::transmute(*address);
                                let n = (stub.count)(COUNT_NOT_IMPLEMENTED);
                                let status = f();
                                (n, status, (stub.count)(COUNT_NOT_IMPLEMENTED))
                            };
                            if status != STUB_NOT_IMPLEMENTED || m != n + 1 {
                                fail(format!(
                                    "the generic function gave {status:#x}, counted {}",
                                    m - n
                                ));
                            }
                            generic_called = true;
                        }
                    } else {
                        // The rule's other outcome: an older ABI (another signature) for a
                        // version D's header skipped. The entry point must have been refused
                        // before asking (its first declaring header is newer than D).
                        fail(format!(
                            "asked {symbol} {version}{} and got {} {}{}: an older ABI, which the entry point should have refused",
                            kind.suffix(),
                            row.0,
                            row.1,
                            row.2.suffix()
                        ));
                    }
                }
                (
                    Err(Error::Unavailable {
                        api: Api::Driver,
                        function,
                        needs,
                        found,
                        ..
                    }),
                    None,
                ) if *function == name && *needs == version && *found == Some(table.driver) => {
                    if table.rows.contains(&wanted) && version <= table.driver {
                        fail("unavailable, though the driver's header declares it".into());
                    }
                    counts.unavailable += 1;
                }
                (got, expected) => fail(format!(
                    "asked {symbol} {version}{}: got {got:?}, expected {}",
                    kind.suffix(),
                    match expected {
                        Some(row) => format!("{row:?}"),
                        None => format!(
                            "Unavailable {{ needs: {version}, found: Some({}) }}",
                            table.driver
                        ),
                    }
                )),
            }
        }
        lines.push(format!(
            "driver {driver} {mode:<10} target {}: {} entry points, {} resolved, {} unavailable, {} of them refused below the first header that declares their ABI{}",
            target.version,
            target.entries.len(),
            counts.resolved,
            counts.unavailable,
            counts.refused.len(),
            if counts.refused.is_empty() {
                String::new()
            } else {
                format!(" ({})", counts.refused.join(", "))
            }
        ));
    }
    let v2 = ("cuLaunchHostFunc".to_owned(), 13010, Kind::Plain);
    let newest = tables.keys().copied().max().unwrap_or_default();
    let sync_from =
        first_declared(&tables, newest, &v2).ok_or("no header declares cuLaunchHostFunc 13010")?;
    let declared = std::fs::read_to_string(dir.join(format!("{driver}.host.txt")))
        .map_err(|e| e.to_string())?
        .trim()
        .parse()
        .map_err(|e| format!("{driver}.host.txt: {e}"))?;
    let safe = safe_checks(table.driver, sync_from, &stub, declared).unwrap_or_else(|e| {
        problems.push(format!("safe layer: {e}"));
        "failed".to_owned()
    });
    lines.push(format!("driver {driver} {mode:<10} safe layer: {safe}"));
    for line in &lines {
        println!("{MATRIX}{line}");
    }
    if problems.is_empty() {
        Ok(())
    } else {
        let n = problems.len();
        problems.truncate(20);
        Err(format!("{n} problem(s), e.g.:\n{}", problems.join("\n")))
    }
}

#[test]
fn the_typedef_reader_renames_bare_typedefs_and_reads_twins() {
    let text = "#define PFN_cuA PFN_cuA_v12040\n\
                #define PFN_cuB __API_TYPEDEF_PTSZ(PFN_cuB, 12060, 12070)\n\
                typedef CUresult (CUDAAPI *PFN_cuA)(int x);\n\
                typedef CUresult (CUDAAPI *PFN_cuB)(int x);\n\
                typedef CUresult(CUDAAPI *PFN_cuC_v2_v3020_ptds)(int x);\n\
                    typedef CUresult (CUDAAPI *PFN_cuD_v7000_ptsz)(void);\n";
    let rows = parse_typedefs(text).unwrap();
    let want: BTreeSet<Row> = [
        ("cuA".to_owned(), 12040, Kind::Plain),
        ("cuB".to_owned(), 12060, Kind::Plain),
        ("cuC_v2".to_owned(), 3020, Kind::Ptds),
        ("cuD".to_owned(), 7000, Kind::Ptsz),
    ]
    .into_iter()
    .collect();
    assert_eq!(rows, want);
    assert!(parse_typedefs("typedef CUresult (CUDAAPI *PFN_cuE)(void);").is_err());
}
