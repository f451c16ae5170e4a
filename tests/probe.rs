//! Whether the GPU trials can run here: the driver is probed once (`cuInit(0)` and
//! `cuDeviceGetCount` through the 13.0 driver module) and each runtime is loaded once; from
//! that, each trial runs, is skipped with a reason, or, with `REQUIRE_GPU=1`, fails.

use cuda_hostcb::Error;

use crate::binding::Api;

/// The environment variable that turns every skip for want of a GPU or runtime into a failure.
pub const REQUIRE_GPU_ENV: &str = "REQUIRE_GPU";

/// The runtime majors the targets use: 12 (12.9) and 13 (13.0, 13.5).
pub const RUNTIME_MAJORS: [u32; 2] = [12, 13];

/// A usable GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gpu {
    /// Devices `cuDeviceGetCount` reports.
    pub devices: usize,
    /// The driver's version, if it could be read.
    pub driver_version: Option<u32>,
}

/// Why no GPU is usable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unusable {
    /// A few words, for each skipped trial's line.
    pub short: String,
    /// The whole error, for the summary line and for failures.
    pub detail: String,
}

/// What a trial does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// Run it.
    Run,
    /// Skip it, for this reason.
    Skip(String),
    /// Fail it at once, for this reason (`REQUIRE_GPU=1`).
    Fail(String),
}

/// The outcome of probing this machine.
#[derive(Debug, Clone)]
pub struct Probe {
    /// Whether `REQUIRE_GPU=1`.
    pub require_gpu: bool,
    /// The GPU, or why there is none.
    pub gpu: Result<Gpu, Unusable>,
    /// For each runtime major, its version or why it cannot be loaded.
    pub runtimes: Vec<(u32, Result<u32, Error>)>,
}

impl Probe {
    /// Probes the driver and the runtimes, reading `REQUIRE_GPU` from the environment.
    pub fn run() -> Self {
        Self {
            require_gpu: std::env::var_os(REQUIRE_GPU_ENV).is_some_and(|v| v == "1"),
            gpu: probe_gpu(),
            runtimes: RUNTIME_MAJORS
                .iter()
                .map(|&major| (major, cuda_hostcb::load::runtime_version(major)))
                .collect(),
        }
    }

    /// What a trial of `api` does.
    pub fn gate(&self, api: Api) -> Gate {
        if let Err(u) = &self.gpu {
            return if self.require_gpu {
                Gate::Fail(format!("REQUIRE_GPU=1, and no usable GPU: {}", u.detail))
            } else {
                Gate::Skip(u.short.clone())
            };
        }
        if let Api::Runtime { major } = api
            && let Some((_, Err(e))) = self.runtimes.iter().find(|(m, _)| *m == major)
        {
            return if self.require_gpu {
                Gate::Fail(format!(
                    "REQUIRE_GPU=1, and the CUDA {major} runtime cannot be loaded: {e}"
                ))
            } else {
                Gate::Skip(format!(
                    "no CUDA {major} runtime (libcudart.so.{major} cannot be loaded)"
                ))
            };
        }
        Gate::Run
    }

    /// Devices seen, 0 without a usable GPU.
    pub fn devices(&self) -> usize {
        self.gpu.as_ref().map_or(0, |g| g.devices)
    }

    /// What was found, one line each, for the top of the output (the runtimes only when a GPU
    /// is usable: without one they do not matter).
    pub fn lines(&self) -> Vec<String> {
        let mut lines = vec![match &self.gpu {
            Ok(gpu) => format!(
                "hostcb-tests: driver {}, {} CUDA device(s)",
                gpu.driver_version
                    .map_or_else(|| "of unknown version".to_owned(), version),
                gpu.devices
            ),
            Err(u) => format!("hostcb-tests: no usable GPU: {}", u.detail),
        }];
        let runtimes = if self.gpu.is_ok() {
            self.runtimes.as_slice()
        } else {
            &[]
        };
        for (major, found) in runtimes {
            lines.push(match found {
                Ok(v) => format!("hostcb-tests: CUDA {major} runtime {}", version(*v)),
                Err(e) => format!("hostcb-tests: CUDA {major} runtime not loadable: {e}"),
            });
        }
        lines
    }
}

/// `13000` as `13.0 (13000)`.
fn version(v: u32) -> String {
    format!("{}.{} ({v})", v / 1000, v % 1000 / 10)
}

/// `cuInit(0)` and `cuDeviceGetCount` through the 13.0 driver module.
fn probe_gpu() -> Result<Gpu, Unusable> {
    use cuda_hostcb::ctk_13_0::driver as cu;

    // SAFETY: a plain call.
    unsafe { cu::cuInit(0) }.map_err(|e| unusable(&e, "cuInit(0)"))?;
    let mut count = 0;
    // SAFETY: `count` is valid for writes.
    unsafe { cu::cuDeviceGetCount(&mut count) }.map_err(|e| unusable(&e, "cuDeviceGetCount"))?;
    let devices = usize::try_from(count).unwrap_or(0);
    if devices == 0 {
        return Err(Unusable {
            short: "no CUDA device (cuDeviceGetCount = 0)".to_owned(),
            detail: format!("cuDeviceGetCount reports {count} devices"),
        });
    }
    Ok(Gpu {
        devices,
        driver_version: cuda_hostcb::load::driver_version().ok(),
    })
}

/// `CUDA_ERROR_NO_DEVICE`.
const NO_DEVICE: u32 = 100;

fn unusable(e: &Error, call: &str) -> Unusable {
    let short = match e {
        Error::LibraryNotFound { library, .. } => format!("no CUDA driver ({library} not found)"),
        Error::Cuda {
            code: NO_DEVICE, ..
        } => format!("no CUDA device ({call}: {})", e.name().unwrap_or_default()),
        Error::Cuda { .. } => format!("{call} failed with {}", e.name().unwrap_or_default()),
        _ => format!("{call} failed"),
    };
    Unusable {
        short,
        detail: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(require_gpu: bool, gpu: Result<Gpu, Unusable>, rt12: Result<u32, Error>) -> Probe {
        Probe {
            require_gpu,
            gpu,
            runtimes: vec![(12, rt12), (13, Ok(13000))],
        }
    }

    fn no_gpu() -> Result<Gpu, Unusable> {
        Err(Unusable {
            short: "no CUDA driver (libcuda.so.1 not found)".to_owned(),
            detail: "could not load libcuda.so.1; ...".to_owned(),
        })
    }

    fn gpu() -> Result<Gpu, Unusable> {
        Ok(Gpu {
            devices: 1,
            driver_version: Some(13000),
        })
    }

    fn missing_runtime() -> Result<u32, Error> {
        Err(Error::LibraryNotFound {
            library: "libcudart.so.12",
            searched: Vec::leak(vec!["libcudart.so.12: not found".to_owned()]),
        })
    }

    #[test]
    fn without_a_gpu_trials_skip_or_with_require_gpu_fail() {
        let p = probe(false, no_gpu(), Ok(12090));
        assert_eq!(
            p.gate(Api::Driver),
            Gate::Skip("no CUDA driver (libcuda.so.1 not found)".to_owned())
        );
        let p = probe(true, no_gpu(), Ok(12090));
        assert_eq!(
            p.gate(Api::Runtime { major: 13 }),
            Gate::Fail("REQUIRE_GPU=1, and no usable GPU: could not load libcuda.so.1; ...".into())
        );
    }

    #[test]
    fn a_missing_runtime_skips_only_its_trials_or_fails_them_with_require_gpu() {
        let p = probe(false, gpu(), missing_runtime());
        assert_eq!(p.gate(Api::Driver), Gate::Run);
        assert_eq!(p.gate(Api::Runtime { major: 13 }), Gate::Run);
        assert_eq!(
            p.gate(Api::Runtime { major: 12 }),
            Gate::Skip("no CUDA 12 runtime (libcudart.so.12 cannot be loaded)".to_owned())
        );
        let p = probe(true, gpu(), missing_runtime());
        let Gate::Fail(reason) = p.gate(Api::Runtime { major: 12 }) else {
            panic!("expected a failure");
        };
        assert!(
            reason.starts_with(
                "REQUIRE_GPU=1, and the CUDA 12 runtime cannot be loaded: could not load \
                 libcudart.so.12"
            ),
            "{reason}"
        );
    }

    #[test]
    fn the_summary_names_versions_and_devices() {
        let p = probe(false, gpu(), Ok(12090));
        assert_eq!(
            p.lines(),
            vec![
                "hostcb-tests: driver 13.0 (13000), 1 CUDA device(s)",
                "hostcb-tests: CUDA 12 runtime 12.9 (12090)",
                "hostcb-tests: CUDA 13 runtime 13.0 (13000)",
            ]
        );
    }
}
