//! The scalar types of the kernel language.

/// A scalar type of the kernel language: parameters, locals, slice elements, expressions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scalar {
    /// `bool`
    Bool,
    /// `i32`
    I32,
    /// `u32`
    U32,
    /// `i64`
    I64,
    /// `u64`
    U64,
    /// `usize` (64-bit on every device)
    Usize,
    /// `f32`
    F32,
    /// `f64`
    F64,
    /// `half::f16`: IEEE binary16. Each operation computes in `f32` and rounds to the nearest
    /// (ties to even), as the `half` crate's arithmetic does.
    F16,
    /// `half::bf16`: bfloat16, likewise.
    Bf16,
}

impl Scalar {
    /// Every scalar type, in wire-code order.
    pub const ALL: [Scalar; 10] = [
        Scalar::Bool,
        Scalar::I32,
        Scalar::U32,
        Scalar::I64,
        Scalar::U64,
        Scalar::Usize,
        Scalar::F32,
        Scalar::F64,
        Scalar::F16,
        Scalar::Bf16,
    ];

    /// The type a Rust name spells (`"u32"`), if it is one of the language's.
    pub fn from_name(name: &str) -> Option<Scalar> {
        Scalar::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Its Rust name.
    pub const fn name(self) -> &'static str {
        match self {
            Scalar::Bool => "bool",
            Scalar::I32 => "i32",
            Scalar::U32 => "u32",
            Scalar::I64 => "i64",
            Scalar::U64 => "u64",
            Scalar::Usize => "usize",
            Scalar::F32 => "f32",
            Scalar::F64 => "f64",
            Scalar::F16 => "f16",
            Scalar::Bf16 => "bf16",
        }
    }

    /// Bytes of its value (a kernel argument, an element).
    pub const fn size(self) -> usize {
        match self {
            Scalar::Bool => 1,
            Scalar::F16 | Scalar::Bf16 => 2,
            Scalar::I32 | Scalar::U32 | Scalar::F32 => 4,
            Scalar::I64 | Scalar::U64 | Scalar::Usize | Scalar::F64 => 8,
        }
    }

    /// Bits of its value (`bool`: 8).
    pub const fn bits(self) -> u32 {
        self.size() as u32 * 8
    }

    /// An integer type.
    pub const fn is_int(self) -> bool {
        matches!(
            self,
            Scalar::I32 | Scalar::U32 | Scalar::I64 | Scalar::U64 | Scalar::Usize
        )
    }

    /// An unsigned integer type.
    pub const fn is_unsigned(self) -> bool {
        matches!(self, Scalar::U32 | Scalar::U64 | Scalar::Usize)
    }

    /// A signed integer type.
    pub const fn is_signed(self) -> bool {
        matches!(self, Scalar::I32 | Scalar::I64)
    }

    /// A floating-point type.
    pub const fn is_float(self) -> bool {
        matches!(self, Scalar::F32 | Scalar::F64 | Scalar::F16 | Scalar::Bf16)
    }

    /// `f16` or `bf16`: stored in 16 bits, computed in `f32` and rounded after each operation.
    pub const fn is_half(self) -> bool {
        matches!(self, Scalar::F16 | Scalar::Bf16)
    }

    /// An integer or floating-point type.
    pub const fn is_numeric(self) -> bool {
        self.is_int() || self.is_float()
    }

    /// A type slices (USM) and local arrays may hold.
    pub const fn is_element(self) -> bool {
        self.is_numeric()
    }

    /// The largest value of an unsigned type (0 for any other).
    pub const fn unsigned_max(self) -> u64 {
        match self {
            Scalar::U32 => u32::MAX as u64,
            Scalar::U64 | Scalar::Usize => u64::MAX,
            _ => 0,
        }
    }
}
