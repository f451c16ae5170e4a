//! Safe host callbacks over the generated bindings.
