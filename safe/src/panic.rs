//! Panics in host callbacks: they are caught before they reach the driver and reported through
//! one replaceable, process-wide hook.

use std::any::Any;
use std::fmt;
use std::sync::{Arc, RwLock};

/// A hook that receives every contained callback panic.
pub type PanicHook = Arc<dyn Fn(&CallbackPanic<'_>) + Send + Sync + 'static>;

/// The installed hook; `None` means [`default_panic_hook`].
static HOOK: RwLock<Option<PanicHook>> = RwLock::new(None);

/// Where in a callback's life the panic happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PanicStage {
    /// While the closure ran.
    Call,
    /// While the closure was dropped (after a one-shot call, or by a graph's user object).
    Drop,
}

/// A panic that a host callback raised and the safe layer contained.
#[derive(Debug)]
pub struct CallbackPanic<'a> {
    stage: PanicStage,
    message: Option<&'a str>,
}

impl CallbackPanic<'_> {
    /// The panic's message, when its payload is a string (as with `panic!("...")`).
    pub fn message(&self) -> Option<&str> {
        self.message
    }

    /// Whether the closure panicked while running or while being dropped.
    pub fn stage(&self) -> PanicStage {
        self.stage
    }
}

impl fmt::Display for CallbackPanic<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let when = match self.stage {
            PanicStage::Call => "panicked",
            PanicStage::Drop => "panicked while being dropped",
        };
        match self.message {
            Some(m) => write!(f, "a host callback {when}: {m}"),
            None => write!(f, "a host callback {when} (the payload is not a string)"),
        }
    }
}

/// Replaces the hook that receives contained callback panics (process-wide, for every target).
///
/// The hook runs on the CUDA thread that ran the callback, where CUDA calls are not permitted;
/// keep it short and non-blocking.
pub fn set_panic_hook<H>(hook: H)
where
    H: Fn(&CallbackPanic<'_>) + Send + Sync + 'static,
{
    *HOOK.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(hook));
}

/// Removes the installed hook, returning it (or the default one), and restores
/// [`default_panic_hook`].
pub fn take_panic_hook() -> PanicHook {
    HOOK.write()
        .unwrap_or_else(|e| e.into_inner())
        .take()
        .unwrap_or_else(|| Arc::new(default_panic_hook))
}

/// The default hook: one line on stderr that names the panic and says it was contained.
pub fn default_panic_hook(report: &CallbackPanic<'_>) {
    eprintln!(
        "cuda-hostcb-safe: {report}; the panic was contained (the stream and the graph go on)"
    );
}

/// Reports a caught panic payload to the hook, containing any panic of the hook itself, and
/// disposes of the payload without letting its drop unwind.
pub(crate) fn report(stage: PanicStage, payload: Box<dyn Any + Send>) {
    let message = payload
        .downcast_ref::<&'static str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str));
    let report = CallbackPanic { stage, message };
    let hook = HOOK.read().unwrap_or_else(|e| e.into_inner()).clone();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match &hook {
        Some(hook) => hook(&report),
        None => default_panic_hook(&report),
    }));
    if let Err(hook_payload) = outcome {
        // The hook itself panicked: say so the plain way, and never unwind into the driver.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            eprintln!("cuda-hostcb-safe: the callback panic hook panicked; it was: {report}")
        }));
        dispose(hook_payload);
    }
    dispose(payload);
}

/// Drops a panic payload; a payload whose own drop panics is leaked instead.
fn dispose(payload: Box<dyn Any + Send>) {
    if let Err(again) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(payload))) {
        std::mem::forget(again);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Serialises the tests that replace the process-wide hook.
    pub(crate) static HOOK_LOCK: Mutex<()> = Mutex::new(());

    /// What a recording hook saw: `(stage, message)` per report.
    pub(crate) type Seen = Arc<Mutex<Vec<(PanicStage, Option<String>)>>>;

    /// Installs a hook that records each report.
    pub(crate) fn recording_hook() -> Seen {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&seen);
        set_panic_hook(move |r| {
            sink.lock()
                .unwrap()
                .push((r.stage(), r.message().map(str::to_owned)))
        });
        seen
    }

    #[test]
    fn reports_reach_the_installed_hook_then_the_default_returns() {
        let _guard = HOOK_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let seen = recording_hook();
        report(PanicStage::Call, Box::new("static text"));
        report(PanicStage::Drop, Box::new(String::from("owned text")));
        report(PanicStage::Call, Box::new(42_u32));
        let hook = take_panic_hook();
        assert_eq!(
            *seen.lock().unwrap(),
            vec![
                (PanicStage::Call, Some("static text".to_owned())),
                (PanicStage::Drop, Some("owned text".to_owned())),
                (PanicStage::Call, None),
            ]
        );
        // The taken hook is the recording one; the installed one is the default again.
        hook(&CallbackPanic {
            stage: PanicStage::Call,
            message: Some("direct"),
        });
        assert_eq!(seen.lock().unwrap().len(), 4);
        report(PanicStage::Call, Box::new("to stderr"));
        assert_eq!(seen.lock().unwrap().len(), 4);
    }

    #[test]
    fn a_panicking_hook_is_contained() {
        let _guard = HOOK_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        set_panic_hook(|_| panic!("the hook fails"));
        report(PanicStage::Call, Box::new("original"));
        take_panic_hook();
    }

    #[test]
    fn reports_read_well() {
        let r = CallbackPanic {
            stage: PanicStage::Drop,
            message: Some("boom"),
        };
        assert_eq!(
            r.to_string(),
            "a host callback panicked while being dropped: boom"
        );
        let r = CallbackPanic {
            stage: PanicStage::Call,
            message: None,
        };
        assert_eq!(
            r.to_string(),
            "a host callback panicked (the payload is not a string)"
        );
    }
}
