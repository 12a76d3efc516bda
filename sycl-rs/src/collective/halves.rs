//! The 16-bit float types on the host, eight lanes at a time: the host steps' reductions of
//! f16 and bf16 (`host::reduce_halves`). `half`'s operators are right but go one element at
//! a time (bf16 in software with branches, f16 through a run-time CPU check per call): two
//! 64 KiB sources of bf16 took 68-88 us that way, f16 207-251 us. These are the same
//! conversions, to and from f32 lanes, written without calls; `host::avx2` does them in vector
//! registers where the CPU has AVX2 and F16C, and these run elsewhere. The tests hold both to
//! `half`'s bit for bit (every 16-bit input, and f32 inputs of every class), so ranks on host
//! steps still agree with ranks on kernels.

/// Lanes per 16-byte chunk.
pub(super) const LANES: usize = 8;

/// Which 16-bit float a chunk holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HalfFormat {
    F16,
    Bf16,
}

/// The format of each 16-bit float type.
pub(crate) trait HalfType {
    const FORMAT: HalfFormat;
}

impl HalfType for half::f16 {
    const FORMAT: HalfFormat = HalfFormat::F16;
}

impl HalfType for half::bf16 {
    const FORMAT: HalfFormat = HalfFormat::Bf16;
}

/// A 16-bit float format's lanes: each lane widened to f32 exactly (`half`'s `to_f32`: NaNs
/// quieted, payload kept), and rounded back (`half`'s `from_f32`: to nearest, ties to even;
/// NaNs quieted, the payload's high bits kept).
pub(super) trait Lanes {
    fn widen(h: [u16; LANES]) -> [f32; LANES];
    fn narrow(x: [f32; LANES]) -> [u16; LANES];
}

/// `f` of each lane (`array::map` is not inlined).
#[inline(always)]
fn each<A: Copy, B: Copy + Default>(lanes: [A; LANES], f: impl Fn(A) -> B) -> [B; LANES] {
    let mut out = [B::default(); LANES];
    for (o, &a) in out.iter_mut().zip(&lanes) {
        *o = f(a);
    }
    out
}

/// [`HalfFormat::F16`]'s lanes.
pub(super) struct F16Lanes;
/// [`HalfFormat::Bf16`]'s lanes.
pub(super) struct Bf16Lanes;

impl Lanes for F16Lanes {
    #[inline(always)]
    fn widen(h: [u16; LANES]) -> [f32; LANES] {
        each(h, f16_to_f32)
    }
    #[inline(always)]
    fn narrow(x: [f32; LANES]) -> [u16; LANES] {
        each(x, f32_to_f16)
    }
}

impl Lanes for Bf16Lanes {
    #[inline(always)]
    fn widen(h: [u16; LANES]) -> [f32; LANES] {
        each(h, bf16_to_f32)
    }
    #[inline(always)]
    fn narrow(x: [f32; LANES]) -> [u16; LANES] {
        each(x, f32_to_bf16)
    }
}

#[inline(always)]
fn bf16_to_f32(h: u16) -> f32 {
    let bits = (h as u32) << 16;
    let nan = (h & 0x7fff) > 0x7f80;
    f32::from_bits(if nan { bits | 0x0040_0000 } else { bits })
}

#[inline(always)]
fn f32_to_bf16(x: f32) -> u16 {
    let x = x.to_bits();
    let nan = (x & 0x7fff_ffff) > 0x7f80_0000;
    // Up when the dropped half is over half an ulp, or exactly half with an odd result.
    let up = ((x & 0x8000) != 0) & ((x & 0x17fff) != 0);
    let rounded = ((x >> 16) as u16).wrapping_add(up as u16);
    if nan {
        ((x >> 16) | 0x0040) as u16
    } else {
        rounded
    }
}

#[inline(always)]
fn f16_to_f32(h: u16) -> f32 {
    let h = h as u32;
    let sign = (h & 0x8000) << 16;
    let exponent = (h >> 10) & 0x1f;
    let mantissa = h & 0x3ff;
    let normal = ((exponent + 112) << 23) | (mantissa << 13);
    // Infinities, and NaNs quieted (payload kept).
    let special = 0x7f80_0000 | (mantissa << 13) | if mantissa != 0 { 0x0040_0000 } else { 0 };
    // Subnormals (and zero): mantissa * 2^-24, exact in f32 (through i32, which converts in
    // vector lanes; u32 does not).
    let small = (mantissa as i32 as f32 * f32::from_bits(0x3380_0000)).to_bits();
    let magnitude = match exponent {
        0 => small,
        0x1f => special,
        _ => normal,
    };
    f32::from_bits(sign | magnitude)
}

#[inline(always)]
fn f32_to_f16(x: f32) -> u16 {
    // After F. Giesen's `float_to_half_fast3_rtne` (public domain), with NaN payloads kept
    // as F16C and `half` keep them.
    const INFINITY: u32 = 0xff << 23;
    // The least f32 that rounds to infinity in f16 ...
    const OVERFLOW: u32 = (127 + 16) << 23;
    // ... and the least that is normal in f16.
    const NORMAL: u32 = 113 << 23;
    // Adding 0.5 here aligns a subnormal's mantissa to its f16 bits, rounding as the FPU
    // does: to nearest, ties to even.
    const SUBNORMAL_MAGIC: u32 = ((127 - 15) + (23 - 10) + 1) << 23;
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let abs = bits & 0x7fff_ffff;
    let nan = 0x7e00 | ((abs >> 13) & 0x3ff) as u16;
    let subnormal = {
        let sum = f32::from_bits(abs) + f32::from_bits(SUBNORMAL_MAGIC);
        sum.to_bits().wrapping_sub(SUBNORMAL_MAGIC) as u16
    };
    let normal = {
        let odd = (abs >> 13) & 1;
        // The exponent rebiased, and half an ulp less one added: with `odd`, ties go to even.
        let biased = abs
            .wrapping_add(((15u32.wrapping_sub(127)) << 23).wrapping_add(0xfff))
            .wrapping_add(odd);
        (biased >> 13) as u16
    };
    let magnitude = if abs > INFINITY {
        nan
    } else if abs >= OVERFLOW {
        0x7c00
    } else if abs < NORMAL {
        subnormal
    } else {
        normal
    };
    sign | magnitude
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::{bf16, f16};

    /// f32 bit patterns of every class: every exponent with mantissas at their ends and in
    /// between, both signs; the ties and near-ties of both formats' rounding.
    fn f32_patterns() -> impl Iterator<Item = u32> {
        let mantissas = [
            0, 1, 0x0fff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x3000, 0x7fff, 0x8000, 0x8001, 0x17fff,
            0x18000, 0x400000, 0x7fe000, 0x7ff000, 0x7fffff, 0x123456, 0x3fe000,
        ];
        (0..=255u32).flat_map(move |exponent| {
            mantissas
                .into_iter()
                .flat_map(move |m| [0u32, 1].map(|sign| sign << 31 | exponent << 23 | m))
        })
    }

    #[test]
    fn widening_is_halfs_for_every_input() {
        for h in 0..=u16::MAX {
            let (want, got) = (bf16::from_bits(h).to_f32(), bf16_to_f32(h));
            assert_eq!(got.to_bits(), want.to_bits(), "bf16 {h:#06x}");
            let (want, got) = (f16::from_bits(h).to_f32(), f16_to_f32(h));
            assert_eq!(got.to_bits(), want.to_bits(), "f16 {h:#06x}");
        }
    }

    #[test]
    fn narrowing_is_halfs() {
        // Every value a 16-bit float widens to, and its neighbours, and the patterns.
        let widened = (0..=u16::MAX).flat_map(|h| {
            let a = bf16::from_bits(h).to_f32().to_bits();
            let b = f16::from_bits(h).to_f32().to_bits();
            [
                a,
                a.wrapping_add(1),
                a.wrapping_sub(1),
                b,
                b.wrapping_add(1),
                b.wrapping_sub(1),
            ]
        });
        // Halfway points between neighbouring f16 values (ties).
        let ties = (0..0x7c00u16).map(|h| {
            let (a, b) = (f16::from_bits(h).to_f32(), f16::from_bits(h + 1).to_f32());
            ((a as f64 + b as f64) / 2.0) as f32
        });
        for bits in widened.chain(f32_patterns()).chain(ties.map(f32::to_bits)) {
            let x = f32::from_bits(bits);
            assert_eq!(
                f32_to_bf16(x),
                bf16::from_f32(x).to_bits(),
                "bf16 of {bits:#010x}"
            );
            assert_eq!(
                f32_to_f16(x),
                f16::from_f32(x).to_bits(),
                "f16 of {bits:#010x}"
            );
        }
    }

    /// Lanes widened, combined in f32 as `host::reduce` does, and narrowed: `half`'s
    /// operators (and min/max through f32, as the kernels').
    fn combines_as_halfs_operators<L: Lanes, H: Copy>(
        from_bits: fn(u16) -> H,
        to_bits: fn(H) -> u16,
        want: [fn(H, H) -> H; 4],
    ) {
        let values = [
            0x3c00u16, 0x8000, 0, 0x7c00, 0xfc00, 0x7e01, 0x0001, 0x7bff, 0xc500,
        ];
        let ops: [fn(f32, f32) -> f32; 4] = [|x, y| x + y, |x, y| x * y, f32::min, f32::max];
        for &a in &values {
            for (op, f) in ops.iter().enumerate() {
                let y: [u16; LANES] = values[..LANES].try_into().expect("8 values");
                let (x, y_wide) = (L::widen([a; LANES]), L::widen(y));
                let got = L::narrow(std::array::from_fn(|k| f(x[k], y_wide[k])));
                for (k, &b) in y.iter().enumerate() {
                    let want = to_bits(want[op](from_bits(a), from_bits(b)));
                    assert_eq!(got[k], want, "op {op}: {a:#06x}, {b:#06x}");
                }
            }
        }
    }

    #[test]
    fn lanes_combine_as_halfs_operators() {
        combines_as_halfs_operators::<F16Lanes, f16>(
            f16::from_bits,
            f16::to_bits,
            [
                |p, q| p + q,
                |p, q| p * q,
                |p, q| f16::from_f32(p.to_f32().min(q.to_f32())),
                |p, q| f16::from_f32(p.to_f32().max(q.to_f32())),
            ],
        );
        combines_as_halfs_operators::<Bf16Lanes, bf16>(
            bf16::from_bits,
            bf16::to_bits,
            [
                |p, q| p + q,
                |p, q| p * q,
                |p, q| bf16::from_f32(p.to_f32().min(q.to_f32())),
                |p, q| bf16::from_f32(p.to_f32().max(q.to_f32())),
            ],
        );
    }
}
