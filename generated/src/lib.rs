//! The generated CUDA host-callback bindings.
