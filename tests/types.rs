//! What a program holds across targets and APIs: one Rust type per C type, enumerations as the
//! integers C takes, errors by their status's name. CPU-only checks, for every target.

use cuda_hostcb::Error;
use cuda_hostcb::error::Api;
use cuda_hostcb::load::DefaultStream;

#[test]
fn an_error_is_the_status_of_its_api_and_value_only() {
    macro_rules! check {
        ($target:ident, $version:literal, $major:literal, [$($capability:ident)*]) => {{
            use cuda_hostcb::$target::{driver::CUresult, runtime::cudaError_t};
            let not_ready = Error::Cuda {
                api: Api::Driver,
                function: "cuStreamQuery",
                code: CUresult::CUDA_ERROR_NOT_READY.0,
            };
            assert!(not_ready.is(CUresult::CUDA_ERROR_NOT_READY), "{}", $version);
            assert!(
                !not_ready.is(CUresult::CUDA_ERROR_INVALID_VALUE),
                "{}",
                $version
            );
            // The same value from the other API is another error.
            assert_eq!(
                cudaError_t::cudaErrorNotReady.0,
                CUresult::CUDA_ERROR_NOT_READY.0
            );
            assert!(
                !not_ready.is(cudaError_t::cudaErrorNotReady),
                "{}",
                $version
            );
            let runtime = Error::Cuda {
                api: Api::Runtime { major: $major },
                function: "cudaGraphExecUpdate",
                code: cudaError_t::cudaErrorGraphExecUpdateFailure.0,
            };
            assert!(
                runtime.is(cudaError_t::cudaErrorGraphExecUpdateFailure),
                "{}",
                $version
            );
            // Another major's runtime is another library.
            let other = Error::Cuda {
                api: Api::Runtime { major: $major + 1 },
                function: "cudaGraphExecUpdate",
                code: cudaError_t::cudaErrorGraphExecUpdateFailure.0,
            };
            assert!(
                !other.is(cudaError_t::cudaErrorGraphExecUpdateFailure),
                "{}",
                $version
            );
            let unavailable = Error::StreamModeLocked {
                current: DefaultStream::Legacy,
            };
            assert!(!unavailable.is(CUresult::CUDA_ERROR_NOT_READY));
        }};
    }
    cuda_hostcb::for_each_target!(check);
}

/// The handle types are one type in every target and both APIs (a compile-time check: a target
/// that defined one on its own would not build), and enumerations convert and combine as C's do.
#[test]
fn handles_are_one_type_and_enumerations_are_integers() {
    macro_rules! check {
        ($target:ident, $version:literal, $major:literal, [$($capability:ident)*]) => {{
            use cuda_hostcb::common;
            use cuda_hostcb::$target::{driver as cu, runtime as rt};
            let _: fn(cu::CUstream) -> rt::cudaStream_t = |s| s;
            let _: fn(cu::CUgraph) -> rt::cudaGraph_t = |g| g;
            let _: fn(cu::CUgraphExec) -> rt::cudaGraphExec_t = |e| e;
            let _: fn(cu::CUgraphNode) -> rt::cudaGraphNode_t = |n| n;
            let _: fn(cu::CUevent) -> rt::cudaEvent_t = |e| e;
            let _: fn(cu::CUuserObject) -> rt::cudaUserObject_t = |u| u;
            let _: fn(cu::CUkernel) -> rt::cudaKernel_t = |k| k;
            let _: fn(cu::CUlibrary) -> rt::cudaLibrary_t = |l| l;
            let _: fn(cu::CUmemoryPool) -> rt::cudaMemPool_t = |p| p;
            let _: fn(cu::CUfunction) -> rt::cudaFunction_t = |f| f;
            let _: fn(cu::CUcontext) -> common::CUcontext = |c| c;
            let flags = rt::cudaGraphInstantiateFlags::cudaGraphInstantiateFlagAutoFreeOnLaunch
                | rt::cudaGraphInstantiateFlags::cudaGraphInstantiateFlagUpload;
            let wide: u64 = flags.into();
            assert_eq!(wide, 3, "{}", $version);
            let mut driver =
                cu::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH;
            driver |= cu::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
            assert_eq!(u64::from(driver), 9, "{}", $version);
            let narrow: u32 = cu::CUstream_flags::CU_STREAM_NON_BLOCKING.into();
            assert_eq!(narrow, 1, "{}", $version);
        }};
    }
    cuda_hostcb::for_each_target!(check);
}
