//! Whether the GPU trials can run here: the driver is probed once ([`hostcb_gate::probe_gpu`])
//! and each runtime is loaded once; from that, each trial runs, is skipped with a reason, or,
//! with `REQUIRE_GPU=1`, fails ([`hostcb_gate::gate`]).

use cuda_hostcb::Error;
pub use hostcb_gate::{Gate, Gpu, REQUIRE_GPU_ENV, Unusable};

use crate::binding::Api;

/// The runtime majors the listed targets use (`cuda_hostcb::for_each_target!`), each once.
pub fn runtime_majors() -> Vec<u32> {
    let mut majors = Vec::new();
    macro_rules! major {
        ($target:ident, $version:literal, $major:literal, [$($capability:ident)*]) => {
            majors.push($major);
        };
    }
    cuda_hostcb::for_each_target!(major);
    majors.sort_unstable();
    majors.dedup();
    majors
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
    /// Probes the driver (through [`hostcb_gate::probe_gpu`]) and the runtimes, with
    /// [`hostcb_gate::require_gpu`].
    pub fn run() -> Self {
        Self {
            require_gpu: hostcb_gate::require_gpu(),
            gpu: hostcb_gate::probe_gpu(),
            runtimes: runtime_majors()
                .into_iter()
                .map(|major| (major, cuda_hostcb::load::runtime_version(major)))
                .collect(),
        }
    }

    /// What a trial of `api` does ([`hostcb_gate::gate`]: a skip names the short reason, a
    /// failure the whole error).
    pub fn gate(&self, api: Api) -> Gate {
        let missing = match (&self.gpu, api) {
            (Err(u), _) => Some((u.short.clone(), format!("no usable GPU: {}", u.detail))),
            (Ok(_), Api::Runtime { major }) => {
                match self.runtimes.iter().find(|(m, _)| *m == major) {
                    Some((_, Err(e))) => Some((
                        format!("no CUDA {major} runtime (libcudart.so.{major} cannot be loaded)"),
                        format!("the CUDA {major} runtime cannot be loaded: {e}"),
                    )),
                    _ => None,
                }
            }
            (Ok(_), Api::Driver) => None,
        };
        match missing {
            None => Gate::Run,
            Some((short, _)) if !self.require_gpu => Gate::Skip(short),
            Some((_, detail)) => hostcb_gate::gate(Err(detail), true),
        }
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
