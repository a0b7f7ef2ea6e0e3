//! The trace holds the program's frames, not those of whatever started tracing before it.
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
//!
//! At interpreter start-up (`hushtrace record`, the children of a traced program: the
//! package's `.pth` hook), tracing starts while the interpreter imports the hook and still has
//! `site`'s work to finish: the same wait for the main module ([`AWAITING_MAIN_ONLY`]) keeps
//! those frames out; what runs after the main module (`atexit` callbacks) is recorded.

use crate::funcs::Func;
use std::cell::Cell;
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};

/// Not launching: the hooks ask nothing.
pub const OFF: u8 = 0;
/// The launcher is running: nothing is the program's yet.
pub const AWAITING_MAIN: u8 = 1;
/// The program's main module has started.
pub const MAIN_STARTED: u8 = 2;
/// Interpreter start-up: nothing is the program's until its main module starts, everything
/// after.
pub const AWAITING_MAIN_ONLY: u8 = 3;

/// [`OFF`], [`AWAITING_MAIN`], [`MAIN_STARTED`] or [`AWAITING_MAIN_ONLY`]; set by the launcher
/// (`hushtrace._hushtrace._await_main`).
pub static STATE: AtomicU8 = AtomicU8::new(OFF);
/// `funcs::GENERATION` when the main module started (a fork child has another).
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
        AWAITING_MAIN_ONLY => {
            let main = f.is_main_module();
            if main {
                STATE.store(OFF, Ordering::Relaxed);
            }
            main
        }
        MAIN_STARTED => {
            // On the main module's thread, depth 0 again: the main module has returned.
            let main_thread = MAIN_THREAD.try_with(|m| m.get()).unwrap_or(false);
            !(main_thread && MAIN_GENERATION.load(Ordering::Relaxed) == generation)
        }
        _ => true,
    }
}
