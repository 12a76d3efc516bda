//! The object-safe traits every backend implements.
//!
//! `sycl` holds `Arc<dyn Trait>` and picks backends at run time. When a backend receives one
//! of "its" objects back (a device to make a queue on, an event to wait for), it downcasts with
//! `as_any()`; an object of another backend is either handled generically (a foreign event is
//! waited on from the host) or refused with `Errc::BackendMismatch`.
//!
//! Addresses are `u64` (device pointers need not be host pointers). Calls that read or write
//! memory through caller-supplied addresses are `unsafe`: `sycl` proves the ranges are live
//! allocations and keeps them alive until the returned event completes.
//!
//! Optional features have default bodies that answer `Errc::FeatureNotSupported`; a backend
//! overrides them and sets the matching aspect on its devices.

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use crate::ipc::{IpcExport, IpcImport, IpcObjectKind, OpenedMemory};
use crate::{
    AccessMode, Aspect, BackendKind, ClosureKernel, DeviceInfo, Error, EventProperties,
    EventStatus, GranularityMode, GraphLaunch, HostTask, KernelArg, KernelIr, KernelSource,
    LaunchRange, PhysicalMemProperties, PlatformInfo, PointerInfo, ProfilingInfo, QueueProperties,
    RawIpcMem, Result, UsmKind,
};

/// The OpenCL-style build option that makes `f32` division and square root correctly
/// rounded (as Rust's are) when every device of `devices` can (OpenCL C and SPIR-V may round
/// them to 2.5 and 3 ulp otherwise); empty when one cannot.
pub fn exact_f32_division_option(devices: &[Arc<dyn Device>]) -> &'static str {
    if devices
        .iter()
        .all(|d| d.info().fp32_correctly_rounded_divide_sqrt)
    {
        "-cl-fp32-correctly-rounded-divide-sqrt"
    } else {
        ""
    }
}

/// A loaded backend: the entry point of a backend crate.
pub trait Backend: Send + Sync {
    /// Which backend this is.
    fn kind(&self) -> BackendKind;
    /// Its platforms. Called once; the result is cached by `sycl`.
    fn platforms(&self) -> Vec<Arc<dyn Platform>>;
}

/// A platform (one driver).
pub trait Platform: Send + Sync + Any {
    /// Which backend it belongs to.
    fn backend(&self) -> BackendKind;
    /// Name, vendor, version.
    fn info(&self) -> &PlatformInfo;
    /// Its devices; the same `Arc`s every call.
    fn devices(&self) -> Vec<Arc<dyn Device>>;
    /// A context over `devices` (all of this platform, at least one).
    fn create_context(&self, devices: &[Arc<dyn Device>]) -> Result<Arc<dyn Context>>;
    /// For downcasting.
    fn as_any(&self) -> &dyn Any;
}

/// A device.
pub trait Device: Send + Sync + Any {
    /// Which backend it belongs to.
    fn backend(&self) -> BackendKind;
    /// Its description, gathered once at enumeration.
    fn info(&self) -> &DeviceInfo;
    /// Its position in its platform's device list.
    fn index(&self) -> usize;
    /// Whether it has `aspect`.
    fn has(&self, aspect: Aspect) -> bool {
        self.info().has(aspect)
    }
    /// Whether a device of the same platform can access memory of this one directly.
    fn can_access_peer(&self, _peer: &Arc<dyn Device>) -> bool {
        false
    }
    /// For downcasting.
    fn as_any(&self) -> &dyn Any;
}

/// A context: the scope of memory and events for one or more devices of one platform.
pub trait Context: Send + Sync + Any {
    /// Which backend it belongs to.
    fn backend(&self) -> BackendKind;
    /// Its devices.
    fn devices(&self) -> &[Arc<dyn Device>];
    /// For downcasting.
    fn as_any(&self) -> &dyn Any;

    /// A queue on `device`, which is one of this context's devices.
    fn create_queue(
        &self,
        device: &Arc<dyn Device>,
        props: QueueProperties,
    ) -> Result<Arc<dyn Queue>>;

    /// Allocates `size > 0` bytes of USM of `kind` aligned to `align` (a power of two, 0 for
    /// the default). `device` is `None` only for `UsmKind::Host`.
    fn usm_alloc(
        &self,
        kind: UsmKind,
        device: Option<&Arc<dyn Device>>,
        size: usize,
        align: usize,
    ) -> Result<u64>;

    /// Frees an allocation made by [`Context::usm_alloc`].
    ///
    /// # Safety
    /// `ptr` came from `usm_alloc` on this context, was not freed, and no pending command uses
    /// it.
    unsafe fn usm_free(&self, ptr: u64) -> Result<()>;

    /// What the context knows of `ptr` (`UsmKind::Unknown` if nothing).
    fn usm_pointer_info(&self, ptr: u64) -> PointerInfo;

    /// What the driver says about `ptr` when this context did not allocate it: memory of
    /// another library in the same process (a PyTorch or CuPy tensor) that `sycl` is asked to
    /// wrap (`Usm::from_foreign`). `kind` is the memory's kind, `device_index` its device among
    /// this context's (none for host memory), `base` and `size` the driver's allocation
    /// holding `ptr`.
    ///
    /// Errors: `Errc::FeatureNotSupported` where the backend has no such query (the default);
    /// `Errc::Invalid` when the driver does not know `ptr`, or it lives on a device outside
    /// this context.
    fn foreign_pointer_info(&self, ptr: u64) -> Result<PointerInfo> {
        let _ = ptr;
        Err(Error::unsupported_by_backend(
            self.backend(),
            "querying memory allocated outside sycl-rs",
        ))
    }

    /// Waits for the work that other libraries submitted to `device`'s default queue (CUDA:
    /// the legacy default stream, `cuStreamSynchronize(CU_STREAM_LEGACY)`), so that foreign
    /// memory a DLPack producer made ready there may be used by any queue of this context.
    /// Nothing to wait for where the backend has no such queue (the default).
    fn wait_foreign_default_queue(&self, device: &Arc<dyn Device>) -> Result<()> {
        let _ = device;
        Ok(())
    }

    /// A standalone event in the complete state (`make_event`). Backends refuse
    /// `enable_ipc` together with `enable_profiling` with `Errc::Invalid`.
    fn create_event(&self, props: EventProperties) -> Result<Arc<dyn Event>> {
        let _ = props;
        Err(Error::unsupported(
            Aspect::ExtOneapiReusableEvents,
            "make_event",
        ))
    }

    /// A standalone event that queues of `device` (one of this context's devices) can
    /// signal. Backends whose events belong to one device (CUDA) make it on `device`; the
    /// default is [`Context::create_event`].
    fn create_event_on(
        &self,
        device: &Arc<dyn Device>,
        props: EventProperties,
    ) -> Result<Arc<dyn Event>> {
        let _ = device;
        self.create_event(props)
    }

    /// Builds a kernel bundle for `devices` from `source`. Build failures are `Errc::Build`
    /// with the compiler log in the message.
    fn build_kernel_bundle(
        &self,
        devices: &[Arc<dyn Device>],
        source: &KernelSource<'_>,
        options: &str,
    ) -> Result<Arc<dyn KernelBundle>> {
        let _ = (devices, options);
        Err(Error::unsupported(
            Aspect::OnlineCompiler,
            format!("building {} kernels", source.language()),
        ))
    }

    /// The forms of `#[sycl::kernel]` programs this context's devices all build, the
    /// backend's preferred form first (a form sycl-rs may pick from by user choice).
    fn kernel_forms(&self) -> Vec<KernelIr> {
        Vec::new()
    }

    /// The build options `#[sycl::kernel]` programs of `form` need on this context's devices
    /// for Rust's semantics (no contraction of `a * b + c` into a fused multiply-add,
    /// correctly rounded `f32` division and square root where the devices offer it).
    fn kernel_build_options(&self, form: KernelIr) -> &'static str {
        let _ = form;
        ""
    }

    // ---- virtual memory (`ext_oneapi_virtual_mem`) ----

    /// The granularity for sizes and addresses of virtual memory on `device`.
    fn mem_granularity(&self, device: &Arc<dyn Device>, mode: GranularityMode) -> Result<usize> {
        let _ = (device, mode);
        Err(Error::unsupported(
            Aspect::ExtOneapiVirtualMem,
            "get_mem_granularity",
        ))
    }
    /// Reserves `size` bytes of address space, at `start` if possible (0 = anywhere).
    fn reserve_virtual_mem(&self, start: u64, size: usize) -> Result<u64> {
        let _ = (start, size);
        Err(Error::unsupported(
            Aspect::ExtOneapiVirtualMem,
            "reserve_virtual_mem",
        ))
    }
    /// Frees a reservation (exactly as reserved; unmapped first).
    fn free_virtual_mem(&self, ptr: u64, size: usize) -> Result<()> {
        let _ = (ptr, size);
        Err(Error::unsupported(
            Aspect::ExtOneapiVirtualMem,
            "free_virtual_mem",
        ))
    }
    /// A physical memory object of `size` bytes on `device`.
    fn create_physical_mem(
        &self,
        device: &Arc<dyn Device>,
        size: usize,
        props: PhysicalMemProperties,
    ) -> Result<Arc<dyn PhysicalMem>> {
        let _ = (device, size, props);
        Err(Error::unsupported(
            Aspect::ExtOneapiVirtualMem,
            "physical_mem",
        ))
    }
    /// Maps `[ptr, ptr+size)` (inside a reservation) to `mem` at `offset` with `mode`.
    fn map_physical(
        &self,
        ptr: u64,
        size: usize,
        mem: &Arc<dyn PhysicalMem>,
        offset: usize,
        mode: AccessMode,
    ) -> Result<()> {
        let _ = (ptr, size, mem, offset, mode);
        Err(Error::unsupported(
            Aspect::ExtOneapiVirtualMem,
            "physical_mem::map",
        ))
    }
    /// Unmaps a whole mapping.
    ///
    /// # Safety
    /// No pending command uses the range.
    unsafe fn unmap(&self, ptr: u64, size: usize) -> Result<()> {
        let _ = (ptr, size);
        Err(Error::unsupported(Aspect::ExtOneapiVirtualMem, "unmap"))
    }
    /// Changes the access mode of a mapped range.
    fn set_access_mode(&self, ptr: u64, size: usize, mode: AccessMode) -> Result<()> {
        let _ = (ptr, size, mode);
        Err(Error::unsupported(
            Aspect::ExtOneapiVirtualMem,
            "set_access_mode",
        ))
    }
    /// The access mode of a mapped range.
    fn get_access_mode(&self, ptr: u64, size: usize) -> Result<AccessMode> {
        let _ = (ptr, size);
        Err(Error::unsupported(
            Aspect::ExtOneapiVirtualMem,
            "get_access_mode",
        ))
    }

    // ---- IPC ----

    /// Whether this context opens `kind` handles exported by `exporter`'s backend. Its own,
    /// by default; backends that share one payload format (native CPU and OpenCL: memfds)
    /// read each other's, and check them as strictly as their own.
    fn ipc_reads(&self, exporter: BackendKind, kind: IpcObjectKind) -> bool {
        let _ = kind;
        exporter == self.backend()
    }

    /// Exports the USM device allocation that contains `ptr` (interior pointers allowed: the
    /// payload records the offset).
    fn ipc_get_mem(&self, ptr: u64) -> Result<IpcExport> {
        let _ = ptr;
        Err(Error::unsupported(
            Aspect::ExtOneapiIpcMemory,
            "ipc::memory::get",
        ))
    }
    /// Releases what [`Context::ipc_get_mem`] holds for the export with this payload.
    fn ipc_put_mem(&self, payload: &[u8]) -> Result<()> {
        let _ = payload;
        Err(Error::unsupported(
            Aspect::ExtOneapiIpcMemory,
            "ipc::memory::put",
        ))
    }
    /// Opens exported memory on `device`: the address in this process (already offset) and
    /// the bytes from there that the backend checked are really mapped (a payload's claimed
    /// size is never trusted). Opens of the same exported object may share one mapping, and
    /// so return the same address (as CUDA's driver does); each open is closed once, and the
    /// mapping goes with the last close.
    fn ipc_open_mem(
        &self,
        device: &Arc<dyn Device>,
        import: IpcImport<'_>,
    ) -> Result<OpenedMemory> {
        let _ = (device, import);
        Err(Error::unsupported(
            Aspect::ExtOneapiIpcMemory,
            "ipc::memory::open",
        ))
    }
    /// Closes an address returned by [`Context::ipc_open_mem`].
    ///
    /// # Safety
    /// No pending command uses the memory.
    unsafe fn ipc_close_mem(&self, ptr: u64) -> Result<()> {
        let _ = ptr;
        Err(Error::unsupported(
            Aspect::ExtOneapiIpcMemory,
            "ipc::memory::close",
        ))
    }
    /// The vendor's own IPC handle of the USM device allocation that contains `ptr`, for
    /// programs outside sycl-rs (CUDA's `cudaIpcMemHandle_t`); backends without one refuse.
    fn ipc_get_raw_mem(&self, ptr: u64) -> Result<RawIpcMem> {
        let _ = ptr;
        Err(Error::unsupported(
            Aspect::ExtOneapiIpcMemory,
            "raw IPC memory handles",
        ))
    }
    /// Opens a vendor IPC handle made by any program of the vendor's runtime (CUDA: the 64
    /// bytes of a `cudaIpcMemHandle_t`, offset 0) on `device`, as [`Context::ipc_open_mem`]
    /// opens (closed by [`Context::ipc_close_mem`]; the size is the driver's).
    fn ipc_open_raw_mem(&self, device: &Arc<dyn Device>, raw: &[u8]) -> Result<OpenedMemory> {
        let _ = (device, raw);
        Err(Error::unsupported(
            Aspect::ExtOneapiIpcMemory,
            "raw IPC memory handles",
        ))
    }
    /// Exports a physical memory object made with `enable_ipc`.
    fn ipc_get_physical_mem(&self, mem: &Arc<dyn PhysicalMem>) -> Result<IpcExport> {
        let _ = mem;
        Err(Error::unsupported(
            Aspect::ExtOneapiIpcPhysicalMemory,
            "ipc::physical_memory::get",
        ))
    }
    /// Releases what [`Context::ipc_get_physical_mem`] holds.
    fn ipc_put_physical_mem(&self, payload: &[u8]) -> Result<()> {
        let _ = payload;
        Err(Error::unsupported(
            Aspect::ExtOneapiIpcPhysicalMemory,
            "ipc::physical_memory::put",
        ))
    }
    /// Opens an exported physical memory object on `device`.
    fn ipc_open_physical_mem(
        &self,
        device: &Arc<dyn Device>,
        import: IpcImport<'_>,
    ) -> Result<Arc<dyn PhysicalMem>> {
        let _ = (device, import);
        Err(Error::unsupported(
            Aspect::ExtOneapiIpcPhysicalMemory,
            "ipc::physical_memory::open",
        ))
    }
    /// Exports an event made with `enable_ipc`.
    fn ipc_get_event(&self, event: &Arc<dyn Event>) -> Result<IpcExport> {
        let _ = event;
        Err(Error::unsupported(
            Aspect::ExtOneapiIpcEvent,
            "ipc::event::get",
        ))
    }
    /// Releases what [`Context::ipc_get_event`] holds.
    fn ipc_put_event(&self, payload: &[u8]) -> Result<()> {
        let _ = payload;
        Err(Error::unsupported(
            Aspect::ExtOneapiIpcEvent,
            "ipc::event::put",
        ))
    }
    /// Opens an exported event; the result shares state with the exporter's event.
    fn ipc_open_event(&self, import: IpcImport<'_>) -> Result<Arc<dyn Event>> {
        let _ = import;
        Err(Error::unsupported(
            Aspect::ExtOneapiIpcEvent,
            "ipc::event::open",
        ))
    }
}

/// A queue on one device.
///
/// Dependencies may be events of any backend: a backend waits on foreign events from the host
/// before the command runs. Commands of an in-order queue run in submission order.
pub trait Queue: Send + Sync + Any {
    /// Its device.
    fn device(&self) -> &Arc<dyn Device>;
    /// Its properties.
    fn properties(&self) -> QueueProperties;
    /// For downcasting.
    fn as_any(&self) -> &dyn Any;

    /// Copies `size` bytes from `src` to `dst` (any USM kinds or host memory).
    ///
    /// # Safety
    /// Both ranges are valid for `size` bytes until the returned event completes, and `dst`
    /// is not otherwise accessed meanwhile.
    unsafe fn memcpy(
        &self,
        dst: u64,
        src: u64,
        size: usize,
        deps: &[Arc<dyn Event>],
    ) -> Result<Arc<dyn Event>>;

    /// Fills `size` bytes at `dst` with `pattern` repeated (`size` is a multiple of its length;
    /// a one-byte pattern is `memset`).
    ///
    /// # Safety
    /// As for [`Queue::memcpy`].
    unsafe fn fill(
        &self,
        dst: u64,
        pattern: &[u8],
        size: usize,
        deps: &[Arc<dyn Event>],
    ) -> Result<Arc<dyn Event>>;

    /// Hints that `[ptr, ptr+size)` will be used on the device soon.
    ///
    /// # Safety
    /// The range is a live allocation until the event completes.
    unsafe fn prefetch(
        &self,
        ptr: u64,
        size: usize,
        deps: &[Arc<dyn Event>],
    ) -> Result<Arc<dyn Event>>;

    /// Runs `task` on a host thread once `deps` (and, in order, earlier commands) completed.
    fn host_task(&self, task: HostTask, deps: &[Arc<dyn Event>]) -> Result<Arc<dyn Event>>;

    /// Runs a Rust closure over `range` on all cores (`ext_sycl_rs_closure_kernels`).
    fn parallel_for_closure(
        &self,
        range: LaunchRange,
        kernel: ClosureKernel,
        deps: &[Arc<dyn Event>],
    ) -> Result<Arc<dyn Event>> {
        let _ = (range, kernel, deps);
        Err(Error::unsupported(
            Aspect::ExtSyclRsClosureKernels,
            "parallel_for with a Rust closure",
        ))
    }

    /// Runs `kernel` over work-group indices `[0, groups)` on all cores, in chunks of at least
    /// one group (`#[sycl::kernel]` kernels that use work-groups, on the native CPU).
    fn parallel_for_work_groups(
        &self,
        groups: usize,
        kernel: ClosureKernel,
        deps: &[Arc<dyn Event>],
    ) -> Result<Arc<dyn Event>> {
        let _ = (groups, kernel, deps);
        Err(Error::unsupported(
            Aspect::ExtSyclRsClosureKernels,
            "work-group kernels on the host",
        ))
    }

    /// Launches a kernel from a bundle with `args`.
    ///
    /// # Safety
    /// Every pointer argument is valid for what the kernel does with it until the event
    /// completes.
    unsafe fn launch(
        &self,
        kernel: &Arc<dyn Kernel>,
        range: LaunchRange,
        args: &[KernelArg<'_>],
        deps: &[Arc<dyn Event>],
    ) -> Result<Arc<dyn Event>> {
        let _ = (kernel, range, args, deps);
        Err(Error::unsupported(Aspect::OnlineCompiler, "kernel launch"))
    }

    /// Checks and packs a launch of `kernel` over `range` with `args` as [`Queue::launch`]
    /// would, without launching it, for [`Queue::launch_packed`]: the launches a caller
    /// repeats with a few arguments changed skip the checks and the packing. `None`: this
    /// backend packs every launch ([`Queue::launch`] it).
    fn pack_launch(
        &self,
        kernel: &Arc<dyn Kernel>,
        range: LaunchRange,
        args: &[KernelArg<'_>],
    ) -> Result<Option<Arc<dyn PackedLaunch>>> {
        let _ = (kernel, range, args);
        Ok(None)
    }

    /// Launches `packed` (made by this queue's [`Queue::pack_launch`] or another queue's of
    /// the same device) after `deps`, argument `i` set to `value` for every `(i, value)` of
    /// `patches` (8-byte arguments, counted as `pack_launch`'s `args`).
    ///
    /// # Safety
    /// As [`Queue::launch`], for the packed arguments with `patches` applied.
    unsafe fn launch_packed(
        &self,
        packed: &dyn PackedLaunch,
        patches: &[(usize, u64)],
        deps: &[Arc<dyn Event>],
    ) -> Result<Arc<dyn Event>> {
        let _ = (packed, patches, deps);
        Err(Error::new(
            crate::Errc::FeatureNotSupported,
            "this backend does not pack launches",
        ))
    }

    /// Builds an executable graph of `launches`, which each replay runs one after another in
    /// this order (`cuGraphInstantiate`). Backends without graphs answer
    /// `Errc::FeatureNotSupported` (the runtime then replays the launches one by one).
    ///
    /// # Safety
    /// As [`Queue::launch`] for every launch, for as long as the graph may be replayed.
    unsafe fn build_graph(&self, launches: &[GraphLaunch<'_>]) -> Result<Arc<dyn Graph>> {
        let _ = launches;
        Err(Error::new(
            crate::Errc::FeatureNotSupported,
            "this backend has no kernel graphs",
        ))
    }

    /// Enqueues one replay of `graph` (built by this queue) after `deps`, having first
    /// stored `patch.1` into the 4-byte word at device address `patch.0` (stream-ordered
    /// before the graph's first launch). The event completes when the replay did.
    ///
    /// # Safety
    /// As [`Queue::launch`] for the graph's launches; `patch`'s word is device memory of this
    /// queue's device that nothing else accesses meanwhile.
    unsafe fn launch_graph(
        &self,
        graph: &Arc<dyn Graph>,
        patch: Option<(u64, u32)>,
        deps: &[Arc<dyn Event>],
    ) -> Result<Arc<dyn Event>> {
        let _ = (graph, patch, deps);
        Err(Error::new(
            crate::Errc::FeatureNotSupported,
            "this backend has no kernel graphs",
        ))
    }

    /// An event that completes when `deps` and (in-order queue) all earlier commands did.
    fn barrier(&self, deps: &[Arc<dyn Event>]) -> Result<Arc<dyn Event>>;

    /// Makes `event` (a standalone event) represent this point of the queue
    /// (`enqueue_signal_event`).
    fn enqueue_signal_event(&self, event: &Arc<dyn Event>) -> Result<()> {
        let _ = event;
        Err(Error::unsupported(
            Aspect::ExtOneapiReusableEvents,
            "enqueue_signal_event",
        ))
    }

    /// Later commands of this queue wait for `events` (`enqueue_wait_events`).
    fn enqueue_wait_events(&self, events: &[Arc<dyn Event>]) -> Result<()> {
        let _ = events;
        Err(Error::unsupported(
            Aspect::ExtOneapiReusableEvents,
            "enqueue_wait_events",
        ))
    }

    /// Blocks until every command submitted so far completed.
    fn wait(&self) -> Result<()>;

    /// Whether every command submitted so far has completed (no wait). Work the runtime may
    /// then do on the calling thread instead of submitting it is ordered as a command
    /// submitted now would be. Backends that cannot tell say `false`.
    fn is_idle(&self) -> bool {
        false
    }

    /// The CUDA stream (`CUstream`, as an integer) this queue's commands run in, in order:
    /// another library orders its work with this queue's through it (DLPack's `stream`,
    /// `cuStreamWaitEvent`). `None` for queues that are not one CUDA stream (the default).
    fn cuda_stream(&self) -> Option<u64> {
        None
    }
}

/// An event.
pub trait Event: Send + Sync + Any {
    /// Which backend it belongs to.
    fn backend(&self) -> BackendKind;
    /// For downcasting.
    fn as_any(&self) -> &dyn Any;
    /// Where the command stands.
    fn status(&self) -> Result<EventStatus>;
    /// Blocks until complete. An imported event whose exporter died is `Errc::Event`, never a
    /// hang.
    fn wait(&self) -> Result<()>;
    /// Blocks until complete or `timeout` passed; `Ok(false)` on time-out.
    fn wait_timeout(&self, timeout: Duration) -> Result<bool>;
    /// Profiling timestamps; `Errc::Profiling` when the event has none.
    fn profiling(&self) -> Result<ProfilingInfo>;
    /// Whether the event may be exported.
    fn ipc_enabled(&self) -> bool {
        false
    }
    /// sycl-rs extension (`ext_sycl_rs_event_signal_count`): how many `enqueue_signal_event`s
    /// of this standalone event have completed, counted across every process that shares it.
    fn signal_count(&self) -> Result<u64> {
        Err(Error::unsupported(
            Aspect::ExtSyclRsEventSignalCount,
            "Event::signal_count",
        ))
    }
    /// sycl-rs extension: blocks until [`Event::signal_count`] reaches `target` or `timeout`
    /// passes (`None`: no limit); `Ok(false)` on time-out. Like [`Event::wait`], an exporter or
    /// signaller that died is an error, never a hang.
    fn wait_signal_count(&self, target: u64, timeout: Option<Duration>) -> Result<bool> {
        let _ = (target, timeout);
        Err(Error::unsupported(
            Aspect::ExtSyclRsEventSignalCount,
            "Event::wait_signal_count",
        ))
    }
}

/// A built kernel bundle.
pub trait KernelBundle: Send + Sync + Any {
    /// The kernels it holds.
    fn kernel_names(&self) -> Vec<String>;
    /// One kernel by name; `Errc::Invalid` if there is none.
    fn kernel(&self, name: &str) -> Result<Arc<dyn Kernel>>;
}

/// A kernel of a bundle.
pub trait Kernel: Send + Sync + Any {
    /// Its name.
    fn name(&self) -> &str;
    /// Its argument count, where the backend can tell.
    fn num_args(&self) -> Option<u32>;
    /// For downcasting.
    fn as_any(&self) -> &dyn Any;
}

/// A physical memory object (`physical_mem`).
pub trait PhysicalMem: Send + Sync + Any {
    /// Size in bytes.
    fn size(&self) -> usize;
    /// Its device.
    fn device(&self) -> &Arc<dyn Device>;
    /// Whether it was made with `enable_ipc` (imported objects say true).
    fn ipc_enabled(&self) -> bool;
    /// For downcasting.
    fn as_any(&self) -> &dyn Any;
}

/// Downcasts a backend object to the backend's own type, or `Errc::BackendMismatch`.
pub fn downcast<'a, T: Any>(any: &'a dyn Any, what: &str, backend: BackendKind) -> Result<&'a T> {
    any.downcast_ref::<T>().ok_or_else(|| {
        Error::new(
            crate::Errc::BackendMismatch,
            format!("{what} does not belong to the {backend} backend"),
        )
    })
}

/// A wait that gives up: used by backends to implement [`Event::wait_timeout`] by polling a
/// status function, and to wait on events whose owner may die (a driver's blocking wait would
/// then hang). Polling reacts as fast as a driver's spin-wait: see [`poll_pause`].
pub fn poll_until(timeout: Duration, mut done: impl FnMut() -> Result<bool>) -> Result<bool> {
    let start = std::time::Instant::now();
    loop {
        if done()? {
            return Ok(true);
        }
        let waited = start.elapsed();
        if waited >= timeout {
            return Ok(false);
        }
        match poll_pause(waited) {
            PollPause::Spin => std::hint::spin_loop(),
            PollPause::Yield => std::thread::yield_now(),
            PollPause::Sleep(pause) => std::thread::sleep(pause.min(timeout - waited)),
        }
    }
}

/// What [`poll_until`] does between two polls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PollPause {
    /// Poll again at once (a CPU spin hint): reacts within one poll.
    Spin,
    /// Give the CPU to other threads, then poll (a system call: a microsecond or so).
    Yield,
    /// Sleep this long (plus the timer slack, ~50 µs).
    Sleep(Duration),
}

/// What [`poll_until`] does between two polls after `waited`.
///
/// A driver's blocking wait spins, so a poll must react as fast where that is felt: spin for
/// the first 50 µs (short waits, such as a small copy, notice completion within one poll),
/// then yield until 10 ms (a sleep's slack would still be felt), then sleep 1/128 of the time
/// waited, at most 1 ms. A wait overshoots by at most one pause plus the slack, about 1.3 %,
/// and a long one costs about a thousand wake-ups a second.
pub fn poll_pause(waited: Duration) -> PollPause {
    if waited < Duration::from_micros(50) {
        PollPause::Spin
    } else if waited < Duration::from_millis(10) {
        PollPause::Yield
    } else {
        PollPause::Sleep((waited / 128).min(Duration::from_millis(1)))
    }
}

/// A kernel launch checked and packed once ([`Queue::pack_launch`]), for
/// [`Queue::launch_packed`]. It keeps its kernel alive.
pub trait PackedLaunch: Send + Sync + Any {
    /// For downcasting.
    fn as_any(&self) -> &dyn Any;
}

/// An executable graph of kernel launches ([`Queue::build_graph`]).
pub trait Graph: Send + Sync + Any {
    /// For downcasting.
    fn as_any(&self) -> &dyn Any;
    /// How many launches each replay runs.
    fn launches(&self) -> usize;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Errc;

    #[test]
    fn polling_overshoots_little_against_the_time_waited() {
        // Spin, then yield, while a system call or a sleep's slack would be felt.
        for us in [0, 1, 49] {
            assert_eq!(
                poll_pause(Duration::from_micros(us)),
                PollPause::Spin,
                "{us} us"
            );
        }
        for us in [50, 100, 2_000, 9_999] {
            assert_eq!(
                poll_pause(Duration::from_micros(us)),
                PollPause::Yield,
                "{us} us"
            );
        }
        // Then: pause + 50 µs timer slack stays within 1.5 % of the time waited, and the
        // pause never exceeds 1 ms.
        let slack = Duration::from_micros(50);
        for ms in [10, 11, 20, 50, 128, 129, 1_000, 3_600_000] {
            let waited = Duration::from_millis(ms);
            let PollPause::Sleep(pause) = poll_pause(waited) else {
                panic!("{ms} ms: sleeps after 10 ms");
            };
            assert!(pause > Duration::ZERO && pause <= Duration::from_millis(1));
            let overshoot = (pause + slack).as_secs_f64() / waited.as_secs_f64();
            assert!(overshoot <= 0.015, "{ms} ms: {overshoot:.4}");
        }
    }

    #[test]
    fn poll_until_stops_at_done_or_timeout() {
        let mut n = 0;
        let r = poll_until(Duration::MAX, || {
            n += 1;
            Ok(n == 3)
        });
        assert!(r.unwrap());
        assert_eq!(n, 3);
        assert!(!poll_until(Duration::from_millis(1), || Ok(false)).unwrap());
        let e = poll_until(Duration::MAX, || Err(Error::invalid("broken"))).unwrap_err();
        assert_eq!(e.code(), Errc::Invalid);
    }
}
