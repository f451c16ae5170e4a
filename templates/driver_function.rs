// Template of one driver API wrapper. The generator parses this file with syn and fills the
// placeholders (identifiers and literals spelled `__LIKE_THIS__`) for each declared function:
//   __DOC__          the header's doc comment (and notes the generator adds)
//   __name__         the declared name, which is the ABI symbol (e.g. cuStreamBeginCapture_v2)
//   __params__: __Params__   the parameter list;  __args__  the same names, forwarded in order
//   __ParamTypes__   the parameter types of the function pointer;  __Ret__  the return type
//   __base__         the name cuGetProcAddress takes;  __VERSION__  its ABI version
//   __PER_THREAD__   whether a per-thread-default-stream variant exists
// The body forwards every argument unchanged: no trampoline, no copies, no ownership taken.

#[doc = "__DOC__"]
#[inline]
pub unsafe fn __name__(__params__: __Params__) -> Result<(), Error> {
    static SYMBOL: DriverFn = DriverFn::new("__name__", c"__base__", __VERSION__, __PER_THREAD__);
    let entry = SYMBOL.get()?;
    // SAFETY: `entry` is the driver's entry point for `__base__` at ABI version `__VERSION__`,
    // whose C signature is the declaration this wrapper was generated from.
    let f = unsafe {
        core::mem::transmute::<*const core::ffi::c_void, unsafe extern "C" fn(__ParamTypes__) -> __Ret__>(entry)
    };
    // SAFETY: the caller upholds the C function's contract (see the documentation above).
    driver_result("__name__", unsafe { f(__args__) }.0)
}
