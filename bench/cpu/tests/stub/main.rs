//! The CPU bench crate's integration tests, in one executable (`cargo test -p hostcb-cpu-bench
//! --test stub [FILTER]`), over the stub driver (`stub/cuda_stub.c`), no GPU: `stub_driver` runs
//! the safe layer over it in this process, `driver_versions` makes it every pinned driver
//! version, each in a child process of this executable.
//!
//! CUDA's libraries, once loaded, belong to the whole process: here only `stub_driver`'s tests
//! load one (the stub, named by `CUDA_HOSTCB_LIBCUDA`, which the first of them sets), and
//! `driver_versions` loads nothing in this process, only in its children.

mod driver_versions;
mod stub_driver;
