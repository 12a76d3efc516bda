//! Shared by the mock-driver test binaries: builds `mock/mock_ze_driver.c`, points the real
//! loader at it with `ZE_ENABLE_ALT_DRIVERS`, and offers small helpers.
#![allow(dead_code)]

use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use sycl_backend::ipc::{acquire_remote_fd, ExporterId, IpcImport};
use sycl_backend::{Backend, BackendKind, Context, Device, Queue, UsmKind};

pub struct Env {
    pub backend: Arc<dyn Backend>,
    pub device: Arc<dyn Device>,
    pub mock: libloading::Library,
}

/// `unwrap_err` for results whose value is not `Debug` (trait objects).
pub trait ErrOf {
    /// The error, or a panic.
    fn err_(self) -> sycl_backend::Error;
}

impl<T> ErrOf for sycl_backend::Result<T> {
    fn err_(self) -> sycl_backend::Error {
        match self {
            Ok(_) => panic!("expected an error, got a value"),
            Err(e) => e,
        }
    }
}

pub fn required() -> bool {
    // CI has the Level Zero loader and headers but no driver: it sets
    // SYCL_RS_REQUIRE_LEVEL_ZERO_LOADER=1 so that these loader-only tests cannot skip there.
    std::env::var("SYCL_RS_REQUIRE_LEVEL_ZERO_LOADER").is_ok_and(|v| v == "1")
        || std::env::var("SYCL_RS_REQUIRE_BACKENDS")
            .is_ok_and(|v| v.split(',').any(|b| b.trim() == "level_zero"))
}

pub fn build_mock() -> Result<PathBuf, String> {
    build_mock_from(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mock/mock_ze_driver.c"))
}

/// Compiles the mock driver from `src` (other crates' tests include this module by path).
pub fn build_mock_from(src: &std::path::Path) -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("sycl-rs-l0-mock-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let out = dir.join("libmock_ze_driver.so");
    let status = std::process::Command::new("cc")
        .args(["-std=c11", "-O1", "-Wall", "-shared", "-fPIC", "-o"])
        .arg(&out)
        .arg(src)
        .output()
        .map_err(|e| format!("cannot run cc: {e}"))?;
    if !status.status.success() {
        return Err(format!(
            "cc failed:\n{}",
            String::from_utf8_lossy(&status.stderr)
        ));
    }
    Ok(out)
}

pub fn setup(extra_env: &[(&str, &str)]) -> Option<&'static Env> {
    static ENV: OnceLock<Option<Env>> = OnceLock::new();
    ENV.get_or_init(|| {
        let lib = match build_mock() {
            Ok(p) => p,
            Err(e) => {
                assert!(!required(), "mock driver unavailable: {e}");
                eprintln!("SKIPPED: mock driver unavailable: {e}");
                return None;
            }
        };
        // Set before the first zeInit of this process (edition 2021: `set_var` is safe here;
        // this runs once, before any loader call).
        std::env::set_var("ZE_ENABLE_ALT_DRIVERS", &lib);
        for (k, v) in extra_env {
            std::env::set_var(k, v);
        }
        let backend = match sycl_backend_level_zero::load() {
            Ok(b) => b,
            Err(e) => {
                assert!(!required(), "{e}");
                eprintln!("SKIPPED: {e}");
                return None;
            }
        };
        let platforms = backend.platforms();
        assert_eq!(
            platforms.len(),
            1,
            "the mock driver must be the one platform"
        );
        let device = platforms[0].devices().remove(0);
        // SAFETY: the same library the loader opened (same path, so the same handle and
        // globals); only `mock_ze_live_allocations() -> int` is called.
        let mock = unsafe { libloading::Library::new(&lib) }.expect("reopen mock");
        // Both opens hold their mapping; the file is no longer needed.
        if let Some(dir) = lib.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
        Some(Env {
            backend,
            device,
            mock,
        })
    })
    .as_ref()
}

pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

pub fn live_allocations(env: &Env) -> i32 {
    // SAFETY: signature as declared in the mock.
    unsafe {
        let f = env
            .mock
            .get::<unsafe extern "C" fn() -> i32>(b"mock_ze_live_allocations\0")
            .unwrap();
        f()
    }
}

pub fn context(env: &Env) -> Arc<dyn Context> {
    let platforms = env.backend.platforms();
    platforms[0]
        .create_context(std::slice::from_ref(&env.device))
        .unwrap()
}

/// A SPIR-V word stream whose only instructions are `OpEntryPoint Kernel` for `names` (all the
/// mock reads).
pub fn spirv(names: &[&str]) -> Vec<u8> {
    let mut words = vec![0x0723_0203u32, 0x0001_0000, 0, 100, 0];
    for (i, name) in names.iter().enumerate() {
        let mut bytes = name.as_bytes().to_vec();
        bytes.push(0);
        while bytes.len() % 4 != 0 {
            bytes.push(0);
        }
        let name_words: Vec<u32> = bytes
            .chunks(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        words.push(((3 + name_words.len() as u32) << 16) | 15);
        words.push(6); // Kernel execution model
        words.push(10 + i as u32);
        words.extend(name_words);
    }
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

pub fn read_back(q: &Arc<dyn Queue>, ctx: &Arc<dyn Context>, src: u64, n: usize) -> Vec<u8> {
    let host = ctx.usm_alloc(UsmKind::Host, None, n, 0).unwrap();
    // SAFETY: both ranges are live USM of `n` bytes until the wait below.
    let e = unsafe { q.memcpy(host, src, n, &[]) }.unwrap();
    e.wait().unwrap();
    // SAFETY: host USM is host-accessible memory of `n` bytes.
    let out = unsafe { std::slice::from_raw_parts(host as *const u8, n) }.to_vec();
    // SAFETY: no pending command uses it.
    unsafe { ctx.usm_free(host) }.unwrap();
    out
}

pub fn import<'a>(payload: &'a [u8], fds: &[i32]) -> IpcImport<'a> {
    let me = ExporterId::current();
    let fds: Vec<OwnedFd> = fds
        .iter()
        .map(|&fd| acquire_remote_fd(&me, fd, BackendKind::LevelZero).unwrap())
        .collect();
    IpcImport {
        payload,
        fds,
        exporter: me,
        same_process: true,
    }
}
