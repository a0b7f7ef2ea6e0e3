//! Gives `libhushtrace.so` a SONAME carrying its ABI version, `libhushtrace.so.<ABI>`: the
//! major version, or `0.<minor>` while the major is 0 (each 0.x release may change the C ABI).
//! Programs linked against it record that name, so an incompatible future library is never
//! loaded in its place; `install.sh` installs `libhushtrace.so.<version>` with the SONAME and
//! development links.

fn main() {
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_else(|_| "0.0.0".into());
    let mut parts = version.split('.');
    let major = parts.next().unwrap_or("0");
    let minor = parts.next().unwrap_or("0");
    let abi = if major == "0" {
        format!("0.{minor}")
    } else {
        major.to_string()
    };
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libhushtrace.so.{abi}");
    println!("cargo:rustc-env=HUSHTRACE_C_ABI={abi}");
    println!("cargo:rerun-if-changed=build.rs");
}
