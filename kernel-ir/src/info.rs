//! What a kernel needs of a device and of a launch, decided by the macro's analysis.

/// What a kernel needs of a device and of a launch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelInfo {
    /// The number of dimensions the kernel indexes (1 to 3): launches need at least these.
    pub dims: u8,
    /// Runs as work-groups (barriers, group reductions, sub-group collectives or local
    /// arrays): needs an nd-range.
    pub group: bool,
    /// Queries local or group ids or ranges: needs an nd-range.
    pub nd_queries: bool,
    /// Uses `f64`.
    pub fp64: bool,
    /// Uses 64-bit atomics.
    pub atomic64: bool,
    /// The memory orders its atomics and fences use ([`MemoryOrder::bit`]s; relaxed atomics
    /// count): each must be one the device has.
    ///
    /// [`MemoryOrder::bit`]: crate::ops::MemoryOrder::bit
    pub memory_orders: u8,
    /// The memory scopes its atomics on slices and its fences use ([`MemoryScope::bit`]s).
    ///
    /// [`MemoryScope::bit`]: crate::ops::MemoryScope::bit
    pub memory_scopes: u8,
    /// Uses sub-group queries or collectives.
    pub sub_groups: bool,
    /// The widest type a group reduction reduces, in bytes (0: none).
    pub reduce_bytes: usize,
    /// Bytes of work-group local arrays.
    pub local_bytes: usize,
    /// The work-group size every launch must have (`#[sycl::kernel(reqd_work_group_size(..))]`,
    /// in the order of `Range::with_local`, unused dimensions 1); `[0; 3]`: any.
    pub required_local: [usize; 3],
}
