//! The test executable `gpu` (the workspace's one harness, [`hostcb_gate::trials`]): every
//! scenario for every target × API as a trial named `<target>::<api>::<scenario>`, and every
//! target's entry points in both default-stream modes ([`entries`]) as trials named
//! `<target>::entries::<mode>`, each run, visibly skipped, or failed according to the probe, and
//! the skip counts printed before the run.

use std::process::ExitCode;

use hostcb_gate::trials::{self, Completion, Failed, GpuTrial};

use crate::binding::{Binding, HostFuncV2};
use crate::check::{Failure, Ran};
use crate::entries;
use crate::probe::{Gate, Probe};
use crate::resources::take_cleanup_errors;
use crate::scenarios::{
    canary, devices, host_func_v2, host_nodes, kernels, ordering, replay, stream_callbacks,
    user_data, user_objects,
};

/// A scenario's trial body.
pub type Body = fn() -> Result<Ran, Failure>;

/// One scenario, as registered for one binding.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    /// The last part of the trial name, e.g. `replay_five`.
    pub name: &'static str,
    /// Devices it needs; with fewer it is skipped (even with `REQUIRE_GPU=1`).
    pub min_devices: usize,
    /// The body.
    pub body: Body,
}

const fn scenario(name: &'static str, body: Body) -> Scenario {
    Scenario {
        name,
        min_devices: 1,
        body,
    }
}

/// The scenarios every binding runs.
pub fn common<B: Binding>() -> Vec<Scenario> {
    vec![
        scenario("replay_five", replay::five::<B>),
        scenario("replay_ten_thousand", replay::ten_thousand::<B>),
        scenario("stream_callbacks", stream_callbacks::run::<B>),
        scenario("host_node_params", host_nodes::run::<B>),
        scenario("user_object_lifetime", user_objects::run::<B>),
        scenario("user_data_identity", user_data::run::<B>),
        Scenario {
            min_devices: 2,
            ..scenario("several_devices", devices::run::<B>)
        },
        scenario("order_copy_visible", ordering::copy_visible::<B>),
        scenario("order_later_work_waits", ordering::later_work_waits::<B>),
        scenario("canary_replay_wrong_binding", canary::run::<B>),
        scenario("kernel_stream_then_host_fn", kernels::stream::<B>),
        scenario("kernel_node_then_host_node", kernels::node::<B>),
    ]
}

/// The scenarios of a binding that declares the `_v2` launch.
pub fn with_v2<B: HostFuncV2>() -> Vec<Scenario> {
    let mut all = common::<B>();
    all.push(scenario("host_func_v2", host_func_v2::run::<B>));
    all
}

/// A trial before it is handed to libtest-mimic.
#[derive(Debug, Clone)]
pub struct Planned {
    /// `<target>::<api>::<scenario>`.
    pub name: String,
    /// Whether it runs.
    pub gate: Gate,
    /// What it runs.
    pub body: Body,
}

fn plan_binding<B: Binding>(probe: &Probe, scenarios: Vec<Scenario>, out: &mut Vec<Planned>) {
    let gate = probe.gate(B::API);
    for s in scenarios {
        let gate = match (&gate, devices::skip_reason(probe.devices())) {
            (Gate::Run, Some(reason)) if s.min_devices > 1 => Gate::Skip(reason),
            _ => gate.clone(),
        };
        out.push(Planned {
            name: format!("{}::{}", B::name(), s.name),
            gate,
            body: s.body,
        });
    }
}

/// The scenarios of a binding `$binding` of a target with `[$capabilities]`.
#[macro_export]
macro_rules! scenarios_of {
    ($binding:ty, []) => {
        $crate::harness::common::<$binding>()
    };
    ($binding:ty, [host_func_v2 $($rest:ident)*]) => {
        $crate::harness::with_v2::<$binding>()
    };
    ($binding:ty, [$other:ident $($rest:ident)*]) => {
        $crate::scenarios_of!($binding, [$($rest)*])
    };
}

/// Every trial, in a fixed order: by target (`cuda_hostcb::for_each_target!`), then API, then
/// scenario.
pub fn plan(probe: &Probe) -> Vec<Planned> {
    let mut out = Vec::new();
    macro_rules! plan_target {
        ($target:ident, $version:literal, $major:literal, [$($capability:ident)*]) => {{
            use crate::bindings::$target::{Driver, Runtime};
            plan_binding::<Driver>(probe, scenarios_of!(Driver, [$($capability)*]), &mut out);
            plan_binding::<Runtime>(probe, scenarios_of!(Runtime, [$($capability)*]), &mut out);
        }};
    }
    cuda_hostcb::for_each_target!(plan_target);
    out
}

/// One line per reason: `SKIP: <n> GPU tests: <reason>`, `FAIL: <n> GPU tests: <reason>`
/// ([`trials::summary`]).
pub fn summary<'a>(planned: impl IntoIterator<Item = &'a Planned>) -> Vec<String> {
    trials::summary(planned.into_iter().map(|p| &p.gate))
}

/// Runs a body, turning its outcome and any failed clean-up into the trial's.
fn execute(body: Body) -> Result<Completion, Failed> {
    let _ = take_cleanup_errors();
    let outcome = body();
    let cleanup = take_cleanup_errors();
    let cleanup_note = if cleanup.is_empty() {
        String::new()
    } else {
        format!("clean-up failed: {}", cleanup.join("; "))
    };
    match outcome {
        // A function the installed library is too old for, reported so by the crate: one
        // visible skip line naming the version it needs, not a failure.
        Err(failure) if cleanup.is_empty() => match failure.older_library() {
            Some(skip) => Ok(Completion::ignored_with(skip)),
            None => Err(failure.into()),
        },
        Err(failure) => Err(format!("{failure}; {cleanup_note}").into()),
        Ok(_) if !cleanup.is_empty() => Err(cleanup_note.into()),
        Ok(Ran::Passed) => Ok(Completion::Completed),
        Ok(Ran::Skipped(reason)) => Ok(Completion::ignored_with(reason)),
    }
}

fn trial(p: Planned) -> GpuTrial {
    let Planned { name, gate, body } = p;
    trials::trial(name, gate, move || execute(body))
}

/// The executable's `main`: a child of an entries trial checks its target and exits; else
/// probe, print what was found and what will be skipped, and run every scenario and entries
/// trial ([`trials::run`]: one at a time unless `--test-threads` says otherwise, as they share
/// the GPU, time host functions and wait for destructors).
pub fn main() -> ExitCode {
    if let Ok(target) = std::env::var(entries::CHILD_ENV) {
        return entries::child(&target);
    }
    let probe = Probe::run();
    let mut all: Vec<GpuTrial> = plan(&probe).into_iter().map(trial).collect();
    all.extend(entries::trials(&probe));
    trials::run(probe.lines(), all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::{Gpu, Unusable};

    fn probe(require_gpu: bool, devices: Option<usize>) -> Probe {
        Probe {
            require_gpu,
            gpu: devices
                .map(|devices| Gpu {
                    devices,
                    driver_version: Some(13000),
                })
                .ok_or(Unusable {
                    short: "no CUDA driver".to_owned(),
                    detail: "could not load libcuda.so.1".to_owned(),
                }),
            runtimes: vec![(12, Ok(12090)), (13, Ok(13000))],
        }
    }

    /// Every enabled target (`cuda_hostcb::for_each_target!`), with whether it offers
    /// `host_func_v2`: the expected counts follow the target list, not a number written here.
    fn targets() -> Vec<(&'static str, bool)> {
        let mut targets = Vec::new();
        macro_rules! target {
            ($target:ident, $version:literal, $major:literal, [$($capability:ident)*]) => {
                targets.push((
                    stringify!($target),
                    [$(stringify!($capability)),*].contains(&"host_func_v2"),
                ))
            };
        }
        cuda_hostcb::for_each_target!(target);
        targets
    }

    /// Trials per binding (target and API) that every target has, and that `host_func_v2` adds.
    const COMMON_TRIALS: usize = 12;

    fn expected_trials() -> usize {
        targets()
            .iter()
            .map(|&(_, v2)| 2 * (COMMON_TRIALS + usize::from(v2)))
            .sum()
    }

    #[test]
    fn every_scenario_is_planned_for_every_target_and_api() {
        let planned = plan(&probe(false, Some(2)));
        assert!(!targets().is_empty(), "the tests are built with no target");
        assert_eq!(planned.len(), expected_trials());
        let names: Vec<&str> = planned.iter().map(|p| p.name.as_str()).collect();
        for (target, v2) in targets() {
            for api in ["driver", "runtime"] {
                for scenario in [
                    "replay_five",
                    "canary_replay_wrong_binding",
                    "several_devices",
                ] {
                    let name = format!("{target}::{api}::{scenario}");
                    assert!(names.contains(&name.as_str()), "{name} missing");
                }
                let name = format!("{target}::{api}::host_func_v2");
                assert_eq!(names.contains(&name.as_str()), v2, "{name}");
            }
        }
        assert!(planned.iter().all(|p| p.gate == Gate::Run));
    }

    #[test]
    fn without_a_gpu_everything_is_skipped_and_counted() {
        let n = expected_trials();
        let planned = plan(&probe(false, None));
        assert_eq!(
            summary(&planned),
            vec![format!("SKIP: {n} GPU tests: no CUDA driver")]
        );
        let planned = plan(&probe(true, None));
        assert_eq!(
            summary(&planned),
            vec![format!(
                "FAIL: {n} GPU tests: REQUIRE_GPU=1, and no usable GPU: could not load libcuda.so.1"
            )]
        );
    }

    #[test]
    fn on_one_gpu_only_the_several_device_trials_are_skipped_even_with_require_gpu() {
        let planned = plan(&probe(true, Some(1)));
        assert_eq!(
            summary(&planned),
            vec![format!(
                "SKIP: {} GPU tests: needs 2 or more CUDA devices, 1 visible: run it on a \
                 multi-GPU machine",
                2 * targets().len()
            )]
        );
    }

    #[test]
    fn a_failed_cleanup_fails_a_passing_body() {
        fn passes() -> Result<Ran, Failure> {
            crate::resources::note_cleanup_failure(&Failure::Harness("left something behind"));
            Ok(Ran::Passed)
        }
        let Err(e) = execute(passes) else {
            panic!("a failed clean-up passed");
        };
        assert_eq!(
            e.message(),
            Some("clean-up failed: test harness misuse: left something behind")
        );
    }
}
