//! `python -m hushtrace run`: the trace holds the program's frames, not the launcher's.
//!
//! The launcher switches function tracing on before it hands over to the program through
//! `runpy`, and switches it off after `runpy` returns; the frames it runs before the program
//! starts (`runpy`'s, the imports that find a `-m` module, the `exec` that runs the program's
//! code) and after it ends (`runpy`'s clean-up) are not the program's. While [`STATE`] is set,
//! the hooks ask [`admit`] before counting a frame that would be the outermost one on its
//! thread (depth 0): until the program's main module (`<module>` run as `__main__`) starts,
//! nothing is counted or recorded; that frame is depth 1 (as cProfile shows it, under the
//! `exec` that runs it), and once it has returned, nothing more on its thread is. Threads
//! the program starts, and fork children, are the program's.

use crate::funcs::Func;
use std::cell::Cell;
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};

/// Not launching: the hooks ask nothing.
pub const OFF: u8 = 0;
/// The launcher is running: nothing is the program's yet.
pub const AWAITING_MAIN: u8 = 1;
/// The program's main module has started.
pub const MAIN_STARTED: u8 = 2;

/// [`OFF`], [`AWAITING_MAIN`] or [`MAIN_STARTED`]; set by the launcher
/// (`hushtrace._hushtrace._await_main`).
pub static STATE: AtomicU8 = AtomicU8::new(OFF);
/// `hook::GENERATION` when the main module started (a fork child has another).
static MAIN_GENERATION: AtomicU32 = AtomicU32::new(0);

std::thread_local! {
    /// This thread runs the program's main module.
    static MAIN_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// Whether `f`, starting as the outermost counted frame of its thread in depth generation
/// `generation`, is the program's.
#[cold]
#[inline(never)]
pub fn admit(f: &Func, generation: u32) -> bool {
    match STATE.load(Ordering::Relaxed) {
        AWAITING_MAIN => {
            if !f.is_main_module() {
                return false;
            }
            MAIN_GENERATION.store(generation, Ordering::Relaxed);
            let _ = MAIN_THREAD.try_with(|m| m.set(true));
            STATE.store(MAIN_STARTED, Ordering::Relaxed);
            true
        }
        MAIN_STARTED => {
            // On the main module's thread, depth 0 again: the main module has returned.
            let main_thread = MAIN_THREAD.try_with(|m| m.get()).unwrap_or(false);
            !(main_thread && MAIN_GENERATION.load(Ordering::Relaxed) == generation)
        }
        _ => true,
    }
}
