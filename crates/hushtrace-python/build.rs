//! Emits the `Py_3_N` cfgs of the interpreter being built for (PyO3's own detection), so the
//! hook code picks `sys.monitoring` (3.12+) or the C profile hook (below).
fn main() {
    pyo3_build_config::use_pyo3_cfgs();
}
