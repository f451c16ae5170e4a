//! `diff` on the real, pinned headers: facts of the CUDA 12.9 → 13.5 changes that the headers
//! themselves show, each checked as the line `cargo xtask diff 12.9 13.5` prints.

use hostcb_generator::Ctk;
use hostcb_generator::diff::{self, Change, Section};
use hostcb_generator::model::{Api, Summary};
use hostcb_generator::pipeline::{self, Options};

fn model(ctk: Ctk) -> hostcb_generator::model::Model {
    pipeline::read_model(&crate::config(), ctk, &Options::default()).expect("read the model")
}

/// The printed lines of the differences of `api` in `section`.
fn lines(d: &diff::ModelDiff, api: Api, section: Section) -> Vec<String> {
    d.differences
        .iter()
        .filter(|x| x.api == api && x.section == section)
        .map(ToString::to_string)
        .collect()
}

fn has(d: &diff::ModelDiff, api: Api, section: Section, line: &str) {
    let got = lines(d, api, section);
    assert!(
        got.iter().any(|l| l == line),
        "{line:?} is not among the {api:?} {section:?} lines:\n{}",
        got.join("\n")
    );
}

#[test]
fn twelve_nine_to_thirteen_five() {
    let (old, new) = (model(Ctk::V12_9), model(Ctk::V13_5));
    let d = diff::diff(&old, &new);
    use Api::{Driver, Runtime};
    has(
        &d,
        Driver,
        Section::TypesChanged,
        "~ CUDA_HOST_NODE_PARAMS_v2: size 16 -> 32 bytes",
    );
    has(
        &d,
        Driver,
        Section::TypesChanged,
        "~ CUDA_HOST_NODE_PARAMS_v2_st: field syncMode: c_uint added",
    );
    has(
        &d,
        Driver,
        Section::FunctionsAdded,
        "+ cuLaunchHostFunc_v2: ABI version 13010, per-thread cuLaunchHostFunc_v2_ptsz at 13010, \
         (hStream: CUstream, fn_: CUhostFn, userData: *mut c_void, syncMode: c_uint)",
    );
    has(
        &d,
        Driver,
        Section::EnumValuesAdded,
        "+ CUhostTaskSyncMode_enum::CU_HOST_TASK_BLOCKING = 0",
    );
    has(
        &d,
        Driver,
        Section::EnumValuesAdded,
        "+ CUhostTaskSyncMode_enum::CU_HOST_TASK_SPINWAIT = 1",
    );
    has(
        &d,
        Driver,
        Section::CNames,
        "~ cuStreamGetCaptureInfo: maps onto cuStreamGetCaptureInfo_v2 -> cuStreamGetCaptureInfo_v3",
    );
    has(
        &d,
        Driver,
        Section::ConstantsChanged,
        "~ CUDA_VERSION: 12090 -> 13050",
    );
    has(
        &d,
        Runtime,
        Section::TypesChanged,
        "~ cudaHostNodeParamsV2: size 16 -> 32 bytes",
    );
    has(
        &d,
        Runtime,
        Section::TypesChanged,
        "~ cudaHostNodeParamsV2: field ctx: cudaExecutionContext_t added",
    );
    // The 3-argument cuLaunchHostFunc keeps its ABI: no line names it.
    assert!(
        !d.differences.iter().any(|x| x.name == "cuLaunchHostFunc"),
        "{d}"
    );
    // The plain data says the same as the text.
    let added = d
        .differences
        .iter()
        .find(|x| x.name == "cuLaunchHostFunc_v2" && x.api == Driver)
        .expect("cuLaunchHostFunc_v2 added");
    assert!(matches!(&added.change, Change::FunctionAdded(f) if f.version == Some(13010)));

    // Sorted, deterministic, and empty against itself.
    let text = d.to_string();
    assert_eq!(text, diff::diff(&old, &new).to_string());
    assert!(text.starts_with("CTK 12.9 -> 13.5: "), "{text}");
    let same = diff::diff(&new, &new);
    assert!(same.differences.is_empty(), "{same}");
}

/// `cuLaunchHostFunc_v2` is first declared by the 13.2 headers (at ABI version 13010), not 13.1.
#[test]
fn the_v2_host_function_arrives_in_thirteen_two() {
    let d = diff::diff(&model(Ctk::new(13, 1)), &model(Ctk::new(13, 2)));
    has(
        &d,
        Api::Driver,
        Section::FunctionsAdded,
        "+ cuLaunchHostFunc_v2: ABI version 13010, per-thread cuLaunchHostFunc_v2_ptsz at 13010, \
         (hStream: CUstream, fn_: CUhostFn, userData: *mut c_void, syncMode: c_uint)",
    );
    has(
        &d,
        Api::Runtime,
        Section::FunctionsAdded,
        // The runtime's exports carry no ABI version (the version a user needs is in the
        // compatibility table).
        "+ cudaLaunchHostFunc_v2: no ABI version (resolved by symbol), per-thread \
         cudaLaunchHostFunc_v2_ptsz, (stream: cudaStream_t, fn_: cudaHostFn_t, userData: *mut \
         c_void, syncMode: c_uint)",
    );
}

/// The compatibility table regen writes into the generated crate's docs, from the same models.
#[test]
fn the_compatibility_table_gives_each_target_its_versions() {
    let (old, new) = (model(Ctk::V12_9), model(Ctk::V13_5));
    let (old, new) = (Summary::of(&old), Summary::of(&new));
    let table = hostcb_generator::writer::compatibility_table(&[&old, &new]);
    for row in [
        " | function | 12.9 | 13.5 |",
        " | `cuLaunchHostFunc` | 10000 / 10000 | 10000 / 10000 |",
        " | `cuLaunchHostFunc_v2` | — | 13010 / 13010 |",
        " | `cuStreamAddCallback` | 5000 / 7000 | 5000 / 7000 |",
        " | `cuEventElapsedTime` | 2000 | — |",
        // Runtime cells: the first runtime of the major whose header declares the function
        // (the 13.2 header first declares cudaLaunchHostFunc_v2, whose driver ABI is 13010).
        " | `cudaLaunchHostFunc_v2` | — | 13020 |",
        " | `cudaMalloc` | 12000 | 13000 |",
    ] {
        assert!(
            table.iter().any(|l| l == row),
            "{row:?} is not a row of:\n{}",
            table.join("\n")
        );
    }
    assert_eq!(
        table
            .iter()
            .filter(|l| l.starts_with(" | function |"))
            .count(),
        2
    );
}
