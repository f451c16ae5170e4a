//! Whether the benchmark runs here: the GPU probe, the rule that turns "no GPU" into a visible
//! skip (or, with `REQUIRE_GPU=1`, a failure), and the executable's command line.

use std::ffi::{CStr, c_char};

/// The probe uses the newest target's driver bindings, whichever the list makes newest.
macro_rules! newest {
    ($target:ident, $version:literal, $major:literal, [$($capability:ident)*]) => {
        use cuda_hostcb::$target::driver as d;
    };
}
cuda_hostcb::newest_target!(newest);

use crate::{BenchError, Sizes};

/// The device the figures run on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// Its ordinal.
    pub ordinal: i32,
    /// Its name, e.g. `NVIDIA H200`.
    pub name: String,
    /// `cuDriverGetVersion`, e.g. 13000.
    pub driver_version: i32,
    /// How many devices the driver reports.
    pub count: i32,
}

/// Asks the driver for device `ordinal`; the error is a one-line reason for the skip.
pub fn probe(ordinal: i32) -> Result<Device, String> {
    let mut count = 0;
    let mut driver_version = 0;
    let mut name = [0 as c_char; 256];
    // SAFETY: out-pointers to locals; `name` is as long as the length passed.
    unsafe {
        d::cuInit(0).map_err(|e| format!("no usable CUDA driver: {e}"))?;
        d::cuDriverGetVersion(&mut driver_version).map_err(|e| e.to_string())?;
        d::cuDeviceGetCount(&mut count).map_err(|e| e.to_string())?;
        if count == 0 {
            return Err("the CUDA driver reports no device".to_owned());
        }
        if ordinal < 0 || ordinal >= count {
            return Err(format!(
                "device {ordinal} asked for, but the driver reports {count} device(s) (0..{})",
                count - 1
            ));
        }
        let mut dev: d::CUdevice = 0;
        d::cuDeviceGet(&mut dev, ordinal).map_err(|e| e.to_string())?;
        d::cuDeviceGetName(name.as_mut_ptr(), name.len() as i32, dev).map_err(|e| e.to_string())?;
    }
    // SAFETY: the driver wrote a NUL-terminated string into `name`; the last byte stays 0.
    let name = unsafe { CStr::from_ptr(name.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    Ok(Device {
        ordinal,
        name,
        driver_version,
        count,
    })
}

/// What to do after the probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// Measure on this device.
    Run(Device),
    /// No usable GPU: say why and exit 0.
    Skip(String),
    /// No usable GPU although `REQUIRE_GPU=1`: say why and exit non-zero.
    Fail(String),
}

/// Decides from the probe's outcome and whether a GPU is required.
pub fn gate(probe: Result<Device, String>, require_gpu: bool) -> Gate {
    match probe {
        Ok(device) => Gate::Run(device),
        Err(reason) if require_gpu => Gate::Fail(reason),
        Err(reason) => Gate::Skip(reason),
    }
}

/// Whether the environment requires a GPU: the workspace's one switch, [`hostcb_gate::require_gpu`]
/// (`REQUIRE_GPU=1`, `true` or `yes`).
pub fn require_gpu() -> bool {
    hostcb_gate::require_gpu()
}

/// The usage text of the benchmark executable.
pub const USAGE: &str = "\
usage: hostcb-<hash> [--reps R] [--n N] [--device D] [FILTER...]
  --reps R    timed repetitions per figure, after one warm-up (default 5)
  --n N       B1's host functions per repetition; B2 launches N/10, B3 N/10/64+1 (default 100000)
  --device D  device ordinal (default 0)
  FILTER      run only the rows whose \"<target> <api>\" contains one of them (e.g. ctk_13_0, runtime, safe)
Without a usable GPU it prints SKIP and exits 0, or exits 1 when REQUIRE_GPU=1.";

/// The parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Args {
    /// Work per figure.
    pub sizes: Sizes,
    /// The device ordinal.
    pub device: i32,
    /// Row filters; empty selects every row.
    pub filters: Vec<String>,
    /// Options this executable does not know (e.g. a test harness's), ignored.
    pub ignored: Vec<String>,
    /// `--help` was given.
    pub help: bool,
}

impl Args {
    /// Whether the row `<target> <api>` is selected.
    pub fn selects(&self, target: &str, api: &str) -> bool {
        let label = format!("{target} {api}");
        self.filters.is_empty() || self.filters.iter().any(|f| label.contains(f.as_str()))
    }
}

fn number<T: std::str::FromStr>(flag: &str, value: Option<String>) -> Result<T, BenchError> {
    let value = value.ok_or_else(|| BenchError::Usage(format!("{flag} needs a value\n{USAGE}")))?;
    value
        .parse()
        .map_err(|_| BenchError::Usage(format!("{flag} {value}: not a number\n{USAGE}")))
}

/// Parses the arguments after the program name. `--bench` (which `cargo bench` passes) and other
/// unknown `-` options are collected in [`Args::ignored`].
pub fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Args, BenchError> {
    let mut out = Args {
        sizes: Sizes::default(),
        device: 0,
        filters: Vec::new(),
        ignored: Vec::new(),
        help: false,
    };
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_owned(), Some(v.to_owned())),
            _ => (arg.clone(), None),
        };
        let mut value = || inline.clone().or_else(|| args.next());
        match flag.as_str() {
            "--reps" => out.sizes.reps = number("--reps", value())?,
            "--n" => out.sizes.n = number("--n", value())?,
            "--device" => out.device = number("--device", value())?,
            "-h" | "--help" => out.help = true,
            "--bench" => {}
            _ if flag.starts_with('-') => out.ignored.push(arg),
            _ => out.filters.push(arg),
        }
    }
    if out.sizes.reps == 0 {
        return Err(BenchError::Usage(format!(
            "--reps 0 leaves nothing to measure; pass 1 or more\n{USAGE}"
        )));
    }
    if out.sizes.n < 10 {
        return Err(BenchError::Usage(format!(
            "--n {} is too small: B2 launches N/10 graphs, so N must be at least 10\n{USAGE}",
            out.sizes.n
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, BenchError> {
        parse_args(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn skip_unless_required() {
        let reason = "no usable CUDA driver: could not load libcuda.so.1".to_owned();
        assert_eq!(gate(Err(reason.clone()), false), Gate::Skip(reason.clone()));
        assert_eq!(gate(Err(reason.clone()), true), Gate::Fail(reason));
        let dev = Device {
            ordinal: 0,
            name: "GPU".into(),
            driver_version: 13000,
            count: 2,
        };
        assert_eq!(gate(Ok(dev.clone()), true), Gate::Run(dev));
    }

    #[test]
    fn arguments() {
        let a = parse(&["--bench"]).unwrap();
        assert_eq!(a.sizes, Sizes::default());
        assert!(a.ignored.is_empty() && a.filters.is_empty());
        let a = parse(&[
            "--reps",
            "3",
            "--n=1000",
            "--device",
            "1",
            "ctk_13_0",
            "--nocapture",
        ])
        .unwrap();
        assert_eq!((a.sizes.reps, a.sizes.n, a.device), (3, 1000, 1));
        assert_eq!(a.filters, vec!["ctk_13_0"]);
        assert_eq!(a.ignored, vec!["--nocapture"]);
        assert!(a.selects("ctk_13_0", "runtime"));
        assert!(!a.selects("ctk_12_9", "runtime"));
        assert!(parse(&["--reps", "0"]).is_err());
        assert!(parse(&["--n", "9"]).is_err());
        assert!(parse(&["--reps"]).is_err());
        assert!(parse(&["--n", "many"]).is_err());
        assert!(parse(&["-h"]).unwrap().help);
    }

    #[test]
    fn probe_without_a_device_gives_a_reason() {
        // On a machine with a GPU this finds it; without one the reason must be one readable line.
        match probe(0) {
            Ok(d) => assert!(d.count > 0 && !d.name.is_empty()),
            Err(reason) => assert!(!reason.is_empty() && !reason.contains('\n'), "{reason}"),
        }
        assert!(probe(-1).is_err());
    }
}
