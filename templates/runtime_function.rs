// Template of one runtime API function. The generator parses this file with syn and fills the
// placeholders (identifiers and literals spelled `__LIKE_THIS__`) for each declared function:
//   __DOC__          the header's doc comment (and notes the generator adds), one doc
//                    attribute per line;  __ENTRY_DOC__  the entry point's
//   __name__         the declared name and legacy-stream symbol (e.g. cudaLaunchHostFunc)
//   __params__: __Params__   the parameter list: the element, once per parameter, with its
//                    name and type;  __args__  the same names, forwarded in order
//   __ParamTypes__   the parameter types of the function pointer;  __Ret__  the return type
//   __MAJOR__        the runtime's major version (12 or 13: libcudart.so.<major>)
//   __PER_THREAD__   the per-thread-default-stream symbol, `Some(c"..._ptsz")`, or `None`
//   __VERSION__      the CUDA version the function needs, for the "not available" error
// A placeholder the writer has no value for stops generation.
// The static is the function's entry point; it goes into the file's `entry` module (see
// file.rs), and names itself to its first-call stub through a marker type of its own (`This`), which
// resolves it. The wrapper is one call: it forwards every argument to the entry point unchanged:
// no trampoline, no copies, no ownership taken.

#[doc = "__ENTRY_DOC__"]
pub static __name__: RuntimeFn<unsafe extern "C" fn(__ParamTypes__) -> __Ret__> = {
    /// Names `__name__` to its first-call stub.
    enum This {}
    impl NamedEntry for This {
        type Entry = RuntimeFn<unsafe extern "C" fn(__ParamTypes__) -> __Ret__>;
        #[inline(always)]
        fn entry() -> &'static Self::Entry {
            &__name__
        }
    }
    // SAFETY: the type is the C signature of the declaration this was generated from; its
    // per-thread twin has the same signature; `This` names this static:
    // its `entry` returns it.
    unsafe { RuntimeFn::new::<This>(c"__name__", __MAJOR__, __PER_THREAD__, __VERSION__) }
};

#[doc = "__DOC__"]
#[inline]
pub unsafe fn __name__(__params__: __Params__) -> Result<(), Error> {
    // SAFETY: the caller upholds the C function's contract (see the documentation above).
    runtime_result("__name__", __MAJOR__, unsafe { entry::__name__.function()(__args__) }.0)
}
