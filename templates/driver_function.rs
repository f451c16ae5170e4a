// Template of one driver API function. The generator parses this file with syn and fills the
// placeholders (identifiers and literals spelled `__LIKE_THIS__`) for each declared function:
//   __DOC__          the header's doc comment (and notes the generator adds), one doc
//                    attribute per line;  __ENTRY_DOC__  the entry point's
//   __name__         the declared name, which is the ABI symbol (e.g. cuStreamBeginCapture_v2)
//   __params__: __Params__   the parameter list: the element, once per parameter, with its
//                    name and type;  __args__  the same names, forwarded in order
//   __ParamTypes__   the parameter types of the function pointer;  __Ret__  the return type
//   __base__         the name cuGetProcAddress takes;  __VERSION__  its ABI version
//   __NEEDS__        the oldest driver shown to have that ABI (the first header declaring it)
//   __PER_THREAD__   the per-thread-default-stream variant: `Some(PerThreadVariant { .. })` or `None`
// A placeholder the writer has no value for stops generation.
// The static is the function's entry point; it goes into the file's `entry` module (see
// file.rs), and names itself to its first-call stub through a marker type of its own (`This`), which
// resolves it. The wrapper is one call: it forwards every argument to the entry point unchanged:
// no trampoline, no copies, no ownership taken. Comments here do not reach the output (syn
// drops them); the safety argument that the output carries is in file.rs's `entry` docs.

#[doc = "__ENTRY_DOC__"]
pub static __name__: DriverFn<unsafe extern "C" fn(__ParamTypes__) -> __Ret__> = {
    /// Names `__name__` to its first-call stub.
    enum This {}
    impl NamedEntry for This {
        type Entry = DriverFn<unsafe extern "C" fn(__ParamTypes__) -> __Ret__>;
        #[inline(always)]
        fn entry() -> &'static Self::Entry {
            &__name__
        }
    }
    // SAFETY: the type is the C signature of the declaration this was generated from, which
    // cudaTypedefs.h gives as the signature of `__base__` at ABI version `__VERSION__` (and of
    // its per-thread variant); `This` names this static:
    // its `entry` returns it.
    unsafe { DriverFn::new::<This>(c"__name__", c"__base__", __VERSION__, __NEEDS__, __PER_THREAD__) }
};

#[doc = "__DOC__"]
#[inline]
pub unsafe fn __name__(__params__: __Params__) -> Result<(), Error> {
    // SAFETY: the caller upholds the C function's contract (see the documentation above).
    driver_result("__name__", unsafe { entry::__name__.function()(__args__) }.0)
}
