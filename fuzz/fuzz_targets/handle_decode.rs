//! Fuzzes IPC handle decoding and every `open` on the native CPU device: any input must give
//! `Ok` (only for genuine handles) or `Err`, never a crash.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(handle) = sycl::ipc::Handle::from_bytes(data.to_vec()) else { return };
    let Ok(device) = sycl::DeviceSelector::filter("native_cpu:*").and_then(|s| s.select()) else { return };
    let Ok(ctx) = sycl::Context::default_for(&device) else { return };
    let _ = sycl::ipc::memory::open::<u8>(&handle, &ctx, &device);
    let _ = sycl::ipc::physical_memory::open(&handle, &ctx, &device);
    let _ = sycl::ipc::event::open(&handle, &ctx);
});
