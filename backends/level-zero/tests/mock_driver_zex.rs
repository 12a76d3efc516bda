//! The counter-based IPC event route through the compute-runtime `zex` extension functions,
//! against the mock driver told to report API 1.7 (so immediate lists are made in order) and to
//! offer `zexCounterBasedEvent*` through `zeDriverGetExtensionFunctionAddress`.
//!
//! The mock enforces what the spec notes say of counter-based events: no host signal or reset,
//! signals only from in-order lists, no timestamps with IPC. It runs in one process only.

use std::time::Duration;

use sycl_backend::{Aspect, Errc, EventProperties, EventStatus, QueueProperties};

mod common;
use common::*;

fn env() -> Option<&'static Env> {
    setup(&[("MOCK_ZE_API_MINOR", "7"), ("MOCK_ZE_ZEX", "1")])
}

#[test]
fn zex_route_sets_the_aspect_and_shares_event_state() {
    let Some(env) = env() else { return };
    let _g = serial();
    assert_eq!(env.device.info().version, "1.7");
    assert!(
        env.device.has(Aspect::ExtOneapiIpcEvent),
        "zex functions resolved: the aspect is on"
    );
    let ctx = context(env);
    // The queue's list is created with ZE_COMMAND_QUEUE_FLAG_IN_ORDER (the mock refuses to
    // signal counter-based events from other lists).
    let q = ctx
        .create_queue(&env.device, QueueProperties::default())
        .unwrap();
    let e = ctx
        .create_event(EventProperties {
            enable_ipc: true,
            enable_profiling: false,
        })
        .unwrap();
    assert!(e.ipc_enabled());
    assert_eq!(
        e.status().unwrap(),
        EventStatus::Complete,
        "counter-based events start complete"
    );
    // Export before the first signal is allowed.
    let export = ctx.ipc_get_event(&e).unwrap();
    assert!(export.fds.is_empty());
    assert_eq!(
        export.payload.len(),
        sycl_backend_level_zero::ipc::EventPayload::LEN
    );
    let decoded = sycl_backend_level_zero::ipc::EventPayload::decode(&export.payload).unwrap();
    assert_eq!(decoded.route, sycl_backend_level_zero::ipc::EventRoute::Zex);
    let opened = ctx.ipc_open_event(import(&export.payload, &[])).unwrap();
    assert!(!opened.ipc_enabled());
    // Signal on the exporter's side (no host reset happens for counter-based events: the mock
    // would refuse it), wait on the importer's side; then the other way round.
    q.host_task(
        Box::new(|| std::thread::sleep(Duration::from_millis(10))),
        &[],
    )
    .unwrap();
    q.enqueue_signal_event(&e).unwrap();
    opened.wait().unwrap();
    q.enqueue_signal_event(&opened).unwrap();
    e.wait().unwrap();
    q.enqueue_wait_events(std::slice::from_ref(&opened))
        .unwrap();
    q.wait().unwrap();
    assert_eq!(ctx.ipc_get_event(&opened).err_().code(), Errc::Invalid);
    ctx.ipc_put_event(&export.payload).unwrap();
    drop(opened);
    drop(e);
    // Ordinary standalone events still work next to counter-based ones.
    let plain = ctx.create_event(EventProperties::default()).unwrap();
    q.enqueue_signal_event(&plain).unwrap();
    plain.wait().unwrap();
}
