// Template of one runtime API wrapper. The generator parses this file with syn and fills the
// placeholders (identifiers and literals spelled `__LIKE_THIS__`) for each declared function:
//   __DOC__          the header's doc comment (and notes the generator adds)
//   __name__         the declared name and legacy-stream symbol (e.g. cudaLaunchHostFunc)
//   __params__: __Params__   the parameter list;  __args__  the same names, forwarded in order
//   __ParamTypes__   the parameter types of the function pointer;  __Ret__  the return type
//   __MAJOR__        the runtime's major version (12 or 13: libcudart.so.<major>)
//   __PER_THREAD__   the per-thread-default-stream symbol, `Some(c"..._ptsz")`, or `None`
//   __VERSION__      the CUDA version the function needs, for the "not available" error
// The body forwards every argument unchanged: no trampoline, no copies, no ownership taken.

#[doc = "__DOC__"]
#[inline]
pub unsafe fn __name__(__params__: __Params__) -> Result<(), Error> {
    static SYMBOL: RuntimeFn = RuntimeFn::new("__name__", __MAJOR__, c"__name__", __PER_THREAD__, __VERSION__);
    let entry = SYMBOL.get()?;
    // SAFETY: `entry` is the runtime's export of this declaration (or its per-thread twin,
    // which has the same signature).
    let f = unsafe {
        core::mem::transmute::<*const core::ffi::c_void, unsafe extern "C" fn(__ParamTypes__) -> __Ret__>(entry)
    };
    // SAFETY: the caller upholds the C function's contract (see the documentation above).
    runtime_result("__name__", __MAJOR__, unsafe { f(__args__) }.0)
}
